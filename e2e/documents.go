package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// The seed's documents (seed 002), with a Go action registry standing in
// for its tools.

const researchDoc = `
$schema: https://hephaestus-go.dev/schemas/flowdoc.json
name: doc-research
steps:
  search:
    action: knowledge_search
    args: {query: "{{input.topic}}"}
    next: summarize
  summarize:
    action: knowledge_get
    args: {id: "{{steps.search.output.id}}"}
    next: notify
  notify:
    action: pushover_send
    args: {message: "Research complete: {{steps.summarize.output.title}}", user: "{{run.created_by}}"}
    done: true
`

const branchingDoc = `{
  "name": "doc-branching",
  "steps": {
    "check_admin": {
      "action": "is_admin",
      "args": {"user": "{{input.user}}"},
      "branch": [
        {"if": "result == true", "then": "admin_action"},
        {"if": "result == false", "then": "user_action"}
      ]
    },
    "admin_action": {"action": "knowledge_add", "args": {"title": "{{input.title}}"}, "done": true},
    "user_action": {"action": "get_greeting", "args": {"user": "{{input.user}}"}, "done": true}
  }
}`

// docTools is the action registry of the document tests; calls counts
// the calls of each action.
type docTools struct {
	reg   *flowdoc.Registry
	calls map[string]*atomic.Int32
	block func(ctx context.Context) error // run by "slow", when set
}

func newDocTools(t *testing.T) *docTools {
	t.Helper()
	d := &docTools{reg: flowdoc.NewRegistry(), calls: map[string]*atomic.Int32{}}
	for _, n := range []string{"knowledge_search", "knowledge_get", "pushover_send", "is_admin", "knowledge_add", "get_greeting", "slow"} {
		d.calls[n] = &atomic.Int32{}
	}
	type query struct {
		Query string `json:"query"`
	}
	type user struct {
		User string `json:"user"`
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(flowdoc.RegisterAction(d.reg, "knowledge_search", func(ctx context.Context, c flowdoc.ActionCall, in query) (map[string]any, error) {
		d.calls["knowledge_search"].Add(1)
		return map[string]any{"id": "doc-" + strings.ReplaceAll(in.Query, " ", "-"), "hits": 3}, nil
	}))
	must(flowdoc.RegisterAction(d.reg, "knowledge_get", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		ID string `json:"id"`
	}) (map[string]any, error) {
		d.calls["knowledge_get"].Add(1)
		return map[string]any{"title": "notes on " + in.ID}, nil
	}))
	must(flowdoc.RegisterAction(d.reg, "pushover_send", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		Message string `json:"message"`
		User    string `json:"user"`
	}) (string, error) {
		d.calls["pushover_send"].Add(1)
		return "sent to " + c.CreatedBy + ": " + in.Message, nil
	}))
	must(flowdoc.RegisterAction(d.reg, "is_admin", func(ctx context.Context, c flowdoc.ActionCall, in user) (bool, error) {
		d.calls["is_admin"].Add(1)
		return in.User == "root", nil
	}))
	must(flowdoc.RegisterAction(d.reg, "knowledge_add", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		Title string `json:"title"`
	}) (string, error) {
		d.calls["knowledge_add"].Add(1)
		return "added " + in.Title, nil
	}))
	must(flowdoc.RegisterAction(d.reg, "get_greeting", func(ctx context.Context, c flowdoc.ActionCall, in user) (string, error) {
		d.calls["get_greeting"].Add(1)
		return "hello " + in.User, nil
	}))
	must(flowdoc.RegisterAction(d.reg, "slow", func(ctx context.Context, c flowdoc.ActionCall, in json.RawMessage) (json.RawMessage, error) {
		if d.calls["slow"].Add(1) == 1 && d.block != nil {
			return nil, d.block(ctx)
		}
		return in, nil
	}))
	return d
}

