package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Flow control (store.Queues, docs/flow-control.md): the limits, the
// pause, the rate windows and the rotation between keys hold in claims,
// those of ClaimTasks and those of Apply alike; queues without a
// configuration are claimed as before.

// keyedRun is a run with concurrency key key and n step tasks of queue q
// (and one timer task, which flow control never holds back, when timer).
func keyedRun(id, key, q string, n int, ready time.Time) *store.NewRun {
	r := newRun(id)
	r.ConcurrencyKey = key
	for i := range n {
		r.Tasks = append(r.Tasks, task(q, fmt.Sprintf("s%03d", i), ready))
	}
	return r
}

func (h *harness) putQueue(now time.Time, q store.Queue) {
	h.t.Helper()
	if err := h.s.PutQueue(h.t.Context(), &store.PutQueueParams{Queue: q, Now: now}); err != nil {
		h.t.Fatalf("PutQueue(%+v): %v", q, err)
	}
}

func (h *harness) pause(now time.Time, name string, paused bool) {
	h.t.Helper()
	if err := h.s.PauseQueue(h.t.Context(), &store.PauseQueueParams{Name: name, Paused: paused, Now: now}); err != nil {
		h.t.Fatalf("PauseQueue(%s, %v): %v", name, paused, err)
	}
}

func (h *harness) stats(now time.Time, name string) *store.QueueStats {
	h.t.Helper()
	st, err := h.s.QueueStats(h.t.Context(), &store.QueueStatsParams{Names: []string{name}, Now: now})
	if err != nil || len(st) != 1 {
		h.t.Fatalf("QueueStats(%s): %v, %d", name, err, len(st))
	}
	return st[0]
}

func complete(h *harness, now time.Time, ts ...*store.Task) {
	h.t.Helper()
	for _, t := range ts {
		l := t.Lease()
		h.mustUpdate(now, t.RunID, &l, &store.Update{})
	}
}

func keysOf(ts []*store.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ConcurrencyKey
	}
	return out
}

// testQueueConfig: a configuration is stored, validated, kept apart from
// the pause, and listed with its figures.
func testQueueConfig(t *testing.T, h *harness) {
	ctx := t.Context()
	_, err := h.s.GetQueue(ctx, "q")
	wantErr(t, "GetQueue of a queue without a configuration", err, store.ErrQueueNotFound)
	q := store.Queue{Name: "q", MaxRunning: 5, MaxRunningPerKey: 2, Rate: store.Rate{Limit: 10, Period: time.Minute},
		KeyRate: store.Rate{Limit: 3, Period: time.Second}, Weights: map[string]int{"big": 3}}
	h.putQueue(at(0), q)
	h.pause(at(time.Second), "q", true)
	got, err := h.s.GetQueue(ctx, "q")
	if err != nil {
		t.Fatalf("GetQueue: %v", err)
	}
	want := q
	want.Paused, want.UpdatedAt = true, at(time.Second).Truncate(time.Microsecond)
	diff(t, "queue", &want, got)
	// PutQueue keeps the pause; PauseQueue keeps the limits.
	q.MaxRunning = 7
	h.putQueue(at(2*time.Second), q)
	h.pause(at(3*time.Second), "q", false)
	got, _ = h.s.GetQueue(ctx, "q")
	if got.Paused || got.MaxRunning != 7 || got.MaxRunningPerKey != 2 {
		t.Fatalf("after put and resume: %+v", got)
	}
	for _, bad := range []store.Queue{
		{},
		{Name: strings.Repeat("x", 201)},
		{Name: "q", MaxRunning: -1},
		{Name: "q", Rate: store.Rate{Limit: 1}},
		{Name: "q", Rate: store.Rate{Period: time.Second}},
		{Name: "q", KeyRate: store.Rate{Limit: 1, Period: time.Nanosecond}},
		{Name: "q", Weights: map[string]int{"a": 0}},
		{Name: "q", Weights: map[string]int{"a\n": 1}},
	} {
		if err := h.s.PutQueue(ctx, &store.PutQueueParams{Queue: bad, Now: at(0)}); err == nil {
			t.Errorf("PutQueue(%+v): no error", bad)
		}
	}
	// A concurrency key that is too long, or holds a control character, is
	// refused at creation.
	for _, key := range []string{strings.Repeat("k", store.MaxConcurrencyKey+1), "a\tb"} {
		r := keyedRun("bad", key, "q", 1, at(0))
		res := h.apply(at(0), store.Change{Create: r})
		if res[0].Err == nil {
			t.Errorf("create with concurrency key %q: no error", key)
		}
	}
	// Runs and their work tasks carry the key; other tasks do not.
	r := keyedRun("r", "tenant-1", "q", 1, at(0))
	r.Tasks = append(r.Tasks, store.NewTask{Queue: "q", Kind: store.TaskTimer, Step: "t", Index: -1, ReadyAt: at(time.Hour)})
	res := h.create(at(0), r)
	if got := h.get("r").ConcurrencyKey; got != "tenant-1" {
		t.Errorf("run's key %q", got)
	}
	if ks := keysOf(res[0].Tasks); !slices.Equal(ks, []string{"tenant-1", ""}) {
		t.Errorf("created tasks' keys %q", ks)
	}
	ts := h.claim(at(4*time.Second), "w", 10, time.Minute, "q")
	if len(ts) != 1 || ts[0].ConcurrencyKey != "tenant-1" {
		t.Fatalf("claimed %+v", ts)
	}
	st := h.stats(at(5*time.Second), "q")
	if !st.Configured || st.Scheduled != 1 || st.Leased != 1 || st.Running != 1 ||
		!slices.Equal(st.RunningByKey, []store.KeyCount{{Key: "tenant-1", Count: 1}}) {
		t.Errorf("stats %+v", st)
	}
	if st.WindowStarts != 1 || !st.Window.Equal((store.Rate{Limit: 1, Period: time.Minute}).Window(at(5*time.Second))) {
		t.Errorf("rate window %v, %d starts", st.Window, st.WindowStarts)
	}
	all, err := h.s.QueueStats(ctx, &store.QueueStatsParams{Now: at(5 * time.Second)})
	if err != nil || len(all) != 1 || all[0].Queue.Name != "q" {
		t.Fatalf("all queues: %v, %+v", err, all)
	}
}

