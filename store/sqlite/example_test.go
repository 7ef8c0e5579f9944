package sqlite_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func ExampleOpen() {
	ctx := context.Background()
	// A file store: &sqlite.Config{Path: "heph.db"}.
	s, err := sqlite.Open(ctx, &sqlite.Config{Memory: true})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	res, err := s.Apply(ctx, &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{
		ID: "run-1", Workflow: "orders", Kind: hephtype.KindFlow, Status: hephtype.StatusRunning,
		History: []store.NewEvent{{Kind: hephtype.EventRunStarted}},
		Tasks:   []store.NewTask{{Queue: "default", Kind: store.TaskStep, Step: "charge", Index: -1}},
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		panic(fmt.Sprint(err, res))
	}
	tasks, err := s.ClaimTasks(ctx, &store.ClaimParams{
		Queues: []string{"default"}, Owner: "worker-1", Limit: 10, LeaseFor: time.Minute, Now: now})
	if err != nil {
		panic(err)
	}
	fmt.Println(tasks[0].RunID, tasks[0].Step, tasks[0].LeaseUntil.Format(time.TimeOnly))
	// Output: run-1 charge 12:01:00
}
