package flowdoc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

type searchIn struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
}

type searchOut struct {
	ID    string   `json:"id"`
	Hits  int      `json:"hits"`
	Words []string `json:"words"`
}

// tools is a registry standing in for the seed's tools.
func tools(t *testing.T) *flowdoc.Registry {
	t.Helper()
	reg := flowdoc.NewRegistry()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(flowdoc.RegisterAction(reg, "knowledge_search", func(ctx context.Context, c flowdoc.ActionCall, in searchIn) (searchOut, error) {
		return searchOut{ID: "doc-" + in.Query, Hits: in.Limit, Words: strings.Fields(in.Query)}, nil
	}))
	must(flowdoc.RegisterAction(reg, "knowledge_get", func(ctx context.Context, c flowdoc.ActionCall, in map[string]any) (map[string]any, error) {
		return map[string]any{"summary": "summary of " + in["id"].(string), "by": c.CreatedBy}, nil
	}))
	must(flowdoc.RegisterAction(reg, "echo", func(ctx context.Context, c flowdoc.ActionCall, in json.RawMessage) (json.RawMessage, error) {
		return in, nil
	}))
	must(flowdoc.RegisterAction(reg, "search", func(ctx context.Context, c flowdoc.ActionCall, in searchIn) (searchOut, error) {
		return searchOut{ID: in.Query}, nil
	}))
	must(flowdoc.RegisterAction(reg, "value", func(ctx context.Context, c flowdoc.ActionCall, in map[string]any) (any, error) {
		return in["v"], nil
	}))
	must(flowdoc.RegisterAction(reg, "is_admin", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		User string `json:"user"`
	}) (bool, error) {
		return in.User == "root", nil
	}))
	must(flowdoc.RegisterAction(reg, "fail", func(ctx context.Context, c flowdoc.ActionCall, in struct{}) (any, error) {
		return nil, errors.New("boom")
	}))
	return reg
}

const research = `
$schema: https://hephaestus-go.dev/schemas/flowdoc.json
name: research
steps:
  search:
    action: knowledge_search
    args: {query: "{{input.topic}}", limit: "{{input.limit}}"}
    next: summarize
  summarize:
    action: knowledge_get
    args: {id: "{{steps.search.output.id}}"}
    next: notify
  notify:
    action: echo
    args:
      message: "Research on {{input.topic}} complete: {{steps.summarize.output.summary}} ({{steps.search.output.hits}} hits)"
      first: "{{steps.search.output.words.0}}"
      by: "{{run.created_by}}"
    done: true
`

