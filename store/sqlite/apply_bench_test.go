package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// chainState is an engine state of a 10-step chain, about the size the
// runtime keeps on a run.
var chainState = []byte(`{"status":"running","steps":[{"status":"completed","attempt":1,"output":1},` +
	`{"status":"completed","attempt":1,"output":1,"in":[1]},{"status":"running","attempt":1,"in":[1]},` +
	`{"status":"pending","in":[0]},{"status":"pending","in":[0]},{"status":"pending","in":[0]},` +
	`{"status":"pending","in":[0]},{"status":"pending","in":[0]},{"status":"pending","in":[0]},` +
	`{"status":"pending","in":[0]}]}`)

// chainDecide is what the runtime's Decide returns when a step of a chain
// completes: two history entries, the next step's task, a new state.
func chainDecide(*store.Run) (*store.Update, error) {
	return &store.Update{
		Status: hephtype.StatusRunning,
		State:  chainState,
		History: []store.NewEvent{
			{Kind: hephtype.EventStepCompleted, Step: "s1", Index: -1, Attempt: 1, Data: []byte(`1`)},
			{Kind: hephtype.EventStepScheduled, Step: "s2", Index: -1, Attempt: 1},
		},
		Tasks: []store.NewTask{{Queue: "default", Kind: store.TaskStep, Step: "s2", Index: -1, Attempt: 1,
			Payload: []byte(`1`)}},
	}, nil
}

// benchChain opens a store with runs runs, each with one task claimed by
// "bench", and returns the leases.
func benchChain(b *testing.B, sync string, runs int) (*Store, []store.Lease) {
	s := open(b, &Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
	changes := make([]store.Change, runs)
	for i := range changes {
		r := benchRun(i)
		r.State = chainState
		changes[i] = store.Change{Create: r}
	}
	res, err := s.Apply(b.Context(), &store.ApplyParams{Changes: changes, Now: benchNow,
		Claims: []store.ClaimParams{{Queues: []string{"default"}, Owner: "bench", Limit: runs, LeaseFor: time.Minute}}})
	if err != nil || len(res.Claimed[0]) != runs {
		b.Fatal(err)
	}
	leases := make([]store.Lease, runs)
	for i, t := range res.Claimed[0] {
		leases[i] = t.Lease()
	}
	return s, leases
}

// benchSteps completes batch claimed tasks per Apply the way the runtime
// does: each change is fenced by its task's lease, appends two history
// entries, enqueues the next task and updates the run; a claim in the
// same Apply leases the new tasks (the hand-off). ns/change is the cost
// per completed step.
func benchSteps(b *testing.B, sync string, batch int) {
	s, leases := benchChain(b, sync, batch)
	changes := make([]store.Change, batch)
	runIDs := make([]string, batch)
	for i := range runIDs {
		runIDs[i] = benchRun(i).ID
	}
	done := 0
	now := benchNow
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		for i := range changes {
			l := leases[i]
			changes[i] = store.Change{RunID: runIDs[i], Fence: &l, Decide: chainDecide}
		}
		res, err := s.Apply(b.Context(), &store.ApplyParams{Changes: changes, Now: now,
			Claims: []store.ClaimParams{{Queues: []string{"default"}, Owner: "bench", Limit: batch, LeaseFor: time.Minute}}})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range res.Changes {
			if c.Err != nil {
				b.Fatal(c.Err)
			}
		}
		if len(res.Claimed[0]) != batch {
			b.Fatalf("claimed %d tasks, want %d", len(res.Claimed[0]), batch)
		}
		// Claimed tasks come in claim order (priority, ready time, id), the
		// order their runs were completed in.
		for i, t := range res.Claimed[0] {
			if t.RunID != runIDs[i] {
				b.Fatalf("claimed task of %s, want %s", t.RunID, runIDs[i])
			}
			leases[i] = t.Lease()
		}
		done += batch
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(done), "ns/change")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(done), "cpu-ns/change")
}

// BenchmarkChainStep: one step completion per Apply, as a sequential chain
// through the runtime does.
func BenchmarkChainStep(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) { benchSteps(b, sync, 1) })
	}
}

// BenchmarkBatch64: 64 step completions per Apply (group commit).
func BenchmarkBatch64(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("sync="+sync, func(b *testing.B) { benchSteps(b, sync, 64) })
	}
}

// BenchmarkOneStep has the shape of the runtime's throughput benchmark:
// each Apply starts runs (two history entries and a task each) and
// completes as many runs whose tasks an earlier Apply claimed (fenced,
// two history entries, the output, cancelling the run's other tasks),
// then claims the new tasks. inflight more tasks stay leased in the queue
// all along, as the steps that workers are running do. ns/run is the cost
// per run started and completed.
func BenchmarkOneStep(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, batch := range []int{1, 10} {
			b.Run(fmt.Sprintf("sync=%s/batch=%d", sync, batch), func(b *testing.B) { benchOneStep(b, sync, batch, 50) })
		}
	}
}

func benchOneStep(b *testing.B, sync string, batch, inflight int) {
	s, _ := benchChain(b, sync, inflight) // leased for a minute, by a clock that stands still
	n := 0
	newRun := func() *store.NewRun {
		r := benchRun(1_000_000 + n)
		n++
		r.State = chainState
		return r
	}
	decide := func(*store.Run) (*store.Update, error) {
		return &store.Update{
			Status: hephtype.StatusCompleted, State: chainState, Output: []byte(`{"result":42}`),
			History: []store.NewEvent{
				{Kind: hephtype.EventStepCompleted, Step: "a", Index: -1, Attempt: 1, Data: []byte(`{"result":42}`)},
				{Kind: hephtype.EventRunCompleted, Data: []byte(`{"result":42}`)},
			},
			Cancel: []store.TaskMatch{{Index: -1}},
		}, nil
	}
	var claimed []*store.Task
	changes := make([]store.Change, 0, 2*batch)
	done := 0
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		changes = changes[:0]
		for range batch {
			changes = append(changes, store.Change{Create: newRun()})
		}
		for _, t := range claimed {
			l := t.Lease()
			changes = append(changes, store.Change{RunID: t.RunID, Fence: &l, Decide: decide})
		}
		res, err := s.Apply(b.Context(), &store.ApplyParams{Changes: changes, Now: benchNow,
			Claims: []store.ClaimParams{{Queues: []string{"default"}, Owner: "bench", Limit: 64, LeaseFor: time.Minute}}})
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range res.Changes {
			if c.Err != nil {
				b.Fatal(c.Err)
			}
		}
		done += len(claimed)
		claimed = res.Claimed[0]
		if len(claimed) != batch {
			b.Fatalf("claimed %d tasks, want %d", len(claimed), batch)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(done), "ns/run")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(done), "cpu-ns/run")
}