// testQueueUnconfigured: a queue with no configuration, or one that
// controls nothing, is claimed as before: in claim order, no limit.
func testQueueUnconfigured(t *testing.T, h *harness) {
	h.create(at(0), keyedRun("a", "x", "q", 5, at(0)), keyedRun("b", "y", "q", 5, at(time.Millisecond)))
	h.putQueue(at(0), store.Queue{Name: "q"})
	ts := h.claim(at(time.Second), "w", 7, time.Minute, "q")
	if len(ts) != 7 || !slices.Equal(keysOf(ts), []string{"x", "x", "x", "x", "x", "y", "y"}) {
		t.Fatalf("claimed keys %q", keysOf(ts))
	}
	st := h.stats(at(time.Second), "q")
	if st.Running != 0 || st.Leased != 7 || st.Ready != 3 {
		t.Errorf("stats %+v", st)
	}
}

// testQueueLimits: the queue's limit and the per-key limit hold; a slot
// frees when its task completes or its lease expires (and the late
// completion is refused); claims of Apply obey them too.
func testQueueLimits(t *testing.T, h *harness) {
	h.putQueue(at(0), store.Queue{Name: "q", MaxRunning: 3, MaxRunningPerKey: 2})
	h.create(at(0), keyedRun("a", "a", "q", 10, at(0)), keyedRun("b", "b", "q", 10, at(0)))
	ts := h.claim(at(time.Second), "w", 10, time.Minute, "q")
	if len(ts) != 3 {
		t.Fatalf("claimed %d under a limit of 3", len(ts))
	}
	per := map[string]int{}
	for _, t := range ts {
		per[t.ConcurrencyKey]++
	}
	if per["a"] > 2 || per["b"] > 2 {
		t.Fatalf("per key %v over 2", per)
	}
	if got := h.claim(at(2*time.Second), "w", 10, time.Minute, "q"); len(got) != 0 {
		t.Fatalf("claimed %d more at the limit", len(got))
	}
	// A completion frees its slot, in the claim of the same Apply.
	l := ts[0].Lease()
	res, err := h.s.Apply(t.Context(), &store.ApplyParams{
		Changes: []store.Change{{RunID: ts[0].RunID, Fence: &l, Decide: func(*store.Run) (*store.Update, error) { return &store.Update{}, nil }}},
		Claims:  []store.ClaimParams{{Queues: []string{"q"}, Owner: "w", Limit: 10, LeaseFor: time.Minute}},
		Now:     at(3 * time.Second),
	})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatalf("complete: %v, %+v", err, res)
	}
	if len(res.Claimed[0]) != 1 {
		t.Fatalf("the completing Apply claimed %d, want the 1 freed slot", len(res.Claimed[0]))
	}
	held := append(ts[1:], res.Claimed[0]...)
	// An expired lease frees its slot: all three expire at 1m+3s.
	later := at(2 * time.Minute)
	again := h.claim(later, "w2", 10, time.Minute, "q")
	if len(again) != 3 {
		t.Fatalf("after the leases expired claimed %d, want 3", len(again))
	}
	// A late completion of an expired lease is refused by its fence.
	stale := held[0].Lease()
	if res := h.update(later, held[0].RunID, &stale, &store.Update{}); res.Err == nil {
		t.Fatal("late completion of an expired lease applied")
	}
	if st := h.stats(later, "q"); st.Running != 3 {
		t.Errorf("running %d, want 3 (stats %+v)", st.Running, st)
	}
}

