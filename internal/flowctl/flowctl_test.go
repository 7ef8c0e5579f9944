package flowctl

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func cands(first int64, n int) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		out[i] = Candidate{ID: first + int64(i)}
	}
	return out
}

// Two keys of equal weight alternate, whatever their backlogs.
func TestPickAlternates(t *testing.T) {
	out := Pick(&Input{Now: t0, Want: 6, Keys: []Key{
		{Key: "flood", Candidates: cands(1, 1000)},
		{Key: "trickle", Candidates: cands(5000, 2)},
	}})
	want := []int64{1, 5000, 2, 5001, 3, 4}
	if !slices.Equal(out.Picks, want) {
		t.Fatalf("picks %v, want %v", out.Picks, want)
	}
	if got := out.Keys["flood"].Picked; got != 4 {
		t.Errorf("flood picked %d, want 4", got)
	}
}

// A key that was idle starts at the queue's clock: it gets no burst for
// the time it waited.
func TestPickIdleKeyStartsAtClock(t *testing.T) {
	out := Pick(&Input{Now: t0, Want: 4, Clock: 100, Keys: []Key{
		{Key: "a", VTime: 100, Candidates: cands(1, 10)},
		{Key: "b", VTime: 0, Candidates: cands(100, 10)},
	}})
	if want := []int64{1, 100, 2, 101}; !slices.Equal(out.Picks, want) {
		t.Fatalf("picks %v, want %v", out.Picks, want)
	}
}

// Weights share the starts: a key of weight 3 gets three for one.
func TestPickWeights(t *testing.T) {
	out := Pick(&Input{Now: t0, Want: 8, Limits: Limits{Weights: map[string]int{"big": 3}}, Keys: []Key{
		{Key: "big", Candidates: cands(1, 100)},
		{Key: "small", Candidates: cands(1000, 100)},
	}})
	if got := out.Keys["big"].Picked; got != 6 {
		t.Fatalf("big picked %d of 8, want 6 (picks %v)", got, out.Picks)
	}
}

// Higher priority goes first across keys; rotation breaks ties.
func TestPickPriority(t *testing.T) {
	out := Pick(&Input{Now: t0, Want: 3, Keys: []Key{
		{Key: "a", Candidates: []Candidate{{ID: 1, Priority: 0}}},
		{Key: "b", Candidates: []Candidate{{ID: 2, Priority: 5}, {ID: 3, Priority: 5}}},
	}})
	if want := []int64{2, 3, 1}; !slices.Equal(out.Picks, want) {
		t.Fatalf("picks %v, want %v", out.Picks, want)
	}
}

func TestPickPausedAndWindows(t *testing.T) {
	in := &Input{Now: t0, Want: 5, Limits: Limits{Paused: true}, Keys: []Key{{Key: "a", Candidates: cands(1, 5)}}}
	if out := Pick(in); len(out.Picks) != 0 {
		t.Fatalf("paused: picks %v", out.Picks)
	}
	r := Rate{Limit: 2, Period: time.Minute}
	// A window that ended counts nothing.
	in = &Input{Now: t0, Want: 5, Limits: Limits{Rate: r}, Window: Window{Start: r.Window(t0.Add(-time.Minute)), Starts: 2},
		Keys: []Key{{Key: "a", Candidates: cands(1, 5)}}}
	out := Pick(in)
	if len(out.Picks) != 2 || out.Window.Starts != 2 || !out.Window.Start.Equal(r.Window(t0)) {
		t.Fatalf("new window: picks %v, window %+v", out.Picks, out.Window)
	}
	in.Window = out.Window
	if out := Pick(in); len(out.Picks) != 0 {
		t.Fatalf("full window: picks %v", out.Picks)
	}
}

func TestRateWindow(t *testing.T) {
	r := Rate{Limit: 1, Period: time.Minute}
	if got, want := r.Window(t0), time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("window %v, want %v", got, want)
	}
	before := time.Unix(-30, 0)
	if got := r.Window(before); !got.Equal(time.Unix(-60, 0)) {
		t.Errorf("window before the epoch %v", got)
	}
}

