package e2e

import (
	"errors"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
)

// testWfSignalWithStartID: a signal-with-start repeated with the same
// WorkflowOptions.SignalID delivers its signal once, whether the first
// call started the run or signalled the open one, and a repeat of the
// call that started a run finds that run after it ended; SignalID is
// refused where it means nothing.
func testWfSignalWithStartID(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Counter))
	ctx := ctxT(t)
	send := func(sigID string) *heph.WorkflowRun[int] {
		t.Helper()
		r, err := heph.SignalWithStartWorkflow(ctx, e.c, Counter, "cid", "increment", nil, struct{}{}, &heph.WorkflowOptions{SignalID: sigID})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := send("s1")
	for _, id := range []string{"s1", "s1", "s2", "s2", "s2"} {
		if r := send(id); r.ID != first.ID {
			t.Fatalf("signal %s went to run %s, want the open run %s", id, r.ID, first.ID)
		}
	}
	if err := first.Signal(ctx, "done", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := first.Get(ctx); err != nil || got != 2 {
		t.Fatalf("output %d, %v; want 2 (s1 and s2 once each)", got, err)
	}
	if r := send("s1"); r.ID != first.ID {
		t.Fatalf("a repeat of the starting call after the run ended went to %s, want %s", r.ID, first.ID)
	}
	runs, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: Counter.Name()})
	if err != nil || len(runs.Runs) != 1 {
		t.Fatalf("runs of the counter: %d, %v; want 1", len(runs.Runs), err)
	}
	for what, err := range map[string]error{
		"a bad id": func() error {
			_, err := e.c.SignalWithStart(ctx, Counter.Name(), "cid", "increment", nil, struct{}{}, &heph.WorkflowOptions{SignalID: "a b"})
			return err
		}(),
		"StartWorkflow": func() error {
			_, err := e.c.StartWorkflow(ctx, Counter.Name(), struct{}{}, &heph.WorkflowOptions{SignalID: "x"})
			return err
		}(),
		"UpdateWithStart": func() error {
			_, _, err := e.c.UpdateWithStart(ctx, Counter.Name(), "cid", struct{}{}, &heph.WorkflowOptions{SignalID: "x"}, "u", nil, nil)
			return err
		}(),
	} {
		if !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", what, err)
		}
	}
}
