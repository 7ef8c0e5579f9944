package sqlite

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

var benchNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func benchRun(i int) *store.NewRun {
	return &store.NewRun{
		ID: fmt.Sprintf("run-%09d", i), Workflow: "bench", Version: 1, Kind: hephtype.KindFlow,
		Status: hephtype.StatusRunning, Input: []byte(`{"order":12345,"items":[1,2,3]}`),
		History: []store.NewEvent{{Kind: hephtype.EventRunStarted}, {Kind: hephtype.EventStepScheduled, Step: "a"}},
		Tasks:   []store.NewTask{{Queue: "default", Kind: store.TaskStep, Step: "a", Index: -1, Attempt: 1}},
	}
}

// BenchmarkApply creates runs (each with two history entries and a task),
// one per Apply or 64 per Apply: with Synchronous FULL every Apply pays an
// fsync, which group commit shares. ns/run is the cost per created run.
func BenchmarkApply(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("sync=%s/batch=%d", sync, batch), func(b *testing.B) {
				s := open(b, &Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
				changes := make([]store.Change, batch)
				n := 0
				b.ResetTimer()
				for b.Loop() {
					for i := range changes {
						changes[i] = store.Change{Create: benchRun(n)}
						n++
					}
					res, err := s.Apply(b.Context(), &store.ApplyParams{Changes: changes, Now: benchNow})
					if err != nil || res.Changes[0].Err != nil {
						b.Fatal(err, res.Changes[0].Err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/run")
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "runs/s")
			})
		}
	}
}

// BenchmarkClaim claims tasks from a queue of 10,000, 1 or 32 per call;
// the clock advances past the lease at every call so the queue never
// drains. ns/task is the cost per claimed task. The controlled variants
// spread the runs over 10 concurrency keys in a queue with a per-key
// limit that never binds: the cost of a claim under flow control.
func BenchmarkClaim(b *testing.B) {
	for _, controlled := range []bool{false, true} {
		for _, limit := range []int{1, 32} {
			name := fmt.Sprintf("limit=%d", limit)
			if controlled {
				name += "/controlled"
			}
			b.Run(name, func(b *testing.B) {
				s := open(b, &Config{Path: filepath.Join(b.TempDir(), "bench.db")})
				if controlled {
					if err := s.PutQueue(b.Context(), &store.PutQueueParams{Queue: store.Queue{Name: "default", MaxRunningPerKey: 1000}, Now: benchNow}); err != nil {
						b.Fatal(err)
					}
				}
				for r := range 100 {
					changes := make([]store.Change, 100)
					for i := range changes {
						run := benchRun(r*100 + i)
						if controlled {
							run.ConcurrencyKey = fmt.Sprintf("k%d", i%10)
						}
						changes[i] = store.Change{Create: run}
					}
					if _, err := s.Apply(b.Context(), &store.ApplyParams{Changes: changes, Now: benchNow}); err != nil {
						b.Fatal(err)
					}
				}
				now, claimed := benchNow, 0
				b.ResetTimer()
				for b.Loop() {
					now = now.Add(time.Minute)
					ts, err := s.ClaimTasks(b.Context(), &store.ClaimParams{
						Queues: []string{"default"}, Owner: "bench", Limit: limit, LeaseFor: time.Minute, Now: now})
					if err != nil || len(ts) != limit {
						b.Fatal(err, len(ts))
					}
					claimed += len(ts)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(claimed), "ns/task")
			})
		}
	}
}

// BenchmarkComplete claims tasks and completes each with a fenced Apply
// that appends a history entry and enqueues the next task: one completion
// per Apply or the whole claimed batch of 64 in one.
func BenchmarkComplete(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := open(b, &Config{Path: filepath.Join(b.TempDir(), "bench.db")})
			changes := make([]store.Change, 64)
			for i := range changes {
				changes[i] = store.Change{Create: benchRun(i)}
			}
			if _, err := s.Apply(b.Context(), &store.ApplyParams{Changes: changes, Now: benchNow}); err != nil {
				b.Fatal(err)
			}
			next := &store.Update{
				History: []store.NewEvent{{Kind: hephtype.EventStepCompleted, Step: "a", Data: []byte(`{"ok":true}`)}},
				Tasks:   []store.NewTask{{Queue: "default", Kind: store.TaskStep, Step: "a", Index: -1, Attempt: 1}},
			}
			decide := func(*store.Run) (*store.Update, error) { return next, nil }
			done := 0
			b.ResetTimer()
			for b.Loop() {
				ts, err := s.ClaimTasks(b.Context(), &store.ClaimParams{
					Queues: []string{"default"}, Owner: "bench", Limit: 64, LeaseFor: time.Minute, Now: benchNow})
				if err != nil || len(ts) != 64 {
					b.Fatal(err, len(ts))
				}
				for start := 0; start < len(ts); start += batch {
					cs := changes[:0]
					for _, t := range ts[start:min(start+batch, len(ts))] {
						l := t.Lease()
						cs = append(cs, store.Change{RunID: t.RunID, Fence: &l, Decide: decide})
					}
					res, err := s.Apply(b.Context(), &store.ApplyParams{Changes: cs, Now: benchNow})
					if err != nil || res.Changes[0].Err != nil {
						b.Fatal(err, res.Changes[0].Err)
					}
					done += len(cs)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(done), "ns/completion")
		})
	}
}
