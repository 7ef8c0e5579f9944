package replay_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// Decision.Waits lists what the blocked units wait for: the signal and
// the timer (with its fire time) of parallel branches, then a phase's
// signals, updates and timeout; after the timer fires it is gone, and a
// finished run waits for nothing.
func TestDecisionWaits(t *testing.T) {
	in := newInstance(t, func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		u.Parallel([]func(*replay.Unit) (any, error){
			func(u *replay.Unit) (any, error) { _, err := u.WaitSignal("go"); return nil, err },
			func(u *replay.Unit) (any, error) { return nil, u.Sleep(time.Hour) },
		})
		_, _, err := u.Phase(&replay.PhaseSpec{Initial: 0, Timeout: 2 * time.Hour,
			Signals: []replay.SignalHandler{{Name: "stop", Decode: func(json.RawMessage) (any, error) { return nil, nil },
				Handle: func(u *replay.Unit, _, st any) replay.HandlerResult {
					return replay.HandlerResult{State: st, Stop: true}
				}}},
			Updates: []replay.UpdateHandler{{Name: "add", Decode: func(json.RawMessage) (any, error) { return nil, nil },
				Handle: func(u *replay.Unit, _, st any) replay.HandlerResult { return replay.HandlerResult{State: st} }}},
		})
		return nil, err
	})
	d := decide(t, in, t0, started())
	want := []replay.Wait{{Kind: replay.WaitSignal, Name: "go"}, {Kind: replay.WaitTimer, Seq: 1, Due: t0.Add(time.Hour)}}
	if !reflect.DeepEqual(d.Waits, want) {
		t.Fatalf("first decision waits %+v, want %+v", d.Waits, want)
	}
	t1 := t0.Add(time.Hour)
	d = decide(t, in, t1, replay.TimerFired(1))
	want = []replay.Wait{{Kind: replay.WaitSignal, Name: "go"}}
	if !reflect.DeepEqual(d.Waits, want) {
		t.Fatalf("after the timer: waits %+v, want %+v", d.Waits, want)
	}
	d = decide(t, in, t1, replay.SignalReceived("go", nil))
	want = []replay.Wait{{Kind: replay.WaitSignal, Name: "stop"}, {Kind: replay.WaitUpdate, Name: "add"}, {Kind: replay.WaitTimer, Seq: 2, Due: t1.Add(2 * time.Hour)}}
	if !reflect.DeepEqual(d.Waits, want) {
		t.Fatalf("in the phase: waits %+v, want %+v", d.Waits, want)
	}
	d = decide(t, in, t1, replay.SignalReceived("stop", nil))
	if len(d.Waits) != 0 || !d.Status.Terminal() {
		t.Fatalf("finished (%s): waits %+v, want none", d.Status, d.Waits)
	}
}