// testQueuePause: a paused queue gives no work, but its bookkeeping tasks;
// its work stays queued, and is claimable at once on resume.
func testQueuePause(t *testing.T, h *harness) {
	r := keyedRun("a", "", "q", 3, at(0))
	r.Tasks = append(r.Tasks, store.NewTask{Queue: "q", Kind: store.TaskTimer, Step: "t", Index: -1, ReadyAt: at(0)})
	h.create(at(0), r)
	h.pause(at(0), "q", true)
	ts := h.claim(at(time.Second), "w", 10, time.Minute, "q")
	if len(ts) != 1 || ts[0].Kind != store.TaskTimer {
		t.Fatalf("paused: claimed %+v, want the timer only", ts)
	}
	st := h.stats(at(time.Second), "q")
	if !st.Queue.Paused || st.Ready != 3 {
		t.Errorf("paused stats %+v", st)
	}
	h.pause(at(2*time.Second), "q", false)
	if ts := h.claim(at(2*time.Second), "w", 10, time.Minute, "q"); len(ts) != 3 {
		t.Fatalf("resumed: claimed %d, want 3", len(ts))
	}
}

// testQueueRate: at most N starts per window, windows aligned to the
// epoch, per queue and per key.
func testQueueRate(t *testing.T, h *harness) {
	h.putQueue(at(0), store.Queue{Name: "q", Rate: store.Rate{Limit: 3, Period: time.Minute}})
	h.putQueue(at(0), store.Queue{Name: "k", KeyRate: store.Rate{Limit: 1, Period: time.Minute}})
	h.create(at(0), keyedRun("a", "", "q", 10, at(0)), keyedRun("b", "x", "k", 3, at(0)), keyedRun("c", "y", "k", 3, at(0)))
	w := (store.Rate{Period: time.Minute}).Window(at(0)).Add(time.Minute) // a window after the tasks are ready
	total := 0
	for i := range 3 {
		// Three claims in each window, completing what they start.
		for j := range 3 {
			now := w.Add(time.Duration(i)*time.Minute + time.Duration(j)*10*time.Second)
			ts := h.claim(now, "w", 10, time.Second, "q")
			total += len(ts)
			complete(h, now, ts...)
		}
		if total != 3*(i+1) {
			t.Fatalf("after window %d: %d starts, want %d", i, total, 3*(i+1))
		}
	}
	ts := h.claim(w.Add(time.Second), "w", 10, time.Second, "k")
	if !slices.Equal(sorted(keysOf(ts)), []string{"x", "y"}) {
		t.Fatalf("per-key rate: claimed keys %q, want one of each", keysOf(ts))
	}
	complete(h, w.Add(time.Second), ts...)
	if ts := h.claim(w.Add(59*time.Second), "w", 10, time.Second, "k"); len(ts) != 0 {
		t.Fatalf("per-key rate: claimed %d more in the window", len(ts))
	}
	if ts := h.claim(w.Add(time.Minute), "w", 10, time.Second, "k"); len(ts) != 2 {
		t.Fatalf("per-key rate: the next window started %d, want 2", len(ts))
	}
}

