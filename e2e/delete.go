package e2e

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// deleteTests are the tests of Client.DeleteRun and DeleteRuns (in
// RunRootAPI).
var deleteTests = []subtest{
	{"DeleteFinished", testDeleteFinished},
	{"DeleteActive", testDeleteActive},
	{"DeleteRunsFilter", testDeleteRunsFilter},
}

func deleteEchoFlow(name string) *flow.Flow {
	fb := flow.New(name)
	flow.Step(fb, "say", func(ctx context.Context, in string) (string, error) { return in, nil })
	return fb.MustBuild()
}

// testDeleteFinished: a finished run goes with its history; a second
// delete finds nothing.
func testDeleteFinished(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, deleteEchoFlow("echo"))
	ctx := ctxT(t)
	r := e.run("echo", "hi", nil)
	keep := e.run("echo", "other", nil)
	d, err := e.c.DeleteRun(ctx, r.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != r.ID || d.Status != heph.StatusCompleted || d.Workflow != "echo" || d.Tasks != 0 {
		t.Fatalf("deleted %+v", d)
	}
	if _, err := e.c.GetRun(ctx, r.ID); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("GetRun after the delete: %v", err)
	}
	if _, err := e.c.History(ctx, r.ID); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("History after the delete: %v", err)
	}
	if _, err := e.c.DeleteRun(ctx, r.ID, nil); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("second delete: %v, want ErrRunNotFound", err)
	}
	if got := e.history(keep.ID); len(got) == 0 {
		t.Fatal("the other run lost its history")
	}
}

// droppedCommits reports, by run, the tasks whose outcome the store
// refused, as the worker logs them.
type droppedCommits struct{ runs chan string }

func (d *droppedCommits) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (d *droppedCommits) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "task" {
		return nil
	}
	var run string
	var err error
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "run":
			run = a.Value.String()
		case "err":
			err, _ = a.Value.Any().(error)
		}
		return true
	})
	if run != "" && err != nil {
		select {
		case d.runs <- run + ": " + err.Error():
		default:
		}
	}
	return nil
}
func (d *droppedCommits) WithAttrs([]slog.Attr) slog.Handler { return d }
func (d *droppedCommits) WithGroup(string) slog.Handler      { return d }

// testDeleteActive: an active run is refused without Force; a forced
// delete while a step runs leaves the step's worker unable to commit, and
// nothing of the run comes back.
func testDeleteActive(t *testing.T, b Backend) {
	started, stopped := make(chan struct{}), make(chan error, 1)
	var after atomic.Int32
	fb := flow.New("held")
	flow.Step(fb, "hold", func(ctx context.Context, in any) (string, error) {
		close(started)
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return "done anyway", nil
	})
	flow.Step(fb, "after", func(ctx context.Context, in any) (string, error) {
		after.Add(1)
		return "", nil
	}, flow.DependsOn("hold"))
	dropped := &droppedCommits{runs: make(chan string, 16)}
	e := newEnv(t, b, func(c *heph.Config) { c.Logger = slog.New(dropped) }, fb.MustBuild())
	ctx := ctxT(t)
	r, err := e.c.StartRun(ctx, "held", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	if _, err := e.c.DeleteRun(ctx, r.ID, nil); !errors.Is(err, heph.ErrRunActive) {
		t.Fatalf("delete of a running run: %v, want ErrRunActive", err)
	}
	if got, err := e.c.GetRun(ctx, r.ID); err != nil || got.Status != heph.StatusRunning {
		t.Fatalf("after a refused delete: %+v, %v", got, err)
	}
	d, err := e.c.DeleteRun(ctx, r.ID, &heph.DeleteOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != heph.StatusRunning || d.Tasks != 1 {
		t.Fatalf("forced delete: %+v, want the running run with its one task", d)
	}
	// The running step is told at once; its worker's commit is refused.
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("the step's context ended without a cause")
		}
	case <-ctx.Done():
		t.Fatal("the running step never saw the delete")
	}
	select {
	case msg := <-dropped.runs:
		if want := r.ID + ": "; len(msg) < len(want) || msg[:len(want)] != want {
			t.Fatalf("dropped %q, want the task of run %s", msg, r.ID)
		}
	case <-ctx.Done():
		t.Fatal("the step's outcome was never refused")
	}
	if _, err := e.c.GetRun(ctx, r.ID); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("GetRun after the refused commit: %v", err)
	}
	if n := after.Load(); n != 0 {
		t.Fatalf("the step after ran %d times", n)
	}
	list, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "held"})
	if err != nil || len(list.Runs) != 0 {
		t.Fatalf("runs of held: %v, %v", list, err)
	}
	if err := e.c.CancelRun(ctx, r.ID, ""); !errors.Is(err, heph.ErrRunNotFound) {
		t.Fatalf("cancel of a deleted run: %v, want ErrRunNotFound", err)
	}
}

// testDeleteRunsFilter: DeleteRuns deletes the finished runs a filter
// selects, a page per call, and keeps the active ones.
func testDeleteRunsFilter(t *testing.T, b Backend) {
	e := newEnv(t, b, nil, deleteEchoFlow("echo"), approvalFlow("approval", 0))
	ctx := ctxT(t)
	var done []string
	for range 5 {
		done = append(done, e.run("echo", "x", nil).ID)
	}
	w, err := e.c.StartRun(ctx, "approval", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(w.ID, hephtype.StatusWaiting)
	other := e.run("echo", "y", &heph.StartOptions{Tags: []string{"keep"}})

	if _, err := e.c.DeleteRuns(ctx, &heph.ListOptions{}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Fatalf("DeleteRuns with an empty filter: %v, want ErrInvalidInput", err)
	}
	filter := &heph.ListOptions{CreatedBefore: other.CreatedAt, Limit: 2}
	deleted, calls := 0, 0
	var kept []string
	for {
		res, err := e.c.DeleteRuns(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		deleted += res.Deleted
		kept = append(kept, res.Kept...)
		if res.Next == "" {
			break
		}
		filter.Cursor = res.Next
	}
	if deleted != 5 || !slices.Equal(kept, []string{w.ID}) || calls < 3 {
		t.Fatalf("deleted %d, kept %v in %d calls; want 5 deleted and the waiting run kept, 2 per call", deleted, kept, calls)
	}
	for _, id := range done {
		if _, err := e.c.GetRun(ctx, id); !errors.Is(err, heph.ErrRunNotFound) {
			t.Fatalf("run %s after DeleteRuns: %v", id, err)
		}
	}
	list, err := e.c.ListRuns(ctx, &heph.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, r := range list.Runs {
		left = append(left, r.ID)
	}
	slices.Sort(left)
	want := []string{w.ID, other.ID}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("runs left %v, want %v", left, want)
	}
}