func (d *docTools) load(t *testing.T, name, doc string) *flow.Flow {
	t.Helper()
	f, err := flowdoc.Load(name, []byte(doc), d.reg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func testDocResearch(t *testing.T, b Backend) {
	tools := newDocTools(t)
	e := newEnv(t, b, nil, tools.load(t, "research.yaml", researchDoc))
	r := e.run("doc-research", map[string]string{"topic": "AI safety", "created_by": "james"}, nil)
	wantStatus(t, r, heph.StatusCompleted)
	wantJSON(t, r.Output, `{"notify":"sent to james: Research complete: notes on doc-AI-safety"}`)
	h := e.history(r.ID)
	for _, s := range []string{"search", "summarize", "notify"} {
		if n := count(h, hephtype.EventStepCompleted, s); n != 1 {
			t.Errorf("step %s completed %d times", s, n)
		}
	}
	for n, c := range tools.calls {
		want := int32(0)
		if n == "knowledge_search" || n == "knowledge_get" || n == "pushover_send" {
			want = 1
		}
		if c.Load() != want {
			t.Errorf("action %s called %d times, want %d", n, c.Load(), want)
		}
	}
}

func testDocBranching(t *testing.T, b Backend) {
	tools := newDocTools(t)
	e := newEnv(t, b, nil, tools.load(t, "branching.json", branchingDoc))
	admin := e.run("doc-branching", map[string]string{"user": "root", "title": "T"}, nil)
	wantStatus(t, admin, heph.StatusCompleted)
	wantJSON(t, admin.Output, `{"admin_action":"added T"}`)
	user := e.run("doc-branching", map[string]string{"user": "ann"}, nil)
	wantStatus(t, user, heph.StatusCompleted)
	wantJSON(t, user.Output, `{"user_action":"hello ann"}`)
	h := e.history(user.ID)
	if count(h, hephtype.EventStepCompleted, "admin_action") != 0 || count(h, hephtype.EventStepCompleted, "user_action") != 1 {
		t.Errorf("the user's run took the wrong branch: %v", h)
	}
	if tools.calls["knowledge_add"].Load() != 1 || tools.calls["get_greeting"].Load() != 1 {
		t.Errorf("knowledge_add %d, get_greeting %d calls, want 1 each", tools.calls["knowledge_add"].Load(), tools.calls["get_greeting"].Load())
	}
}

const gateDoc = `
name: doc-gate
steps:
  prepare:
    action: slow
    args: {title: "{{input.title}}"}
    next: approve
  approve:
    wait: {events: [approved, rejected]}
    on: {approved: execute_write, rejected: done}
  execute_write:
    action: knowledge_add
    args: {title: "{{steps.prepare.output.title}} (approved by {{steps.approve.output.by}})"}
    done: true
`

// testDocReopenMidRun stops the process while a document step runs and
// while it waits, and the run finishes on a new client over the same
// database, each step done once.
func testDocReopenMidRun(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	tools := newDocTools(t)
	started := make(chan struct{})
	tools.block = func(ctx context.Context) error {
		close(started)
		<-ctx.Done() // the first attempt runs until shutdown cancels it
		return ctx.Err()
	}
	c1 := startClient(t, st, func(c *heph.Config) { c.ShutdownTimeout = 10 * time.Millisecond }, tools.load(t, "gate.yaml", gateDoc))
	ctx := ctxT(t)
	r, err := c1.StartRun(ctx, "doc-gate", map[string]string{"title": "plan"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("step prepare never started")
	}
	if err := c1.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := reopen(t)
	c2 := startClient(t, st2, nil, newDocToolsLike(t, tools).load(t, "gate.yaml", gateDoc))
	e := &env{t: t, c: c2, st: st2}
	e.waitStatus(r.ID, heph.StatusWaiting)
	// And once more while it waits: the wait is durable.
	if err := c2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}
	st3 := reopen(t)
	c3 := startClient(t, st3, nil, newDocToolsLike(t, tools).load(t, "gate.yaml", gateDoc))
	e = &env{t: t, c: c3, st: st3}
	if err := c3.ResumeRun(ctx, r.ID, "approved", &heph.ResumeOptions{Payload: map[string]string{"by": "ann"}}); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"execute_write":"added plan (approved by ann)"}`)
	h := e.history(r.ID)
	if n := count(h, hephtype.EventStepCompleted, "prepare"); n != 1 {
		t.Errorf("prepare completed %d times", n)
	}
	if count(h, hephtype.EventStepWaiting, "approve") != 1 || count(h, hephtype.EventStepResumed, "approve") != 1 {
		t.Errorf("history lacks the wait and its resumption: %v", h)
	}
	if n := tools.calls["knowledge_add"].Load(); n != 1 {
		t.Errorf("knowledge_add called %d times", n)
	}
}

// newDocToolsLike returns tools whose actions count into the calls of
// old: a new process of the same program.
func newDocToolsLike(t *testing.T, old *docTools) *docTools {
	n := newDocTools(t)
	for k, c := range old.calls {
		n.calls[k] = c
	}
	return n
}

const approvalDoc = `
name: doc-approval
steps:
  request_approval:
    wait: {events: [approved, rejected], timeout: 1h}
    on: {approved: execute_write, rejected: done, timeout: done}
  execute_write:
    action: knowledge_add
    args: {title: "{{input.title}} (approved by {{steps.request_approval.output.actor}}: {{steps.request_approval.output.comment}})"}
    done: true
`

// testDocApprovalGate runs the seed's approval gate before a write:
// approved, rejected, and past its deadline; the resume payload (actor
// and comment) is the audit entry in the history.
func testDocApprovalGate(t *testing.T, b Backend) {
	tools := newDocTools(t)
	expiring := strings.Replace(strings.Replace(approvalDoc, "timeout: 1h", "timeout: 100ms", 1), "doc-approval", "doc-approval-expiring", 1)
	e := newEnv(t, b, nil, tools.load(t, "approval.yaml", approvalDoc), tools.load(t, "expiring.yaml", expiring))
	ctx := ctxT(t)
	type decision struct {
		Actor   string `json:"actor"`
		Comment string `json:"comment"`
	}
	for _, tc := range []struct {
		event  string
		by     decision
		output string
	}{
		{"approved", decision{"ann", "looks right"}, `{"execute_write":"added plan (approved by ann: looks right)"}`},
		{"rejected", decision{"bob", "not now"}, `null`},
	} {
		r, err := e.c.StartRun(ctx, "doc-approval", map[string]string{"title": "plan"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(r.ID, heph.StatusWaiting)
		if err := e.c.ResumeRun(ctx, r.ID, tc.event, &heph.ResumeOptions{Payload: tc.by}); err != nil {
			t.Fatal(err)
		}
		done := e.waitStatus(r.ID, heph.StatusCompleted)
		if tc.event == "approved" {
			wantJSON(t, done.Output, tc.output)
		}
		var audit []heph.HistoryEvent
		for _, ev := range e.history(r.ID) {
			if ev.Kind == hephtype.EventStepResumed && ev.Step == "request_approval" {
				audit = append(audit, ev)
			}
		}
		if len(audit) != 1 || audit[0].Name != tc.event {
			t.Fatalf("%s: audit entries %v", tc.event, audit)
		}
		var got decision
		if err := json.Unmarshal(audit[0].Data, &got); err != nil || got != tc.by {
			t.Errorf("%s: the audit entry holds %s, want %+v", tc.event, audit[0].Data, tc.by)
		}
		h := e.history(r.ID)
		if n := count(h, hephtype.EventStepCompleted, "execute_write"); (n == 1) != (tc.event == "approved") {
			t.Errorf("%s: execute_write completed %d times", tc.event, n)
		}
	}
	if n := tools.calls["knowledge_add"].Load(); n != 1 {
		t.Errorf("knowledge_add called %d times, want once (the approved run)", n)
	}
	// Past its deadline, the gate's timeout event ends the run without the write.
	r := e.run("doc-approval-expiring", map[string]string{"title": "late"}, nil)
	wantStatus(t, r, heph.StatusCompleted)
	h := e.history(r.ID)
	if count(h, hephtype.EventTimerFired, "request_approval") != 1 || count(h, hephtype.EventStepCompleted, "execute_write") != 0 {
		t.Errorf("the deadline did not end the gate: %v", h)
	}
}
