package replay_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newInstance(t *testing.T, fn replay.Func) *replay.Instance {
	t.Helper()
	in, err := replay.New(&replay.Config{Workflow: fn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

func decide(t *testing.T, in *replay.Instance, at time.Time, events ...replay.Event) *replay.Decision {
	t.Helper()
	d, err := in.Decide(&replay.Activation{Events: events, Time: at})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func started() replay.Event { return replay.Started("wf", json.RawMessage(`"in"`), 7, t0) }

// A workflow that publishes, runs two branches and waits in a phase.
func busy(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
	u.Publish(json.RawMessage(`"started"`))
	u.Parallel([]func(*replay.Unit) (any, error){
		func(u *replay.Unit) (any, error) { return u.ExecuteActivity("a", nil, replay.ActivityOptions{}) },
		func(u *replay.Unit) (any, error) {
			defer u.Publish(json.RawMessage(`"deferred"`)) // runs when the instance is closed
			return nil, u.Sleep(time.Hour)
		},
	})
	st, _, err := u.Phase(&replay.PhaseSpec{Initial: 0, Updates: []replay.UpdateHandler{{
		Name:   "add",
		Decode: func(raw json.RawMessage) (any, error) { var n int; err := json.Unmarshal(raw, &n); return n, err },
		Validate: func(args, state any) error {
			if args.(int) < 0 {
				return errors.New("negative")
			}
			return nil
		},
		Handle: func(u *replay.Unit, args, state any) replay.HandlerResult {
			n := state.(int) + args.(int)
			return replay.HandlerResult{State: n, Reply: json.RawMessage(`"ok"`), Stop: n > 10}
		},
	}}})
	if err != nil {
		return nil, err
	}
	return json.Marshal(st)
}

func TestDecisionOutputs(t *testing.T) {
	in := newInstance(t, busy)
	d := decide(t, in, t0, started())
	if string(d.Published) != `"started"` || d.Status != hephtype.StatusRunning {
		t.Fatalf("first decision: published %s, status %s", d.Published, d.Status)
	}
	var cmds []string
	for _, c := range d.Commands {
		cmds = append(cmds, c.String())
	}
	if diff := cmp.Diff([]string{`schedule activity #1 "a"`, `start timer #2 (1h0m0s)`}, cmds); diff != "" {
		t.Fatalf("commands (-want +got):\n%s", diff)
	}
	if st := d.Commands[1].(replay.StartTimer); !st.FireAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("timer fires at %v", st.FireAt)
	}
	if len(d.History) != 3 || d.History[0].Kind != replay.EventDecision {
		t.Fatalf("history %v", d.History)
	}
	// Nothing new: nothing decided.
	if d := decide(t, in, t0); len(d.History) != 0 || d.Published != nil {
		t.Fatalf("an empty activation decided %v", d.History)
	}
	d = decide(t, in, t0.Add(time.Minute), replay.ActivityCompleted(1, "a", json.RawMessage(`1`)))
	if d.Published != nil || len(d.Commands) != 0 || len(d.History) != 1 || d.Status != hephtype.StatusWaiting {
		t.Fatalf("second decision: %+v", d)
	}
	if string(in.Published()) != `"started"` {
		t.Fatalf("published %s", in.Published())
	}

	// An update outside the phase, or failing validation, writes nothing
	// and changes nothing.
	before := in.Snapshot()
	d, err := in.Decide(&replay.Activation{Time: t0.Add(2 * time.Minute), Updates: []replay.UpdateRequest{{ID: "u1", Name: "add", Args: json.RawMessage(`1`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 0 || d.Updates[0].Accepted || !errors.Is(d.Updates[0].Err, replay.ErrUpdateNotAccepted) {
		t.Fatalf("update outside a phase: %+v", d)
	}
	if diff := cmp.Diff(before, in.Snapshot()); diff != "" {
		t.Fatalf("a rejected update changed the state (-before +after):\n%s", diff)
	}

	d = decide(t, in, t0.Add(time.Hour), replay.TimerFired(2))
	if d.Status != hephtype.StatusWaiting {
		t.Fatalf("status %s", d.Status)
	}
	before = in.Snapshot()
	d, err = in.Decide(&replay.Activation{Time: t0.Add(2 * time.Hour), Updates: []replay.UpdateRequest{{ID: "u2", Name: "add", Args: json.RawMessage(`-1`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.History) != 0 || !strings.Contains(d.Updates[0].Err.Error(), "negative") {
		t.Fatalf("invalid update: %+v", d)
	}
	if diff := cmp.Diff(before, in.Snapshot()); diff != "" {
		t.Fatalf("a rejected update changed the state (-before +after):\n%s", diff)
	}
	d, err = in.Decide(&replay.Activation{Time: t0.Add(3 * time.Hour), Updates: []replay.UpdateRequest{
		{ID: "u3", Name: "add", Args: json.RawMessage(`5`)},
		{ID: "u4", Name: "add", Args: json.RawMessage(`-5`)},
		{ID: "u5", Name: "add", Args: json.RawMessage(`6`)},
		{ID: "u6", Name: "add", Args: json.RawMessage(`1`)}, // the phase has stopped
	}})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []bool
	for _, o := range d.Updates {
		outcomes = append(outcomes, o.Accepted)
	}
	if diff := cmp.Diff([]bool{true, false, true, false}, outcomes); diff != "" {
		t.Fatalf("accepted (-want +got):\n%s", diff)
	}
	var hist []string
	for _, e := range d.History {
		hist = append(hist, e.String())
	}
	want := []string{
		"decision at 2025-01-01T03:00:00Z",
		`update_accepted #3 "add" id "u3"`, `update_completed #3 "add" id "u3"`,
		`update_accepted #4 "add" id "u5"`, `update_completed #4 "add" id "u5"`,
		"run_completed",
	}
	if diff := cmp.Diff(want, hist); diff != "" {
		t.Fatalf("history (-want +got):\n%s", diff)
	}
	if d.Status != hephtype.StatusCompleted || string(d.History[5].Data) != "11" {
		t.Fatalf("status %s, output %s", d.Status, d.History[5].Data)
	}
	// After the end, updates are rejected.
	d, err = in.Decide(&replay.Activation{Time: t0.Add(4 * time.Hour), Updates: []replay.UpdateRequest{{ID: "u7", Name: "add"}}})
	if err != nil || d.Updates[0].Accepted || len(d.History) != 0 {
		t.Fatalf("update after the end: %+v, %v", d, err)
	}
}

// Closing an instance whose units wait ends their goroutines (goleak
// checks it in TestMain) and runs their deferred calls without effect.
func TestCloseWaitingUnits(t *testing.T) {
	in := newInstance(t, busy)
	decide(t, in, t0, started())
	if n := len(in.Snapshot().Units); n != 3 {
		t.Fatalf("%d units, want 3", n)
	}
	in.Close()
	in.Close()
	if _, err := in.Decide(&replay.Activation{Time: t0}); !errors.Is(err, replay.ErrClosed) {
		t.Fatalf("decide after close: %v", err)
	}
	if string(in.Published()) != `"started"` {
		t.Fatalf("a dying unit published: %s", in.Published())
	}
}

func TestPanicFailsTheRun(t *testing.T) {
	in := newInstance(t, func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		var w []int
		return json.Marshal(w[len(w)]) // index out of range
	})
	d := decide(t, in, t0, started())
	if d.Status != hephtype.StatusFailed || !strings.Contains(d.Commands[0].(replay.FailWorkflow).Error, "panic: runtime error: index out of range") {
		t.Fatalf("%+v", d.Commands)
	}
}

func TestMalformedHistory(t *testing.T) {
	noop := func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		return nil, u.Sleep(time.Hour)
	}
	dec := func() replay.Event {
		d := decide(t, newInstance(t, noop), t0, started())
		return d.History[0]
	}()
	cases := map[string][]replay.Event{
		"no run_started":         {replay.SignalReceived("x", nil)},
		"two run_started":        {started(), started()},
		"command outside":        {started(), replay.StartTimer{Seq: 1, Duration: time.Hour}.Event()},
		"unknown kind":           {started(), {Kind: "bogus"}},
		"outcome of nothing":     {started(), dec, replay.StartTimer{Seq: 1, Duration: time.Hour}.Event(), replay.ActivityCompleted(9, "a", nil), dec},
		"outcome of wrong kind":  {started(), dec, replay.StartTimer{Seq: 1, Duration: time.Hour}.Event(), replay.ActivityCompleted(1, "a", nil), dec},
		"bad decision":           {started(), {Kind: replay.EventDecision, Data: json.RawMessage(`{`)}},
		"update nobody accepts":  {started(), dec, replay.StartTimer{Seq: 1, Duration: time.Hour}.Event(), replay.AcceptUpdate{Seq: 2, UpdateID: "u", Name: "add"}.Event()},
		"command after the end":  {started(), dec, replay.StartTimer{Seq: 1, Duration: time.Hour}.Event(), replay.TimerFired(1), dec, replay.CompleteWorkflow{Output: json.RawMessage("null")}.Event(), replay.SignalReceived("x", nil), dec, replay.CompleteWorkflow{}.Event()},
		"missing timer_started":  {started(), dec},
		"extra command recorded": {started(), dec, replay.StartTimer{Seq: 1, Duration: time.Hour}.Event(), replay.StartTimer{Seq: 2, Duration: time.Hour}.Event()},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			in := newInstance(t, noop)
			err := in.Replay(h)
			if err == nil {
				_, err = in.Decide(&replay.Activation{Time: t0})
			}
			if err == nil {
				t.Fatal("a malformed history replayed")
			}
			t.Log(err)
			if in.Err() == nil && !strings.Contains(err.Error(), "run_started") {
				t.Fatalf("the instance is still usable after %v", err)
			}
		})
	}
}

// A non-determinism error in one of several units leaves the instance
// failed; closing it ends every unit.
func TestNonDeterminismInBranch(t *testing.T) {
	version := func(name string) replay.Func {
		return func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
			u.Parallel([]func(*replay.Unit) (any, error){
				func(u *replay.Unit) (any, error) { return nil, u.Sleep(time.Hour) },
				func(u *replay.Unit) (any, error) { return u.ExecuteActivity(name, nil, replay.ActivityOptions{}) },
				func(u *replay.Unit) (any, error) { return u.WaitSignal("x") },
			})
			return nil, nil
		}
	}
	d := decide(t, newInstance(t, version("a")), t0, started())
	h := append([]replay.Event{started()}, d.History...)
	in := newInstance(t, version("b"))
	err := in.Replay(h)
	var nde *replay.NonDeterminismError
	if !errors.As(err, &nde) || nde.Changed != "activity name" || nde.Old != `"a"` || nde.New != `"b"` {
		t.Fatalf("replay: %v", err)
	}
	if !strings.Contains(err.Error(), "instance_test.go:") {
		t.Fatalf("the error does not locate the call: %v", err)
	}
}