func TestResearchRunsInMemory(t *testing.T) {
	f, err := flowdoc.Load("research.yaml", []byte(research), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hephtest.RunFlow(context.Background(), f, map[string]any{"topic": "AI safety", "limit": 7, "created_by": "james"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status() != hephtype.StatusCompleted {
		t.Fatalf("status %s (%s), history %v", r.Status(), r.Err(), r.History())
	}
	search, _ := r.Step("search")
	if got := string(search.Output); got != `{"id":"doc-AI safety","hits":7,"words":["AI","safety"]}` {
		t.Errorf("search output %s: a whole template must keep the number 7", got)
	}
	notify, _ := r.Step("notify")
	var out map[string]any
	if err := json.Unmarshal(notify.Output, &out); err != nil {
		t.Fatal(err)
	}
	if out["message"] != "Research on AI safety complete: summary of doc-AI safety (7 hits)" || out["first"] != "AI" || out["by"] != "james" {
		t.Errorf("notify arguments %v", out)
	}
}

const branching = `
name: greet
steps:
  check_admin:
    action: is_admin
    args: {user: "{{input.user}}"}
    branch:
      - if: result == true
        then: admin_action
      - if: result == false
        then: user_action
  admin_action: {action: echo, args: {greeting: "hello admin"}, done: true}
  user_action: {action: echo, args: {greeting: "hi {{input.user}}"}, done: true}
`

func TestBranchTakesFirstMatch(t *testing.T) {
	f, err := flowdoc.Load("greet.yaml", []byte(branching), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]string{"root": "admin_action", "ann": "user_action"} {
		r, err := hephtest.RunFlow(context.Background(), f, map[string]string{"user": user})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status() != hephtype.StatusCompleted {
			t.Fatalf("%s: status %s (%s)", user, r.Status(), r.Err())
		}
		for _, s := range []string{"admin_action", "user_action"} {
			st, _ := r.Step(s)
			ran := st.Status == hephtype.StepCompleted
			if ran != (s == want) {
				t.Errorf("user %s: step %s ran=%v, want only %s", user, s, ran, want)
			}
		}
	}
}

func TestConditionsSeedFormsAndCEL(t *testing.T) {
	doc := func(cond string) string {
		return `
name: c
steps:
  s:
    action: value
    args: {v: "{{input.v}}"}
    branch:
      - if: ` + cond + `
        then: yes
      - else: no
  yes: {action: echo, done: true}
  no: {action: echo, done: true}
`
	}
	cases := []struct {
		cond  string
		input string
		yes   bool
	}{
		{`result == true`, `{"v": true}`, true},
		{`result == true`, `{"v": "yes"}`, false},
		{`result == false`, `{"v": false}`, true},
		{`result != nil`, `{"v": "x"}`, true},
		{`result != nil`, `{"v": null}`, false},
		{`result == nil`, `{"v": null}`, true},
		{`result == "x"`, `{"v": "x"}`, true},
		{`result != "x"`, `{"v": "x"}`, false},
		{`result == admin`, `{"v": "admin"}`, true},
		{`result != admin`, `{"v": "admin"}`, false},
		{`result.n > 3 && input.v.w.startsWith("a")`, `{"v": {"w": "abc", "n": 4}}`, true},
		{`result.n > 3 && input.v.w.startsWith("a")`, `{"v": {"w": "abc", "n": 2}}`, false},
		{`run.attempt == 1 && run.id != "" && run.created_by == "ann"`, `{"v": 1, "created_by": "ann"}`, true},
	}
	for _, tc := range cases {
		f, err := flowdoc.Load("c.yaml", []byte(doc(tc.cond)), tools(t))
		if err != nil {
			t.Fatalf("%s: %v", tc.cond, err)
		}
		r, err := hephtest.RunFlow(context.Background(), f, json.RawMessage(tc.input))
		if err != nil {
			t.Fatal(err)
		}
		st, _ := r.Step("yes")
		yes := st.Status == hephtype.StepCompleted
		if r.Status() != hephtype.StatusCompleted || yes != tc.yes {
			t.Errorf("%s over %s: status %s (%s), yes=%v, want %v", tc.cond, tc.input, r.Status(), r.Err(), yes, tc.yes)
		}
	}
}

func TestMissingReferenceFailsWithoutRetry(t *testing.T) {
	doc := `
name: miss
steps:
  s:
    action: echo
    args: {q: "{{input.topic.name}}"}
    retry: {max_attempts: 5}
    done: true
`
	f, err := flowdoc.Load("miss.yaml", []byte(doc), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hephtest.RunFlow(context.Background(), f, map[string]any{"other": 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status() != hephtype.StatusFailed || r.Calls["s"] != 1 {
		t.Fatalf("status %s after %d calls, want failed after 1", r.Status(), r.Calls["s"])
	}
	if !strings.Contains(r.Err(), `step "s": template {{input.topic.name}}: no field "topic"`) {
		t.Errorf("error %q does not name the step and template", r.Err())
	}
}

func TestParallelJoinMapWait(t *testing.T) {
	doc := `
name: pjmw
defaults: {timeout: 10s, queue: docs, priority: 2, retry: {max_attempts: 2}}
business_key: {name: topic, scope: forever}
tags: [docs]
metadata: {team: core}
steps:
  start:
    action: echo
    args: {items: ["a", "b", "c"]}
    parallel: [left, right]
  left: {action: echo, args: {side: left}, join: merge}
  right: {action: echo, args: {side: right}, join: merge, queue: fast, priority: 9}
  merge:
    action: echo
    args: {l: "{{steps.left.output.side}}", r: "{{steps.right.output.side}}"}
    next: each
  each:
    map: steps.start.output.items
    action: echo
    args: {item: "{{item}}", l: "{{steps.merge.output.l}}"}
    next: approve
  approve:
    wait: {events: [approved, rejected], timeout: 1h}
    on: {approved: publish, rejected: done, timeout: done}
  publish: {action: echo, args: {by: "{{steps.approve.output.by}}"}, done: true}
`
	f, err := flowdoc.Load("pjmw.yaml", []byte(doc), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	if k, scope := f.BusinessKey(); k != "topic" || scope != flow.ScopeForever {
		t.Errorf("business key %s %s", k, scope)
	}
	if tags := f.Tags(); len(tags) != 1 || tags[0] != "docs" || string(f.Metadata()["team"]) != `"core"` {
		t.Errorf("tags %v metadata %v", tags, f.Metadata())
	}
	right, _ := f.Step("right")
	left, _ := f.Step("left")
	if right.Queue != "fast" || right.Priority != 9 || left.Queue != "docs" || left.Priority != 2 || left.Retry.MaxAttempts != 2 || left.Timeout.String() != "10s" {
		t.Errorf("options: left %+v right %+v", left, right)
	}
	ap, _ := f.Step("approve")
	if !ap.Waits || ap.WaitTimeout.String() != "1h0m0s" {
		t.Errorf("approve %+v", ap)
	}
	ctx := context.Background()
	r, err := hephtest.RunFlow(ctx, f, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status() != hephtype.StatusWaiting {
		t.Fatalf("status %s (%s), want waiting", r.Status(), r.Err())
	}
	each, _ := r.Step("each")
	if got := string(each.Output); got != `[{"item":"a","l":"left"},{"item":"b","l":"left"},{"item":"c","l":"left"}]` {
		t.Errorf("map output %s", got)
	}
	if err := r.Resume(ctx, "approve", "approved", map[string]string{"by": "ann"}); err != nil {
		t.Fatal(err)
	}
	pub, _ := r.Step("publish")
	if r.Status() != hephtype.StatusCompleted || string(pub.Output) != `{"by":"ann"}` {
		t.Errorf("status %s, publish %s", r.Status(), pub.Output)
	}
	// The timeout is routed like any event.
	r2, err := hephtest.RunFlow(ctx, f, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.FireTimer(ctx, "approve"); err != nil {
		t.Fatal(err)
	}
	if st, _ := r2.Step("publish"); r2.Status() != hephtype.StatusCompleted || st.Status != hephtype.StepSkipped {
		t.Errorf("after the timeout: status %s, publish %s", r2.Status(), st.Status)
	}
}

func TestFailedRoute(t *testing.T) {
	doc := `{
  "name": "comp",
  "steps": {
    "s": {"action": "fail", "retry": {"max_attempts": 1}, "next": "t", "on": {"failed": "undo"}},
    "t": {"action": "echo", "done": true},
    "undo": {"action": "echo", "args": {"why": "{{steps.s.output.error}}"}, "done": true}
  }
}`
	f, err := flowdoc.Load("comp.json", []byte(doc), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	r, err := hephtest.RunFlow(context.Background(), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	undo, _ := r.Step("undo")
	ran := undo.Status == hephtype.StepCompleted
	if r.Status() != hephtype.StatusCompleted || !ran || !strings.Contains(string(undo.Output), "boom") {
		t.Errorf("status %s (%s), undo %v %s", r.Status(), r.Err(), ran, undo.Output)
	}
}

func TestLimitsAndNoMatch(t *testing.T) {
	ctx := context.Background()
	load := func(doc string) *flow.Flow {
		t.Helper()
		f, err := flowdoc.Load("l.yaml", []byte(doc), tools(t))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	cases := []struct {
		name, doc string
		input     any
		err       string
	}{
		{"no case matches", `
name: l
steps:
  s:
    action: value
    args: {v: "{{input.v}}"}
    branch:
      - if: result == "a"
        then: done
`, map[string]string{"v": "b"}, `step "s": no branch condition matched the result "b"; add an else case`},
		{"condition cost", `
name: l
steps:
  s:
    action: value
    args: {v: "{{input.xs}}"}
    branch:
      - if: result.map(x, result.map(y, x * y)).size() > 0
        then: done
`, map[string]any{"xs": make([]int, 1000)}, "cost limit exceeded"},
		{"condition error", `
name: l
steps:
  s:
    action: value
    args: {v: "{{input.v}}"}
    branch:
      - if: result.missing == 1
        then: done
`, map[string]any{"v": map[string]int{"a": 1}}, `step "s": condition "result.missing == 1"`},
		{"template output", `
name: l
steps:
  s:
    action: echo
    args: {v: "{{input.big}}{{input.big}}"}
    done: true
`, map[string]string{"big": strings.Repeat("x", flowdoc.MaxTemplateOutput/2+1)}, "grows beyond"},
	}
	for _, tc := range cases {
		r, err := hephtest.RunFlow(ctx, load(tc.doc), tc.input)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status() != hephtype.StatusFailed || r.Calls["s"] != 1 || !strings.Contains(r.Err(), tc.err) {
			t.Errorf("%s: status %s after %d calls, error %q; want failed at once with %q", tc.name, r.Status(), r.Calls["s"], r.Err(), tc.err)
		}
	}
}
