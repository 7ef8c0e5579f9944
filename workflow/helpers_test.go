package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// registered is what the test env needs of a workflow definition.
type registered = workflow.Workflow

// invoker is what it needs of an activity.
type invoker interface {
	Name() string
	Invoke(ctx context.Context, input json.RawMessage) (json.RawMessage, error)
}

// env runs workflows in an in-memory replay.Sim.
type env struct {
	t   *testing.T
	sim *replay.Sim
	ctx context.Context
}

type mode struct {
	name  string
	fresh bool
}

// modes are the ways a test runs: with a sticky instance per run that is
// checked against a fresh replay after every activation, and with a fresh
// replay of the whole history for every activation.
var modes = []mode{{"sticky", false}, {"fresh", true}}

// eachMode runs a test in every mode.
func eachMode(t *testing.T, f func(t *testing.T, m mode)) {
	t.Helper()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			f(t, m)
		})
	}
}

func newEnv(t *testing.T, m mode, wfs []registered, acts ...invoker) *env {
	t.Helper()
	cfg := &replay.SimConfig{Workflows: map[string]replay.Func{}, Activities: map[string]replay.ActivityFunc{}, Fresh: m.fresh, Verify: !m.fresh}
	for _, w := range wfs {
		cfg.Workflows[w.Name()] = wfdef.Of(w)
	}
	for _, a := range acts {
		cfg.Activities[a.Name()] = a.Invoke
	}
	sim, err := replay.NewSim(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	return &env{t: t, sim: sim, ctx: context.Background()}
}

func wfs(ws ...registered) []registered { return ws }

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) start(w registered, input any) *replay.SimRun {
	e.t.Helper()
	r, err := e.sim.Start(w.Name(), mustJSON(e.t, input))
	if err != nil {
		e.t.Fatalf("start %s: %v", w.Name(), err)
	}
	return r
}

func (e *env) signal(r *replay.SimRun, name string, payload any) {
	e.t.Helper()
	if err := r.Signal(name, mustJSON(e.t, payload)); err != nil {
		e.t.Fatalf("signal %s: %v", name, err)
	}
}

func (e *env) update(r *replay.SimRun, id, name string, args any) replay.UpdateOutcome {
	e.t.Helper()
	o, err := r.Update(id, name, mustJSON(e.t, args))
	if err != nil {
		e.t.Fatalf("update %s: %v", name, err)
	}
	return o
}

// sendUpdate sends the declared update u: its arguments are typed.
func sendUpdate[A, R any](e *env, r *replay.SimRun, id string, u *workflow.Update[A, R], args A) replay.UpdateOutcome {
	e.t.Helper()
	return e.update(r, id, u.Name(), args)
}

func (e *env) settle() {
	e.t.Helper()
	if err := e.sim.Settle(e.ctx); err != nil {
		e.t.Fatalf("settle: %v", err)
	}
}

func (e *env) drive() {
	e.t.Helper()
	if err := e.sim.Drive(e.ctx); err != nil {
		e.t.Fatalf("drive: %v", err)
	}
}

func (e *env) advance(d time.Duration) {
	e.t.Helper()
	if err := e.sim.Advance(e.ctx, d); err != nil {
		e.t.Fatalf("advance: %v", err)
	}
}

func decodeAs[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// output returns the output of a completed run.
func output[T any](t *testing.T, r *replay.SimRun) T {
	t.Helper()
	if r.Status() != hephtype.StatusCompleted {
		t.Fatalf("run is %s (%s), want completed", r.Status(), r.Err())
	}
	return decodeAs[T](t, r.Output())
}

// query reads the run's published state.
func query[T any](t *testing.T, r *replay.SimRun) T {
	t.Helper()
	return decodeAs[T](t, r.Published())
}

func updateResult[T any](t *testing.T, r *replay.SimRun, id string) T {
	t.Helper()
	raw, msg, done := r.UpdateResult(id)
	if !done {
		t.Fatalf("update %s is not done", id)
	}
	if msg != "" {
		t.Fatalf("update %s failed: %s", id, msg)
	}
	return decodeAs[T](t, raw)
}

func wantStatus(t *testing.T, r *replay.SimRun, want hephtype.RunStatus) {
	t.Helper()
	if r.Status() != want {
		t.Fatalf("run is %s (err %q), want %s", r.Status(), r.Err(), want)
	}
}

func wantRejected(t *testing.T, o replay.UpdateOutcome, contains string) {
	t.Helper()
	if o.Accepted || o.Err == nil {
		t.Fatalf("update %s accepted, want it rejected", o.ID)
	}
	if !strings.Contains(o.Err.Error(), contains) {
		t.Fatalf("update %s rejected with %q, want it to mention %q", o.ID, o.Err, contains)
	}
}

func wantAccepted(t *testing.T, o replay.UpdateOutcome) {
	t.Helper()
	if !o.Accepted {
		t.Fatalf("update %s rejected: %v", o.ID, o.Err)
	}
}

// kinds lists the kinds of a history's events, informational ones left out.
func kinds(h []replay.Event) []string {
	var ks []string
	for _, e := range h {
		if e.Kind == hephtype.EventStepRetrying {
			continue
		}
		ks = append(ks, string(e.Kind))
	}
	return ks
}

func countKind(h []replay.Event, k hephtype.EventKind) int {
	n := 0
	for _, e := range h {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func find(h []replay.Event, k hephtype.EventKind) []replay.Event {
	return slices.DeleteFunc(slices.Clone(h), func(e replay.Event) bool { return e.Kind != k })
}

var errTest = errors.New("test failure")

type eventT = replay.Event