// Properties: picks are candidates, in each key's order, never beyond a
// limit; Pick stops early only when nothing more may start; and keys of
// equal weight and priority with work throughout differ by at most one
// start.
func TestPickProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nkeys := rapid.IntRange(0, 6).Draw(t, "keys")
		lim := Limits{
			MaxRunning:       rapid.IntRange(0, 10).Draw(t, "maxRunning"),
			MaxRunningPerKey: rapid.IntRange(0, 4).Draw(t, "maxPerKey"),
			Rate:             Rate{Limit: rapid.IntRange(0, 8).Draw(t, "rate"), Period: time.Second},
			KeyRate:          Rate{Limit: rapid.IntRange(0, 4).Draw(t, "keyRate"), Period: time.Second},
		}
		in := &Input{Limits: lim, Now: t0, Want: rapid.IntRange(0, 30).Draw(t, "want"),
			Running: rapid.IntRange(0, 12).Draw(t, "running")}
		if lim.Rate.Limit > 0 {
			in.Window = Window{Start: lim.Rate.Window(t0), Starts: rapid.IntRange(0, 8).Draw(t, "started")}
		}
		id := int64(1)
		owner := map[int64]int{}
		for k := range nkeys {
			key := Key{Key: fmt.Sprintf("k%d", k), Running: rapid.IntRange(0, 3).Draw(t, "keyRunning")}
			if lim.KeyRate.Limit > 0 {
				key.Window = Window{Start: lim.KeyRate.Window(t0), Starts: rapid.IntRange(0, 4).Draw(t, "keyStarted")}
			}
			for range rapid.IntRange(0, 10).Draw(t, "cands") {
				key.Candidates = append(key.Candidates, Candidate{ID: id})
				owner[id] = k
				id++
			}
			in.Keys = append(in.Keys, key)
		}
		out := Pick(in)
		if len(out.Picks) > in.Want {
			t.Fatalf("%d picks for %d wanted", len(out.Picks), in.Want)
		}
		if lim.MaxRunning > 0 && in.Running+len(out.Picks) > max(lim.MaxRunning, in.Running) {
			t.Fatalf("running %d + %d picks > %d", in.Running, len(out.Picks), lim.MaxRunning)
		}
		if lim.Rate.Limit > 0 && in.Window.Starts+len(out.Picks) > max(lim.Rate.Limit, in.Window.Starts) {
			t.Fatalf("window %d + %d picks > %d", in.Window.Starts, len(out.Picks), lim.Rate.Limit)
		}
		per := make([]int, nkeys)
		last := make([]int64, nkeys)
		for _, p := range out.Picks {
			k, ok := owner[p]
			if !ok {
				t.Fatalf("pick %d is no candidate", p)
			}
			if p <= last[k] {
				t.Fatalf("key %d picked %d after %d", k, p, last[k])
			}
			last[k] = p
			per[k]++
		}
		stoppedEarly := len(out.Picks) < in.Want
		globalRoom := (lim.MaxRunning == 0 || in.Running+len(out.Picks) < lim.MaxRunning) &&
			(lim.Rate.Limit == 0 || in.Window.Starts+len(out.Picks) < lim.Rate.Limit)
		for k, key := range in.Keys {
			if lim.MaxRunningPerKey > 0 && key.Running+per[k] > max(lim.MaxRunningPerKey, key.Running) {
				t.Fatalf("key %d: running %d + %d > %d", k, key.Running, per[k], lim.MaxRunningPerKey)
			}
			if lim.KeyRate.Limit > 0 && key.Window.Starts+per[k] > max(lim.KeyRate.Limit, key.Window.Starts) {
				t.Fatalf("key %d: window %d + %d > %d", k, key.Window.Starts, per[k], lim.KeyRate.Limit)
			}
			keyRoom := per[k] < len(key.Candidates) &&
				(lim.MaxRunningPerKey == 0 || key.Running+per[k] < lim.MaxRunningPerKey) &&
				(lim.KeyRate.Limit == 0 || key.Window.Starts+per[k] < lim.KeyRate.Limit)
			if stoppedEarly && globalRoom && keyRoom {
				t.Fatalf("stopped at %d of %d picks while key %d could start more", len(out.Picks), in.Want, k)
			}
		}
		// Fairness: without per-key limits, keys that still had candidates
		// at the end got within one start of each other.
		if lim.MaxRunningPerKey == 0 && lim.KeyRate.Limit == 0 {
			lo, hi := -1, -1
			for k, key := range in.Keys {
				if per[k] == len(key.Candidates) {
					continue // ran dry: may have fewer
				}
				if lo < 0 || per[k] < lo {
					lo = per[k]
				}
				if per[k] > hi {
					hi = per[k]
				}
			}
			for k, key := range in.Keys {
				if per[k] == len(key.Candidates) && lo >= 0 && per[k] > lo+1 {
					t.Fatalf("key %d drained with %d picks, another has %d", k, per[k], lo)
				}
			}
			if lo >= 0 && hi-lo > 1 {
				t.Fatalf("picks per key %v: unfair", per)
			}
		}
	})
}
