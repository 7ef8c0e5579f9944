// Package flowctl decides which ready tasks of a flow-controlled queue a
// claim leases: the pure core of flow control (docs/flow-control.md). A
// backend reads what the decision needs inside the claim's transaction,
// with the queue locked (its limits, the live leases per key, the rate
// windows, the rotation state and the candidates of each key), calls
// Pick, leases the tasks it names and writes back the state it returns,
// in the same transaction. Pick does no I/O and reads no clock.
package flowctl

import (
	"cmp"
	"time"
)

// Limits are a queue's flow-control settings. Zero limits do not limit.
type Limits struct {
	Paused           bool
	MaxRunning       int
	MaxRunningPerKey int
	Rate             Rate
	KeyRate          Rate
	// Weights by key; keys not named weigh 1.
	Weights map[string]int
}

// Rate is at most Limit starts per window of Period, windows aligned to
// the Unix epoch.
type Rate struct {
	Limit  int
	Period time.Duration
}

// Window returns the start of the window of r that holds t (zero without
// a period).
func (r Rate) Window(t time.Time) time.Time {
	p := r.Period.Microseconds()
	if p <= 0 {
		return time.Time{}
	}
	us := t.UnixMicro()
	return time.UnixMicro(us - ((us%p)+p)%p).UTC()
}

// Window is a rate window's use: the starts counted since Start.
type Window struct {
	Start  time.Time
	Starts int
}

// current returns w as of time now under r: a window that ended counts
// nothing.
func (w Window) current(r Rate, now time.Time) Window {
	if r.Limit <= 0 {
		return Window{}
	}
	s := r.Window(now)
	if !w.Start.Equal(s) {
		return Window{Start: s}
	}
	return w
}

// Candidate is a claimable task of a key.
type Candidate struct {
	ID       int64
	Priority int
}

// Key is the state of one concurrency key with claimable work.
type Key struct {
	Key string
	// VTime is the key's virtual time: it grows by 1/weight at each start.
	VTime float64
	// Window is its use of KeyRate.
	Window Window
	// Running counts its work with a live lease.
	Running int
	// Candidates are its claimable tasks in claim order (highest priority
	// first, then oldest ready, then id).
	Candidates []Candidate
}

// Input is what Pick decides over.
type Input struct {
	Limits Limits
	Now    time.Time
	// Want is the most tasks to pick (the claim's free slots).
	Want int
	// Running counts the queue's work with a live lease.
	Running int
	// Window is the queue's use of Limits.Rate.
	Window Window
	// Clock is the queue's virtual clock: the start time of the last pick.
	Clock float64
	// Keys have claimable work. Order does not matter.
	Keys []Key
}

// Output is what Pick decided.
type Output struct {
	// Picks are the tasks to lease, in the order they were chosen.
	Picks []int64
	// Window and Clock are the queue's new state.
	Window Window
	Clock  float64
	// Keys holds the new state of every key of the input that got a pick,
	// or whose rate window moved.
	Keys map[string]KeyState
}

// KeyState is the state of a key to store.
type KeyState struct {
	VTime  float64
	Window Window
	Picked int
}

// Pick chooses up to in.Want candidates within the limits. Among the keys
// whose head candidate may start (the key has a free slot and rate left),
// it takes the head of the highest priority, and among equal priorities
// the key of the lowest virtual start time max(VTime, Clock), then the
// smaller key: a start-time fair queue. A key that was idle starts at the
// queue's clock, so it neither jumps ahead for the time it waited nor
// falls behind; each start advances the key's time by 1/weight.
//
// So while keys of equal weight and priority have ready work, their
// starts alternate: between two starts of one key, every other key with
// claimable work starts at most once (with weights, at most
// ceil(w_other/w_key) times).
func Pick(in *Input) *Output {
	out := &Output{Window: in.Window.current(in.Limits.Rate, in.Now), Clock: in.Clock, Keys: map[string]KeyState{}}
	type key struct {
		k      *Key
		st     KeyState
		next   int
		free   int // slots left, -1 unlimited
		rate   int // starts left in the window, -1 unlimited
		weight float64
	}
	keys := make([]*key, 0, len(in.Keys))
	for i := range in.Keys {
		k := &in.Keys[i]
		ks := &key{k: k, st: KeyState{VTime: k.VTime, Window: k.Window.current(in.Limits.KeyRate, in.Now)}, free: -1, rate: -1, weight: 1}
		if w := in.Limits.Weights[k.Key]; w > 0 {
			ks.weight = float64(w)
		}
		if m := in.Limits.MaxRunningPerKey; m > 0 {
			ks.free = max(0, m-k.Running)
		}
		if r := in.Limits.KeyRate.Limit; r > 0 {
			ks.rate = max(0, r-ks.st.Window.Starts)
		}
		if ks.st.Window != k.Window {
			out.Keys[k.Key] = ks.st
		}
		keys = append(keys, ks)
	}
	if in.Limits.Paused || in.Want <= 0 {
		return out
	}
	free, rate := -1, -1
	if m := in.Limits.MaxRunning; m > 0 {
		free = max(0, m-in.Running)
	}
	if r := in.Limits.Rate.Limit; r > 0 {
		rate = max(0, r-out.Window.Starts)
	}
	for len(out.Picks) < in.Want && free != 0 && rate != 0 {
		var best *key
		var bestStart float64
		for _, ks := range keys {
			if ks.next >= len(ks.k.Candidates) || ks.free == 0 || ks.rate == 0 {
				continue
			}
			start := max(ks.st.VTime, out.Clock)
			if best == nil {
				best, bestStart = ks, start
				continue
			}
			c := cmp.Compare(best.k.Candidates[best.next].Priority, ks.k.Candidates[ks.next].Priority)
			if c == 0 {
				c = cmp.Compare(start, bestStart)
			}
			if c == 0 {
				c = cmp.Compare(ks.k.Key, best.k.Key)
			}
			if c < 0 {
				best, bestStart = ks, start
			}
		}
		if best == nil {
			break
		}
		out.Picks = append(out.Picks, best.k.Candidates[best.next].ID)
		best.next++
		best.st.VTime = bestStart + 1/best.weight
		best.st.Picked++
		out.Clock = bestStart
		if in.Limits.KeyRate.Limit > 0 {
			best.st.Window.Starts++
		}
		out.Keys[best.k.Key] = best.st
		if best.free > 0 {
			best.free--
		}
		if best.rate > 0 {
			best.rate--
		}
		if free > 0 {
			free--
		}
		if rate > 0 {
			rate--
		}
		if in.Limits.Rate.Limit > 0 {
			out.Window.Starts++
		}
	}
	return out
}