// testQueueFairness: claims rotate between keys with ready work, by
// weight, whatever the backlogs.
func testQueueFairness(t *testing.T, h *harness) {
	h.putQueue(at(0), store.Queue{Name: "q", MaxRunning: 1})
	h.create(at(0), keyedRun("flood", "flood", "q", 200, at(0)), keyedRun("trickle", "trickle", "q", 3, at(time.Millisecond)))
	var order []string
	for i := range 8 {
		now := at(time.Duration(i+1) * time.Second)
		ts := h.claim(now, "w", 5, time.Minute, "q")
		if len(ts) != 1 {
			t.Fatalf("claim %d: %d tasks under a limit of 1", i, len(ts))
		}
		order = append(order, ts[0].ConcurrencyKey)
		complete(h, now, ts...)
	}
	want := []string{"flood", "trickle", "flood", "trickle", "flood", "trickle", "flood", "flood"}
	if !slices.Equal(order, want) {
		t.Fatalf("start order %q, want %q", order, want)
	}
	// Weights: 3 to 1 within one claim.
	h.putQueue(at(0), store.Queue{Name: "w", Weights: map[string]int{"big": 3}})
	h.create(at(0), keyedRun("big", "big", "w", 50, at(0)), keyedRun("small", "small", "w", 50, at(0)))
	ts := h.claim(at(time.Minute), "w", 8, time.Minute, "w")
	n := 0
	for _, k := range keysOf(ts) {
		if k == "big" {
			n++
		}
	}
	if len(ts) != 8 || n != 6 {
		t.Fatalf("weighted claim: %q", keysOf(ts))
	}
}

// testQueueConcurrentClaims: claimers racing on a controlled queue never
// exceed its limits together.
func testQueueConcurrentClaims(t *testing.T, h *harness) {
	h.putQueue(at(0), store.Queue{Name: "q", MaxRunning: 5, MaxRunningPerKey: 2})
	for i := range 4 {
		h.create(at(0), keyedRun(fmt.Sprintf("r%d", i), fmt.Sprintf("k%d", i%3), "q", 10, at(0)))
	}
	var mu sync.Mutex
	var all []*store.Task
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			for range 3 {
				ts, err := h.s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: fmt.Sprintf("w%d", i),
					Limit: 3, LeaseFor: time.Hour, Now: at(time.Second)})
				if err != nil {
					t.Errorf("ClaimTasks: %v", err)
					return
				}
				mu.Lock()
				all = append(all, ts...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	per := map[string]int{}
	for _, t := range all {
		per[t.ConcurrencyKey]++
	}
	if len(all) != 5 {
		t.Fatalf("racing claims leased %d, want 5", len(all))
	}
	for k, n := range per {
		if n > 2 {
			t.Fatalf("key %s: %d running, limit 2", k, n)
		}
	}
}

// testQueueManyKeys: a claim visits at most 100 keys, and the next claim
// goes on where it stopped, wrapping around: every key is served.
func testQueueManyKeys(t *testing.T, h *harness) {
	h.putQueue(at(0), store.Queue{Name: "q", Fair: true})
	var runs []*store.NewRun
	for i := range 120 {
		runs = append(runs, keyedRun(fmt.Sprintf("r%03d", i), fmt.Sprintf("k%03d", i), "q", 2, at(0)))
	}
	h.create(at(0), runs...)
	first := h.claim(at(time.Second), "w", 500, time.Hour, "q")
	if n := len(slices.Compact(sorted(keysOf(first)))); len(first) != 200 || n != 100 {
		t.Fatalf("first claim: %d tasks of %d keys, want both of each of 100 keys", len(first), n)
	}
	// The next visits the 20 keys left (then the first ones again, whose
	// tasks are leased).
	second := h.claim(at(time.Second), "w", 500, time.Hour, "q")
	seen := map[string]int{}
	for _, k := range append(keysOf(first), keysOf(second)...) {
		seen[k]++
	}
	if len(seen) != 120 || len(second) != 40 {
		t.Fatalf("second claim: %d tasks; %d keys served in all, want 40 and 120", len(second), len(seen))
	}
}
