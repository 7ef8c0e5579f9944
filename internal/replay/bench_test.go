package replay_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// steps is a workflow of n sequential activities.
func steps(n int) replay.Func {
	return func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		for i := range n {
			if _, err := u.ExecuteActivity("a", json.RawMessage(strconv.Itoa(i)), replay.ActivityOptions{}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}
}

// history records a run of steps(n).
func history(b *testing.B, n int) []replay.Event {
	in, err := replay.New(&replay.Config{Workflow: steps(n)})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	h := []replay.Event{started()}
	d, err := in.Decide(&replay.Activation{Events: h, Time: t0})
	if err != nil {
		b.Fatal(err)
	}
	h = append(h, d.History...)
	for i := 1; i <= n; i++ {
		ev := replay.ActivityCompleted(i, "a", json.RawMessage("null"))
		d, err := in.Decide(&replay.Activation{Events: []replay.Event{ev}, Time: t0})
		if err != nil {
			b.Fatal(err)
		}
		h = append(h, ev)
		h = append(h, d.History...)
	}
	return h
}

// BenchmarkReplay measures a fresh replay of a run of 100 activities (one
// op = the whole history).
func BenchmarkReplay(b *testing.B) {
	h := history(b, 100)
	b.ResetTimer()
	for b.Loop() {
		in, _ := replay.New(&replay.Config{Workflow: steps(100)})
		if err := in.Replay(h); err != nil {
			b.Fatal(err)
		}
		in.Close()
	}
}

// BenchmarkStickyDecision measures one decision of a sticky instance: an
// activity completes, the next is scheduled.
func BenchmarkStickyDecision(b *testing.B) {
	in, _ := replay.New(&replay.Config{Workflow: steps(1 << 30)})
	defer in.Close()
	if _, err := in.Decide(&replay.Activation{Events: []replay.Event{started()}, Time: t0}); err != nil {
		b.Fatal(err)
	}
	seq := 1
	for b.Loop() {
		ev := replay.ActivityCompleted(seq, "a", json.RawMessage("null"))
		if _, err := in.Decide(&replay.Activation{Events: []replay.Event{ev}, Time: t0}); err != nil {
			b.Fatal(err)
		}
		seq++
	}
}
