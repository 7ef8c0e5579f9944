package commit_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// t0 is the start of the fake clocks.
var t0 = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)

// patience bounds every wait for something the committer does in another
// goroutine. It is a guard against hanging, never a measure: no test
// asserts how long anything took.
const patience = 30 * time.Second

// openStore opens a private in-memory SQLite store, closed when the test
// ends (after the committer, whose Close is registered later).
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// hookedStore is a real store whose Apply calls are counted and, when
// onApply is set, routed through it: real applies the call to the wrapped
// store, and onApply decides what the committer sees (fault injection).
// onApply must be set before the committer first uses the store.
type hookedStore struct {
	store.Store
	onApply func(call int, p *store.ApplyParams, real func() (*store.ApplyResult, error)) (*store.ApplyResult, error)

	mu    sync.Mutex
	sizes []int // changes per Apply call, in call order
}

func (s *hookedStore) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, len(p.Changes))
	call := len(s.sizes)
	s.mu.Unlock()
	real := func() (*store.ApplyResult, error) { return s.Store.Apply(ctx, p) }
	if s.onApply == nil {
		return real()
	}
	return s.onApply(call, p, real)
}

// applySizes returns the number of changes of each Apply call so far.
func (s *hookedStore) applySizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sizes)
}

// newCommitter returns a committer over cfg, closed when the test ends.
// WorkerID and LeaseDuration get test values when unset.
func newCommitter(t *testing.T, cfg commit.Config) *commit.Committer {
	t.Helper()
	if cfg.WorkerID == "" {
		cfg.WorkerID = "w1"
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = time.Minute
	}
	if cfg.Logger == nil {
		// The committer's logs show with the test's output (-v, failures).
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	c := commit.New(&cfg)
	t.Cleanup(c.Close)
	return c
}

// recorder collects the telemetry events of a hub.
type recorder struct {
	mu  sync.Mutex
	evs []telemetry.Event
}

func record(t *testing.T, hub *telemetry.Hub) *recorder {
	r := &recorder{}
	t.Cleanup(hub.Subscribe(func(e telemetry.Event) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.evs = append(r.evs, e)
	}))
	return r
}

// of returns the events of one kind received so far.
func (r *recorder) of(kind telemetry.Kind) []telemetry.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []telemetry.Event
	for _, e := range r.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// commits records the calls of an AfterCommit hook.
type commits struct {
	mu      sync.Mutex
	batches [][]*commit.Request
	claimed map[int64]bool
	nows    []time.Time
}

func (c *commits) hook(batch []*commit.Request, claimed map[int64]bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, slices.Clone(batch))
	if c.claimed == nil {
		c.claimed = map[int64]bool{}
	}
	for id, ok := range claimed {
		if ok {
			c.claimed[id] = true
		}
	}
	c.nows = append(c.nows, now)
}

// sawClaimed reports whether some AfterCommit call listed the task as
// claimed.
func (c *commits) sawClaimed(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.claimed[id]
}

// newRun is a run of workflow "wf" in status s with tasks.
func newRun(id string, s hephtype.RunStatus, tasks ...store.NewTask) *store.NewRun {
	return &store.NewRun{
		ID: id, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow, Status: s,
		Input: json.RawMessage(`{"id":"` + id + `"}`), Tasks: tasks,
	}
}

// readyTask is a step task of queue, ready at once (a zero ReadyAt is the
// Apply's Now), that needs handler (empty: any worker).
func readyTask(queue, step, handler string, priority int) store.NewTask {
	return store.NewTask{Queue: queue, Kind: store.TaskStep, Step: step, Index: -1, Attempt: 1, Handler: handler, Priority: priority}
}

// complete is a Decide that ends the run as completed.
func complete(*store.Run) (*store.Update, error) {
	return &store.Update{Status: hephtype.StatusCompleted, Output: json.RawMessage(`1`)}, nil
}

// waitFor polls cond until it holds, failing the test after patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitDone waits for ch to close, failing the test after patience.
func awaitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("gave up waiting for %s", what)
	}
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func steps(ts []*store.Task) []string {
	out := make([]string, len(ts))
	for i, tk := range ts {
		out[i] = tk.Step
	}
	slices.Sort(out)
	return out
}
