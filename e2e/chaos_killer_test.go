package e2e_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// chaosProgress counts what the event chaos cases have committed: events
// stored, firings made and ended, waits matched and delivered, group
// members joined and groups closed, and history written by the runs. It
// only grows while the workload gets anywhere.
const chaosProgress = `SELECT
	(SELECT count(*) FROM heph.sent_events)
	+ (SELECT count(*) + count(*) FILTER (WHERE status <> 'pending') FROM heph.event_firings)
	+ (SELECT count(matched_event_id) + count(delivered_at) FROM heph.event_waits)
	+ (SELECT count(*) FROM heph.trigger_group_events)
	+ (SELECT count(*) FILTER (WHERE status <> 'open') FROM heph.trigger_groups)
	+ (SELECT count(*) FROM heph.history)`

// chaosSessionKiller terminates, on PostgreSQL, every session whose
// application_name starts with prefix (the case's own stores; a prefix
// per case keeps it off the sessions of cases running beside it) until
// the returned stop is called, which fails the test if nothing was
// killed. It kills at most every 100 ms, and only once the workload
// committed something since the last kill: on a loaded machine a
// transaction can take longer than 100 ms, and killing on a clock alone
// then kills every transaction before it commits (CI saw
// TestChaosEventWaits and TestChaosTriggers make no progress for six
// minutes under two busy loops and -race). Tied to progress, the kills
// still land on work in flight but can never stop it.
func chaosSessionKiller(t *testing.T, ctx context.Context, db chaosDB, prefix string) (func(), *atomic.Int64) {
	var rounds atomic.Int64
	if db.dsn == "" {
		return func() {}, &rounds
	}
	admin, err := pgx.Connect(ctx, withDSNParam(db.dsn, "application_name", "chaos-admin"))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	failed := func(err error) {
		select {
		case <-stop:
		default:
			if ctx.Err() == nil {
				t.Errorf("session killer: %v", err)
			}
		}
	}
	var killer sync.WaitGroup
	killer.Go(func() {
		last := int64(-1)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			var now int64
			if err := admin.QueryRow(ctx, chaosProgress).Scan(&now); err != nil {
				failed(err)
				return
			}
			if now == last {
				continue
			}
			last = now
			if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND starts_with(application_name, $1)`, prefix); err != nil {
				failed(err)
				return
			}
			rounds.Add(1)
		}
	})
	return sync.OnceFunc(func() {
		close(stop)
		killer.Wait()
		_ = admin.Close(context.Background())
		if rounds.Load() == 0 && !t.Failed() {
			t.Errorf("the session killer killed nothing: the case ran without its chaos")
		}
	}), &rounds
}
