package hephaestus_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Decisions that cannot apply are refused with the sentinel the caller
// branches on, and change nothing: no worker runs here, so the gate has
// not started to wait.
func TestApprovalErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := docClient(t, filepath.Join(t.TempDir(), "gates.db"), clock.Real{})
	doc := "name: gated\nsteps:\n  ask:\n    approval: {prompt: \"Go?\", assignees: {users: [ann], groups: [admins]}}\n    on: {approved: done, rejected: done}\n"
	gated, err := flowdoc.Load("gated.yaml", []byte(doc), nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := flow.New("plain").Start("s")
	flow.Step(plain, "s", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil })
	pf, err := plain.Edge("s", flow.EventOK, flow.Done).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(gated, pf); err != nil {
		t.Fatal(err)
	}
	g, err := c.StartRun(ctx, "gated", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.StartRun(ctx, "plain", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ann := heph.Actor{ID: "ann"}
	for _, tc := range []struct {
		name  string
		run   string
		step  string
		actor heph.Actor
		want  error
		says  string
	}{
		{"no actor", g.ID, "ask", heph.Actor{}, heph.ErrInvalidInput, "the actor has no id"},
		{"no step", g.ID, "", ann, heph.ErrInvalidInput, "name the gate's step"},
		{"unknown run", "no-such-run", "ask", ann, heph.ErrRunNotFound, "no-such-run"},
		{"go flow", p.ID, "s", ann, heph.ErrNotAGate, `flow "plain" version 1 has no gate "s"`},
		{"not a gate", g.ID, "asc", ann, heph.ErrNotAGate, `has no gate "asc"; did you mean "ask"? (its gates: [ask])`},
		{"not an assignee", g.ID, "ask", heph.Actor{ID: "eve", Groups: []string{"ops"}}, heph.ErrNotAssignee, `"eve" (groups [ops]) is not among the gate's users [ann] or groups [admins]`},
		{"not waiting yet", g.ID, "ask", heph.Actor{ID: "bob", Groups: []string{"admins"}}, heph.ErrNotWaiting, ""},
	} {
		_, err := c.Approve(ctx, tc.run, tc.step, tc.actor, "ok")
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "approve gate") {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
	if _, err := c.Reject(ctx, g.ID, "ask", heph.Actor{ID: "eve"}, "no"); !errors.Is(err, heph.ErrNotAssignee) || !strings.Contains(err.Error(), "reject gate") {
		t.Errorf("reject by a non-assignee: %v", err)
	}
	h, err := c.History(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range h {
		if ev.Step == "ask" && ev.Kind != hephtype.EventStepScheduled {
			t.Errorf("a refused decision wrote %v", ev)
		}
	}
	// The gate has not started to wait: nothing is pending.
	if ps, err := c.PendingApprovals(ctx, nil); err != nil || len(ps) != 0 {
		t.Errorf("pending before the gate waits: %v, %v", ps, err)
	}
	if _, err := c.PendingApprovals(ctx, &heph.ApprovalFilter{RunID: "no-such-run"}); !errors.Is(err, heph.ErrRunNotFound) {
		t.Errorf("pending of an unknown run: %v, want ErrRunNotFound", err)
	}
}
