package flowdoc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hephaestus-go/hephaestus/flow"
)

// untilSpec is a step's wait_until: the time the step waits for, literal
// or a template that gives it from the run's input and the outputs of
// earlier steps.
type untilSpec struct {
	n   *node
	lit time.Time // the literal time; zero for a template
}

// untilFix is what to write in a wait_until.
const untilFix = `write an RFC 3339 time with its zone, such as "2026-12-01T09:00:00Z", or a template that gives one, such as "{{input.due}}"`

// parseUntil reads the time of a wait_until.
func parseUntil(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
}

// waitUntil parses a step's wait_until (k its key, v its value).
func (p *parser) waitUntil(s *stepDoc, k, v *node) {
	path := join(s.path, "wait_until")
	switch {
	case s.action != "":
		p.c.add(s.actionN, join(s.path, "action"), "move the action to a step before or after the wait", "a step with wait_until calls no action")
	case s.approval != nil:
		p.c.add(k, path, "keep one of them: a step waits for a decision or until a time", "the step has wait_until and approval")
	case s.wait != nil:
		p.c.add(k, path, "keep one of them: for a wait for events that ends at a time, route the wait's timeout", "the step has wait_until and wait")
	case s.over != "":
		p.c.add(s.overN, join(s.path, "map"), "map in one step and wait in another", "a map step cannot wait")
	case len(s.branch) > 0:
		p.c.add(s.branchN, join(s.path, "branch"), "branch in a step after the wait", "a step with wait_until has no result to branch on")
	}
	if v.kind != yaml.ScalarNode || (v.tag != "!!str" && v.tag != "!!timestamp") || v.value == "" {
		p.c.add(v, path, untilFix, "expected a time, found %s", v.kindName())
		return
	}
	u := &untilSpec{n: v}
	if !strings.Contains(v.value, "{{") {
		t, err := parseUntil(v.value)
		if err != nil {
			p.c.add(v, path, untilFix, "%q is not a time", v.value)
			return
		}
		u.lit = t
	}
	s.until = u
}

// compileUntil compiles the template of a step's wait_until and returns
// refs with its references appended; a secret is refused.
func (k *compiler) compileUntil(s *stepDoc, rt *stepRT, refs []refAt) []refAt {
	if s.until == nil || !s.until.lit.IsZero() {
		return refs
	}
	var own []refAt
	rt.until = compileValue(s.until.n, join(s.path, "wait_until"), k.c, &own)
	for _, r := range own {
		if r.r.root == "secret" {
			k.c.add(r.n, r.path, "read the time from input, steps.<step>.output or run", "{{%s}}: a wait_until reads no secret", r.r.text)
			continue
		}
		refs = append(refs, r)
	}
	return refs
}

// waitUntil is the code of a step with wait_until: it resolves the time
// and, while the runtime's clock is before it, snoozes until then (the
// step's task is scheduled again for that time, durably, counting no
// attempt); then it completes with ok and {"until": <the time>}.
func (rt *stepRT) waitUntil(ctx context.Context, in json.RawMessage) (flow.Result[json.RawMessage], error) {
	s := rt.doc
	due := s.until.lit
	if due.IsZero() {
		sc, _, _, err := rt.prepare(ctx, in, nil, false)
		if err != nil {
			return flow.Result[json.RawMessage]{}, err
		}
		v, err := rt.until.resolve(sc)
		if err != nil {
			var te *TemplateError
			if errors.As(err, &te) {
				err = flow.NonRetryable(err)
			}
			return flow.Result[json.RawMessage]{}, err
		}
		str, ok := v.(string)
		if !ok {
			raw, _ := json.Marshal(v)
			return flow.Result[json.RawMessage]{}, flow.NonRetryable(fmt.Errorf("step %q: wait_until: %s gave %s, not a time (an RFC 3339 string)", s.name, s.until.n.value, raw))
		}
		if due, err = parseUntil(str); err != nil {
			return flow.Result[json.RawMessage]{}, flow.NonRetryable(fmt.Errorf("step %q: wait_until: %s gave %q, not an RFC 3339 time (such as 2026-12-01T09:00:00Z)", s.name, s.until.n.value, str))
		}
	}
	if now := flow.Now(ctx); now.Before(due) {
		return flow.Result[json.RawMessage]{}, flow.Snooze(due.Sub(now))
	}
	out, err := json.Marshal(map[string]string{"until": due.UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return flow.Result[json.RawMessage]{}, flow.NonRetryable(err)
	}
	return flow.Ok(json.RawMessage(out)), nil
}
