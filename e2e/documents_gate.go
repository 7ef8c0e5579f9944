package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// approvalGateDoc is seed 002's approval before a write, with a gate of its own.
const approvalGateDoc = `
name: doc-gate
steps:
  request_approval:
    approval:
      prompt: "Write the plan?"
      assignees: {users: [ann], groups: [admins]}
      deadline: 1h
    on: {approved: execute_write, rejected: done, expired: escalate}
  execute_write:
    action: knowledge_add
    args: {title: "{{input.title}} (approved by {{steps.request_approval.output.actor}}: {{steps.request_approval.output.comment}})"}
    done: true
  escalate:
    action: get_greeting
    args: {user: "{{input.title}}"}
    done: true
`

type gateAudit struct {
	Actor     string    `json:"actor"`
	Groups    []string  `json:"groups"`
	Comment   string    `json:"comment"`
	DecidedAt time.Time `json:"decided_at"`
}

// gateAudits returns the step_resumed entries of the gate, decoded.
func gateAudits(t *testing.T, e *env, runID string) ([]string, []gateAudit) {
	t.Helper()
	var events []string
	var out []gateAudit
	for _, ev := range e.history(runID) {
		if ev.Kind != hephtype.EventStepResumed || ev.Step != "request_approval" {
			continue
		}
		var a gateAudit
		if err := json.Unmarshal(ev.Data, &a); err != nil {
			t.Fatalf("the audit entry %s is not a decision: %v", ev.Data, err)
		}
		events = append(events, ev.Name)
		out = append(out, a)
	}
	return events, out
}

// docGateStep is the gate of approvalGateDoc.
const docGateStep = "request_approval"

