// River in the side-by-side runs: the jobs workload only, on PostgreSQL.
// River is a job queue, not a workflow engine, so (a) to (c) have no River
// counterpart.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/hephaestus-go/hephaestus/app/benchrun"
)

type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error { return nil }

// riverConns is River's pool size (-river-conns); 0 leaves pgxpool's
// default, max(4, cores), what a River user who passes a DSN gets.
var riverConns int

// runRiver is the jobs workload on River: n no-op jobs inserted with
// InsertMany in batches, worked by a default queue of the given size,
// timed from the first insert to the last completion event.
func runRiver(ctx context.Context, t benchrun.Target, o benchrun.JobsOptions) (benchrun.JobsResult, error) {
	n, workers, batch := o.Jobs, o.Workers, o.Batch
	cfg, err := pgxpool.ParseConfig(t.Where)
	if err != nil {
		return benchrun.JobsResult{}, err
	}
	if riverConns > 0 {
		cfg.MaxConns = int32(riverConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return benchrun.JobsResult{}, err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, nil)
	if err != nil {
		return benchrun.JobsResult{}, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return benchrun.JobsResult{}, err
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return benchrun.JobsResult{}, err
	}
	// A buffer for every completion: River drops the events that overflow
	// a subscription's buffer (1,000 by default), and the count would
	// never reach n.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: n, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancel()
	lat := benchrun.NewLatencies()
	all := make(chan struct{})
	go func() {
		done := 0
		for ev := range events {
			lat.Done(fmt.Sprint(ev.Job.ID), time.Now())
			if done++; done == n {
				close(all)
				return
			}
		}
	}()
	if err := client.Start(ctx); err != nil {
		return benchrun.JobsResult{}, err
	}
	defer func() { _ = client.Stop(ctx) }()
	start := time.Now()
	for i := 0; i < n; i += batch {
		params := make([]river.InsertManyParams, min(batch, n-i))
		for k := range params {
			params[k] = river.InsertManyParams{Args: noopArgs{N: i + k}}
		}
		at := time.Now()
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return benchrun.JobsResult{}, err
		}
		ids := make([]string, len(res))
		for k, r := range res {
			ids[k] = fmt.Sprint(r.Job.ID)
		}
		lat.Inserted(at, ids...)
	}
	inserted := time.Since(start)
	select {
	case <-all:
	case <-ctx.Done():
		return benchrun.JobsResult{}, ctx.Err()
	}
	return benchrun.JobsResult{Engine: "river", Jobs: n, Wall: time.Since(start), Inserted: inserted, P50: lat.Pct(0.5), P99: lat.Pct(0.99)}, nil
}
