package replay_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// Outstanding lists, after a history is fed, the commands it issued and
// did not report, with what the code gave them (an activity's options):
// a fresh instance fed a copy of the history finds the same, so a reset
// run can execute them again.
func TestOutstanding(t *testing.T) {
	opts := replay.ActivityOptions{Queue: "slow", StartToCloseTimeout: time.Minute}
	fn := func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		if _, err := u.ExecuteActivity("first", json.RawMessage(`1`), replay.ActivityOptions{}); err != nil {
			return nil, err
		}
		u.Parallel([]func(*replay.Unit) (any, error){
			func(u *replay.Unit) (any, error) { return u.ExecuteActivity("second", json.RawMessage(`2`), opts) },
			func(u *replay.Unit) (any, error) { return nil, u.Sleep(time.Hour) },
		})
		return nil, nil
	}
	in := newInstance(t, fn)
	d1 := decide(t, in, t0, started())
	if got := fmt.Sprint(in.Outstanding()); got != `[schedule activity #1 "first"]` {
		t.Fatalf("after the first decision: %s", got)
	}
	d2 := decide(t, in, t0.Add(time.Second), replay.Event{Kind: hephtype.EventStepCompleted, ID: 1, Data: json.RawMessage(`"ok"`)})
	want := `[schedule activity #2 "second" start timer #3 (1h0m0s)]`
	if got := fmt.Sprint(in.Outstanding()); got != want {
		t.Fatalf("after the second decision: %s, want %s", got, want)
	}
	if in.Status() != hephtype.StatusRunning {
		t.Fatalf("status %s", in.Status())
	}

	history := append([]replay.Event{started()}, d1.History...)
	history = append(history, replay.Event{Kind: hephtype.EventStepCompleted, ID: 1, Data: json.RawMessage(`"ok"`)})
	history = append(history, d2.History...)
	fresh := newInstance(t, fn)
	if err := fresh.Replay(history); err != nil {
		t.Fatal(err)
	}
	open := fresh.Outstanding()
	if got := fmt.Sprint(open); got != want {
		t.Fatalf("a fresh instance fed the history: %s, want %s", got, want)
	}
	act, ok := open[0].(replay.ScheduleActivity)
	timer, ok2 := open[1].(replay.StartTimer)
	if !ok || !ok2 || act.Options.Queue != opts.Queue || act.Options.StartToCloseTimeout != opts.StartToCloseTimeout || string(act.Input) != "2" || !timer.FireAt.Equal(t0.Add(time.Second+time.Hour)) {
		t.Fatalf("outstanding commands: %+v, %+v", open[0], open[1])
	}
}