// testDocGate runs approval gates of a document: the pending list, a
// non-assignee refused, approve (retried: reported done, one resume),
// reject by group, and the deadline; the decisions are the history's
// audit entries.
func testDocGate(t *testing.T, b Backend) {
	tools := newDocTools(t)
	expiring := strings.Replace(strings.Replace(approvalGateDoc, "deadline: 1h", "deadline: 100ms", 1), "doc-gate", "doc-gate-expiring", 1)
	e := newEnv(t, b, nil, tools.load(t, "gate.yaml", approvalGateDoc), tools.load(t, "gate-expiring.yaml", expiring))
	ctx := ctxT(t)

	g := &docGate{t: t, e: e, tools: tools, ctx: ctx}
	a, err := e.c.StartRun(ctx, "doc-gate", map[string]string{"title": "plan"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.c.StartRun(ctx, "doc-gate", map[string]string{"title": "other"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(a.ID, heph.StatusWaiting)
	e.waitStatus(r.ID, heph.StatusWaiting)

	g.pendingFilters(a.ID, r.ID)
	g.approve(a.ID, r.ID)
	g.reject(r.ID)
	g.expired()
}

// docGate is a run of testDocGate.
type docGate struct {
	t     *testing.T
	e     *env
	tools *docTools
	ctx   context.Context
}

// pending returns the runs whose docGateStep f lists, checking what it says of
// each: prompt, assignees, since and deadline.
func (g *docGate) pending(f *heph.ApprovalFilter) []string {
	t := g.t
	t.Helper()
	t.Helper()
	ps, err := g.e.c.PendingApprovals(g.ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		if p.Step != docGateStep || p.Workflow != "doc-gate" || p.Prompt != "Write the plan?" || !slices.Equal(p.Users, []string{"ann"}) || !slices.Equal(p.Groups, []string{"admins"}) {
			t.Errorf("pending approval %+v", p)
		}
		if p.WaitingSince.IsZero() || !p.Deadline.Equal(p.WaitingSince.Add(time.Hour)) {
			t.Errorf("pending approval of %s: waiting since %v, deadline %v", p.RunID, p.WaitingSince, p.Deadline)
		}
		ids = append(ids, p.RunID)
	}
	slices.Sort(ids)
	return ids
}

// pendingFilters checks the pending gates of runs a and r by each filter.
func (g *docGate) pendingFilters(aID, rID string) {
	t := g.t
	both := []string{aID, rID}
	slices.Sort(both)
	for _, c := range []struct {
		name string
		f    *heph.ApprovalFilter
		want []string
	}{
		{"workflow", &heph.ApprovalFilter{Workflow: "doc-gate"}, both},
		{"assignee", &heph.ApprovalFilter{Workflow: "doc-gate", Assignee: "ann"}, both},
		{"group", &heph.ApprovalFilter{Workflow: "doc-gate", Group: "admins"}, both},
		{"other assignee", &heph.ApprovalFilter{Workflow: "doc-gate", Assignee: "zed", Group: "ops"}, nil},
		{"run", &heph.ApprovalFilter{RunID: aID}, []string{aID}},
		{"other workflow", &heph.ApprovalFilter{Workflow: "doc-research"}, nil},
	} {
		if got := g.pending(c.f); !slices.Equal(got, c.want) {
			t.Errorf("pending by %s: %v, want %v", c.name, got, c.want)
		}
	}
}

// approve checks that a non-assignee is refused, then approves run a's
// docGateStep (retried: reported done, one resume); run r stays pending.
func (g *docGate) approve(aID, rID string) {
	t := g.t
	// A non-assignee is refused, and nothing changes.
	_, err := g.e.c.Approve(g.ctx, aID, docGateStep, heph.Actor{ID: "mallory", Groups: []string{"ops"}}, "ship it")
	if !errors.Is(err, heph.ErrNotAssignee) || !strings.Contains(err.Error(), `"mallory"`) || !strings.Contains(err.Error(), `"request_approval"`) {
		t.Fatalf("approve by a non-assignee: %v, want ErrNotAssignee naming the docGateStep and the actor", err)
	}
	// A step that is no docGateStep is refused.
	if _, err := g.e.c.Approve(g.ctx, aID, "execute_write", heph.Actor{ID: "ann"}, ""); !errors.Is(err, heph.ErrNotAGate) {
		t.Fatalf("approve of a step that is no gate: %v, want ErrNotAGate", err)
	}
	// A gate is decided only as a gate: a resume is refused, naming the
	// gate's step or as the run's one waiting step.
	for _, opts := range []*heph.ResumeOptions{{Step: docGateStep, Payload: map[string]string{"actor": "ann"}}, nil} {
		if err := g.e.c.ResumeRun(g.ctx, aID, flowdoc.EventApproved, opts); !errors.Is(err, heph.ErrGateStep) || !strings.Contains(err.Error(), "Approve or Reject") {
			t.Fatalf("resume of a gate (%+v): %v, want ErrGateStep naming Approve", opts, err)
		}
	}
	if ev, _ := gateAudits(t, g.e, aID); len(ev) != 0 {
		t.Fatalf("a refused decision resumed the gate: %v", ev)
	}

	// Approve; the retried approve is reported done and resumes nothing.
	d, err := g.e.c.Approve(g.ctx, aID, docGateStep, heph.Actor{ID: "ann"}, "looks right")
	if err != nil {
		t.Fatal(err)
	}
	if d.Repeated || d.Event != flowdoc.EventApproved || d.Actor != "ann" || d.DecidedAt.IsZero() {
		t.Errorf("decision %+v", d)
	}
	done := g.e.waitStatus(aID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"execute_write":"added plan (approved by ann: looks right)"}`)
	again, err := g.e.c.Approve(g.ctx, aID, docGateStep, heph.Actor{ID: "ann"}, "looks right")
	if err != nil || !again.Repeated || again.Event != flowdoc.EventApproved || again.Actor != "ann" || again.Comment != "looks right" || !again.DecidedAt.Equal(d.DecidedAt) {
		t.Fatalf("retried approve: %+v, %v; want the recorded decision, Repeated", again, err)
	}
	// Another decision on a decided docGateStep is refused.
	if _, err := g.e.c.Reject(g.ctx, aID, docGateStep, heph.Actor{ID: "ann"}, "changed my mind"); !errors.Is(err, heph.ErrNotWaiting) || !strings.Contains(err.Error(), "approved") {
		t.Fatalf("reject after approve: %v, want ErrNotWaiting naming the decision", err)
	}
	events, audits := gateAudits(t, g.e, aID)
	if !slices.Equal(events, []string{flowdoc.EventApproved}) || audits[0].Actor != "ann" || audits[0].Comment != "looks right" || !audits[0].DecidedAt.Equal(d.DecidedAt) {
		t.Fatalf("audit entries of the approved run: %v %+v", events, audits)
	}
	if n := g.tools.calls["knowledge_add"].Load(); n != 1 {
		t.Errorf("knowledge_add called %d times, want once", n)
	}

	// Pending after: only the other run.
	if got := g.pending(&heph.ApprovalFilter{Workflow: "doc-gate"}); !slices.Equal(got, []string{rID}) {
		t.Errorf("pending after the approval: %v, want [%s]", got, rID)
	}
}

// reject rejects run r's docGateStep by a member of an assigned group.
func (g *docGate) reject(rID string) {
	t := g.t
	// Reject by a member of an assigned group.
	if _, err := g.e.c.Reject(g.ctx, rID, docGateStep, heph.Actor{ID: "bob", Groups: []string{"ops", "admins"}}, "not now"); err != nil {
		t.Fatal(err)
	}
	g.e.waitStatus(rID, heph.StatusCompleted)
	events, audits := gateAudits(t, g.e, rID)
	if !slices.Equal(events, []string{flowdoc.EventRejected}) || audits[0].Actor != "bob" || !slices.Equal(audits[0].Groups, []string{"ops", "admins"}) || audits[0].Comment != "not now" {
		t.Fatalf("audit entries of the rejected run: %v %+v", events, audits)
	}
	h := g.e.history(rID)
	if count(h, hephtype.EventStepCompleted, "execute_write") != 0 || count(h, hephtype.EventStepCompleted, "escalate") != 0 {
		t.Errorf("the rejected run went on: %v", h)
	}
	if got := g.pending(&heph.ApprovalFilter{Workflow: "doc-gate"}); len(got) != 0 {
		t.Errorf("pending after both decisions: %v", got)
	}
}

// expired checks that past its deadline, the docGateStep emits expired (routed
// to escalate) and takes no decision any more.
func (g *docGate) expired() {
	t := g.t
	x := g.e.run("doc-gate-expiring", map[string]string{"title": "late"}, nil)
	wantStatus(t, x, heph.StatusCompleted)
	wantJSON(t, x.Output, `{"escalate":"hello late"}`)
	h := g.e.history(x.ID)
	if count(h, hephtype.EventTimerFired, docGateStep) != 1 || count(h, hephtype.EventStepCompleted, "execute_write") != 0 || count(h, hephtype.EventStepResumed, docGateStep) != 0 {
		t.Errorf("the deadline did not end the gate: %v", h)
	}
	if st, _ := x.Step(docGateStep); st.Event != flow.EventTimeout {
		t.Errorf("the expired docGateStep ended with %q, want %q", st.Event, flow.EventTimeout)
	}
	if _, err := g.e.c.Approve(g.ctx, x.ID, docGateStep, heph.Actor{ID: "ann"}, "too late"); !errors.Is(err, heph.ErrNotWaiting) && !errors.Is(err, heph.ErrRunFinished) {
		t.Fatalf("approve of an expired gate: %v, want ErrNotWaiting or ErrRunFinished", err)
	}
	if n := g.tools.calls["knowledge_add"].Load(); n != 1 {
		t.Errorf("knowledge_add called %d times, want once", n)
	}
}

// A decision whose commit happens but whose outcome is lost is applied
// once and reported done; the caller's own retry is reported as the
// recorded decision, Repeated, and adds nothing.
func testGateDecisionRetriedCommit(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	fs := &faultStore{Store: st}
	tools := newDocTools(t)
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startClient(t, fs, func(c *heph.Config) { c.LeaseDuration = 3 * time.Second }, tools.load(t, "gate.yaml", approvalGateDoc))
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "doc-gate", map[string]string{"title": "plan"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusWaiting)
	fs.loseOnce(func() bool { return hasEvent(st, r.ID, hephtype.EventStepResumed) })
	d, err := e.c.Approve(ctx, r.ID, "request_approval", heph.Actor{ID: "ann"}, "ok")
	if err != nil || d.Repeated {
		t.Fatalf("an approval whose commit outcome was lost: %+v, %v", d, err)
	}
	fs.waitLost(t, 1)
	e.waitStatus(r.ID, heph.StatusCompleted)
	again, err := e.c.Approve(ctx, r.ID, "request_approval", heph.Actor{ID: "ann"}, "ok")
	if err != nil || !again.Repeated || !again.DecidedAt.Equal(d.DecidedAt) {
		t.Fatalf("the approval retried by its caller: %+v, %v; want the recorded decision, Repeated", again, err)
	}
	if events, _ := gateAudits(t, e, r.ID); !slices.Equal(events, []string{flowdoc.EventApproved}) {
		t.Fatalf("step_resumed entries %v, want one approved", events)
	}
	if n := tools.calls["knowledge_add"].Load(); n != 1 {
		t.Errorf("knowledge_add called %d times, want once", n)
	}
}
