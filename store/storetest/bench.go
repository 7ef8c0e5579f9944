package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// BenchClaimWithHandlers measures ClaimTasks for a claim that lists
// handlers, as every in-process worker's does, on stores from open (one
// per sub-benchmark): 10,000 ready tasks that any worker runs (handler
// ""), a claim listing k handlers (and so the empty one), limit 1 and 32:
// the common case, where the front of the queue is the claimer's. ns/task
// is the cost per task claimed.
func BenchClaimWithHandlers(b *testing.B, open func(b *testing.B) store.Store) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range []int{1, 10} {
		for _, limit := range []int{1, 32} {
			b.Run(fmt.Sprintf("handlers=%d/limit=%d", k, limit), func(b *testing.B) {
				s := open(b)
				for r := range 100 {
					changes := make([]store.Change, 100)
					for i := range changes {
						changes[i] = store.Change{Create: &store.NewRun{
							ID: fmt.Sprintf("run-%09d", r*100+i), Workflow: "bench", Version: 1, Kind: hephtype.KindFlow,
							Status: hephtype.StatusRunning, Input: []byte(`{"order":12345}`),
							History: []store.NewEvent{{Kind: hephtype.EventRunStarted}, {Kind: hephtype.EventStepScheduled, Step: "a"}},
							Tasks:   []store.NewTask{{Queue: "default", Kind: store.TaskStep, Step: "a", Index: -1, Attempt: 1}},
						}}
					}
					if _, err := s.Apply(b.Context(), &store.ApplyParams{Changes: changes, Now: now}); err != nil {
						b.Fatal(err)
					}
				}
				var handlers []string
				for i := range k {
					handlers = append(handlers, fmt.Sprintf("flow:h%d@1", i))
				}
				at, claimed := now, 0
				b.ResetTimer()
				for b.Loop() {
					at = at.Add(time.Minute)
					ts, err := s.ClaimTasks(b.Context(), &store.ClaimParams{
						Queues: []string{"default"}, Handlers: handlers, Owner: "bench", Limit: limit, LeaseFor: time.Minute, Now: at})
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
