package flowdoc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

const remindDoc = `
name: remind
steps:
  plan:
    action: echo
    args: {at: "{{input.due}}"}
    next: hold
  hold:
    wait_until: "{{steps.plan.output.at}}"
    next: fixed
  fixed:
    wait_until: 2031-01-01T00:00:00Z
    next: send
  send:
    action: echo
    args: {msg: "due {{input.due}}"}
    done: true
`

// invokeAt runs a step of f as the runtime would at the time now.
func invokeAt(t *testing.T, f *flow.Flow, step string, input map[string]any, now time.Time) (flow.Outcome, error) {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	return f.Invoke(context.Background(), flow.Call{RunID: "r", Step: step, Index: -1, Attempt: 1, Input: in, Now: func() time.Time { return now }})
}

// A wait_until step snoozes until its time by the runtime's clock (the
// call's Now), then completes with ok and the time; a literal time works
// as a template's does; a time already past does not wait.
func TestWaitUntilStep(t *testing.T) {
	f, err := flowdoc.Load("remind.yaml", []byte(remindDoc), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2030, 6, 1, 9, 0, 0, 0, time.UTC)
	in := map[string]any{"input": map[string]any{"due": due.Format(time.RFC3339)}, "plan": map[string]any{"at": due.Format(time.RFC3339)}}
	_, err = invokeAt(t, f, "hold", in, due.Add(-90*time.Minute))
	var sz *flow.SnoozeError
	if !errors.As(err, &sz) || sz.After != 90*time.Minute {
		t.Fatalf("before the time: %v, want a snooze of 1h30m", err)
	}
	for _, now := range []time.Time{due, due.Add(time.Hour)} {
		out, err := invokeAt(t, f, "hold", in, now)
		if err != nil || out.Event != flow.EventOK || string(out.Output) != `{"until":"2030-06-01T09:00:00Z"}` {
			t.Fatalf("at %v: %+v, %v; want ok with the time", now, out, err)
		}
	}
	fixed := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := invokeAt(t, f, "fixed", in, fixed.Add(-time.Second)); !errors.As(err, &sz) || sz.After != time.Second {
		t.Fatalf("a literal time, a second before: %v, want a snooze of 1s", err)
	}
	if out, err := invokeAt(t, f, "fixed", in, fixed); err != nil || out.Event != flow.EventOK {
		t.Fatalf("a literal time, reached: %+v, %v", out, err)
	}
	// A template that gives no time fails the step without a retry,
	// saying what it gave.
	for _, c := range []struct {
		at   any
		want string
	}{
		{"next tuesday", `gave "next tuesday", not an RFC 3339 time`},
		{42, "gave 42, not a time"},
	} {
		bad := map[string]any{"input": map[string]any{}, "plan": map[string]any{"at": c.at}}
		_, err := invokeAt(t, f, "hold", bad, due)
		if err == nil || (flow.RetryPolicy{}).Retryable(err) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `step "hold"`) {
			t.Errorf("wait_until of %v: %v; want a non-retryable error saying %q", c.at, err, c.want)
		}
	}
}

// Bad wait_until steps: each error at its line, column and field.
func TestWaitUntilValidation(t *testing.T) {
	for _, c := range []struct {
		rule, doc string
		line, col int
		path, msg string
	}{
		{"not a time", "name: v\nsteps:\n  a:\n    wait_until: tomorrow\n    done: true\n", 4, 17, "steps.a.wait_until", `"tomorrow" is not a time`},
		{"no zone", "name: v\nsteps:\n  a:\n    wait_until: \"2030-01-01T10:00:00\"\n    done: true\n", 4, 17, "steps.a.wait_until", `is not a time`},
		{"a list", "name: v\nsteps:\n  a:\n    wait_until: [1]\n    done: true\n", 4, 17, "steps.a.wait_until", "expected a time, found a list"},
		{"with action", "name: v\nsteps:\n  a:\n    action: echo\n    wait_until: 2030-01-01T00:00:00Z\n    done: true\n", 4, 13, "steps.a.action", "a step with wait_until calls no action"},
		{"with wait", "name: v\nsteps:\n  a:\n    wait: true\n    wait_until: 2030-01-01T00:00:00Z\n    done: true\n", 5, 5, "steps.a.wait_until", "the step has wait_until and wait"},
		{"template syntax", "name: v\nsteps:\n  a:\n    wait_until: \"{{input.due\"\n    done: true\n", 4, 17, "steps.a.wait_until", "opening {{ without a closing }}"},
		{"unknown step", "name: v\nsteps:\n  a:\n    wait_until: \"{{steps.b.output}}\"\n    done: true\n", 4, 17, "steps.a.wait_until", `reads unknown step "b"`},
		{"secret", "name: v\nsteps:\n  a:\n    wait_until: \"{{secret.key}}\"\n    done: true\n", 4, 17, "steps.a.wait_until", "a wait_until reads no secret"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			_, err := flowdoc.Load("v.yaml", []byte(c.doc), tools(t))
			var e *flowdoc.Error
			for _, x := range flowdoc.Errors(err) {
				if x.Path == c.path {
					e = x
					break
				}
			}
			if e == nil {
				t.Fatalf("no error at %s: %v", c.path, err)
			}
			if e.Line != c.line || e.Column != c.col || !strings.Contains(e.Message, c.msg) || e.Fix == "" {
				t.Fatalf("%d:%d %q (fix %q); want %d:%d and %q", e.Line, e.Column, e.Message, e.Fix, c.line, c.col, c.msg)
			}
		})
	}
}
