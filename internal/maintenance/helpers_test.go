package maintenance_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/maintenance"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// t0 is the fake clock's start: whole seconds, UTC, so that times read
// back from the store compare equal.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lease is the LeaseDuration of the tests: the registry loop wakes every
// 0.4 to 0.6 of it, and looks for unserved tasks every 0.8 to 1.2 of it.
const lease = time.Minute

// tick is a step of the fake clock that wakes the registry loop every time
// (its wait is at most 0.6 lease).
const tick = lease * 6 / 10

// realDeadline bounds how long, in real time, a test waits for a loop to
// do what it must: generous, because the machine may be heavily loaded.
// No test depends on it except to fail instead of hanging.
const realDeadline = 30 * time.Second

// env is a real (in-memory SQLite) store, a fake clock, a telemetry hub
// whose events are recorded, and a committer over the store.
type env struct {
	t   *testing.T
	st  *sqlite.Store
	clk *clock.Fake
	hub *telemetry.Hub
	com *commit.Committer
	log *logRecorder

	mu     sync.Mutex
	events []telemetry.Event
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := clock.NewFake(t0)
	e := &env{t: t, st: st, clk: clk, hub: telemetry.New(clk), log: &logRecorder{}}
	e.hub.Subscribe(func(ev telemetry.Event) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.events = append(e.events, ev)
	})
	e.com = commit.New(&commit.Config{
		Store: st, Clock: clk, Logger: slog.New(slog.DiscardHandler), Telemetry: e.hub,
		WorkerID: "committer", LeaseDuration: lease,
	})
	t.Cleanup(e.com.Close)
	return e
}

// service returns a maintenance service over the env, configured by edit;
// it is stopped when the test ends (before the committer and the store
// are closed).
func (e *env) service(edit func(c *maintenance.Config)) *maintenance.Service {
	e.t.Helper()
	cfg := &maintenance.Config{
		Store: e.st, Clock: e.clk, Logger: slog.New(e.log), Telemetry: e.hub, Committer: e.com,
		WorkerID: "w-test", LeaseDuration: lease,
	}
	if edit != nil {
		edit(cfg)
	}
	s := maintenance.New(cfg)
	e.t.Cleanup(s.Stop)
	return s
}

// create creates runs through the committer, at the fake clock's time, and
// returns the tasks each one enqueued.
func (e *env) create(runs ...*store.NewRun) [][]*store.Task {
	e.t.Helper()
	chs := make([]store.Change, len(runs))
	for i, r := range runs {
		chs[i] = store.Change{Create: r}
	}
	rs, err := e.com.SubmitAll(context.Background(), chs)
	if err != nil {
		e.t.Fatalf("create runs: %v", err)
	}
	out := make([][]*store.Task, len(rs))
	for i, r := range rs {
		if r.Err != nil {
			e.t.Fatalf("create run %s: %v", runs[i].ID, r.Err)
		}
		out[i] = r.Res.Tasks
	}
	return out
}

// update applies u to a run through the committer.
func (e *env) update(id string, u *store.Update) {
	e.t.Helper()
	r, err := e.com.Submit(context.Background(), store.Change{RunID: id, Decide: func(*store.Run) (*store.Update, error) {
		return u, nil
	}})
	if err != nil {
		e.t.Fatalf("update run %s: %v", id, err)
	}
	if r.Err != nil {
		e.t.Fatalf("update run %s: %v", id, r.Err)
	}
}

func (e *env) get(id string) *store.Run {
	e.t.Helper()
	r, err := e.st.GetRun(context.Background(), id)
	if err != nil {
		e.t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

func (e *env) exists(id string) bool {
	e.t.Helper()
	_, err := e.st.GetRun(context.Background(), id)
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrRunNotFound):
		return false
	}
	e.t.Fatalf("GetRun(%s): %v", id, err)
	return false
}

// workers lists the workers live at the fake clock's time.
func (e *env) workers() []*store.Worker {
	e.t.Helper()
	ws, err := e.st.ListWorkers(context.Background(), &store.ListWorkersParams{Now: e.clk.Now()})
	if err != nil {
		e.t.Fatalf("ListWorkers: %v", err)
	}
	return ws
}

func (e *env) register(w *store.Worker) {
	e.t.Helper()
	if err := e.st.RegisterWorker(context.Background(), w); err != nil {
		e.t.Fatalf("RegisterWorker(%s): %v", w.ID, err)
	}
}

// waitAsleep waits until n goroutines wait on the fake clock: the loops of
// the service have done all the work of their last wake-up (the store
// writes, the telemetry) and sleep again. It fails the test only after
// realDeadline.
func (e *env) waitAsleep(n int) {
	e.t.Helper()
	deadline := time.Now().Add(realDeadline)
	for e.clk.Waiters() != n {
		if time.Now().After(deadline) {
			e.t.Fatalf("after %v, %d goroutines wait on the clock, want %d", realDeadline, e.clk.Waiters(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// step advances the fake clock by d and waits until the n loops sleep
// again.
func (e *env) step(d time.Duration, n int) {
	e.t.Helper()
	e.clk.Advance(d)
	e.waitAsleep(n)
}

// eventsOf returns the recorded events of a kind (and run, when not empty).
func (e *env) eventsOf(kind telemetry.Kind, runID string) []telemetry.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []telemetry.Event
	for _, ev := range e.events {
		if ev.Kind == kind && (runID == "" || ev.RunID == runID) {
			out = append(out, ev)
		}
	}
	return out
}

// newRun is a valid run of the flow "wf" version 1, with tasks.
func newRun(id string, status hephtype.RunStatus, tasks ...store.NewTask) *store.NewRun {
	return &store.NewRun{
		ID: id, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow, Status: status,
		Input: json.RawMessage(`{"id":"` + id + `"}`), Tasks: tasks,
	}
}

// stepTask is a step task of queue, ready at once, needing handler.
func stepTask(queue, step, handler string) store.NewTask {
	return store.NewTask{Queue: queue, Kind: store.TaskStep, Step: step, Index: -1, Attempt: 1, Handler: handler}
}

// logRecorder is a slog.Handler that keeps the records' levels and
// messages.
type logRecorder struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, logRecord{r.Level, r.Message})
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// unexpected returns the messages logged at Warn or above, except those
// in allowed.
func (l *logRecorder) unexpected(allowed ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
next:
	for _, r := range l.recs {
		if r.level < slog.LevelWarn {
			continue
		}
		for _, a := range allowed {
			if r.msg == a {
				continue next
			}
		}
		out = append(out, r.msg)
	}
	return out
}
