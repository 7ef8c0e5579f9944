package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

const workers = 8

// Claimers racing over one queue never get the same task, and together
// get all of them.
func testConcurrentClaims(t *testing.T, h *harness) {
	const tasks = 240
	var want []int64
	for r := range 4 {
		var ts []store.NewTask
		for i := range tasks / 4 {
			nt := task("q", fmt.Sprint(i), at(time.Duration(i%7)*time.Second))
			nt.Priority = i % 3
			ts = append(ts, nt)
		}
		res := h.create(at(0), withTasks(newRun(name(r)), ts...))[0]
		want = append(want, taskIDs(res.Tasks)...)
	}
	got := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				ts, err := h.s.ClaimTasks(t.Context(), &store.ClaimParams{
					Queues: []string{"q"}, Owner: fmt.Sprint("w", w), Limit: 1 + w%7, LeaseFor: time.Hour, Now: at(time.Minute)})
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if len(ts) == 0 {
					return
				}
				got[w] = append(got[w], taskIDs(ts)...)
			}
		})
	}
	wg.Wait()
	var all []int64
	for _, g := range got {
		all = append(all, g...)
	}
	seen := map[int64]bool{}
	for _, id := range all {
		if seen[id] {
			t.Fatalf("task %d claimed twice", id)
		}
		seen[id] = true
	}
	diff(t, "claimed tasks", sorted(want), sorted(all))
}

// Starts racing on one business key, each in its own Apply: one wins, the
// others learn who.
func testConcurrentStarts(t *testing.T, h *harness) {
	const keys, racers = 5, 12
	type outcome struct {
		id  string
		err error
	}
	results := make([][]outcome, keys)
	for k := range keys {
		results[k] = make([]outcome, racers)
	}
	var wg sync.WaitGroup
	for k := range keys {
		for i := range racers {
			wg.Go(func() {
				r := newRun(fmt.Sprintf("k%d-%d", k, i))
				r.BusinessID, r.KeyScope = fmt.Sprintf("order::%d", k), businesskey.ScopeActive
				res, err := h.s.Apply(t.Context(), &store.ApplyParams{Changes: []store.Change{{Create: r}}, Now: at(0)})
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				results[k][i] = outcome{r.ID, res.Changes[0].Err}
			})
		}
	}
	wg.Wait()
	for k := range keys {
		var winners []string
		for _, o := range results[k] {
			if o.err == nil {
				winners = append(winners, o.id)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("key %d: winners %v, want exactly one", k, winners)
		}
		for _, o := range results[k] {
			var de *store.DuplicateRunError
			if o.err != nil && (!errors.As(o.err, &de) || de.ExistingRunID != winners[0]) {
				t.Fatalf("key %d, run %s: %v, want a duplicate naming %s", k, o.id, o.err, winners[0])
			}
		}
		r, err := h.s.FindRun(t.Context(), &store.FindRunParams{BusinessID: fmt.Sprintf("order::%d", k)})
		if err != nil || r.ID != winners[0] {
			t.Fatalf("FindRun: %v, %v; want %s", r, err, winners[0])
		}
		if page := h.list(store.ListRunsParams{BusinessID: fmt.Sprintf("order::%d", k)}); len(page.Runs) != 1 {
			t.Fatalf("key %d: %d runs", k, len(page.Runs))
		}
	}
}

// Applies racing on one run never lose or reorder history entries.
func testConcurrentUpdates(t *testing.T, h *harness) {
	const rounds, perChange = 15, 2
	h.create(at(0), newRun("hot"))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				label := fmt.Sprintf("%d/%d", w, i)
				res, err := h.s.Apply(t.Context(), &store.ApplyParams{Now: at(time.Second), Changes: []store.Change{{
					RunID: "hot",
					Decide: func(run *store.Run) (*store.Update, error) {
						evs := make([]store.NewEvent, perChange)
						for j := range evs {
							evs[j] = store.NewEvent{Kind: hephtype.EventMarker, Name: label, Index: j}
						}
						return &store.Update{History: evs, State: raw(fmt.Sprintf(`{"after":%d}`, run.Seq))}, nil
					},
				}}})
				if err == nil {
					err = res.Changes[0].Err
				}
				if err != nil {
					t.Errorf("%s: %v", label, err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := int64(workers * rounds * perChange)
	if r := h.get("hot"); r.Seq != total {
		t.Fatalf("seq = %d, want %d", r.Seq, total)
	}
	evs := h.history("hot")
	if int64(len(evs)) != total {
		t.Fatalf("%d history entries, want %d", len(evs), total)
	}
	count := map[string]int{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d", i, e.Seq)
		}
		// A change's entries are consecutive.
		if e.Index != i%perChange {
			t.Fatalf("entry %d (%s) is element %d of its change, want %d", i, e.Name, e.Index, i%perChange)
		}
		count[e.Name]++
	}
	for w := range workers {
		for i := range rounds {
			if n := count[fmt.Sprintf("%d/%d", w, i)]; n != perChange {
				t.Fatalf("change %d/%d has %d entries, want %d", w, i, n, perChange)
			}
		}
	}
}
