package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// lossyPrune loses the answer to a third of the prunes that committed,
// as a sweep whose process or connection died after its COMMIT would:
// the caller runs the prune again.
type lossyPrune struct {
	store.Store
	rng  *rand.Rand // one caller
	lost atomic.Int64
}

func (l *lossyPrune) PruneEvents(ctx context.Context, p *store.PruneEventsParams) (int, error) {
	n, err := l.Store.PruneEvents(ctx, p)
	if err == nil && l.rng.IntN(3) == 0 {
		l.lost.Add(1)
		return 0, errors.New("chaos: the answer to a committed prune was lost")
	}
	return n, err
}

// TestChaosEventsPrune: the retention sweep of events (PruneEvents) runs
// while trigger groups form under the faults of TestChaosTriggerGroups.
// 60 old events of keys that get no later event are grouped first; then,
// while 300 new events are sent and grouped (an eighth of the claims,
// joins and group ends lost, and on PostgreSQL every session, the
// sweep's included, terminated every 100 ms while the workload makes
// progress), a sweep prunes up to 5 rows of each kind at a time, with
// the cutoff between the two, losing the answer to a third of its
// commits and running again. The sweep must take every old event,
// firing, group and throttle window, and nothing new: every new event
// still ends in exactly one group per trigger, and no throttle window
// starts more than its limit. (A sweep has no lease: a frozen sweep is a
// slow transaction, which the killed sessions cover.)
func TestChaosEventsPrune(t *testing.T) {
	inEachChaosBackend(t, runChaosEventsPrune)
}

func runChaosEventsPrune(t *testing.T, db chaosDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*chaosTimeout)
	defer cancel()
	const old, events = 60, 300
	clients, lossy := startGroupClients(t, ctx, db, "hephaestus-chaos-prn-")
	reader := db.open(t, "chaos-reader")
	count := oldRowCounter(t, db, reader)
	sendGroupEvents(ctx, clients, old, func(n int) (string, any) {
		return fmt.Sprint("old-", n), map[string]any{"n": n, "k": fmt.Sprint("o", n%5)}
	})
	waitGroupsEnded(ctx, t, reader, "old-", old)
	oldRuns := countRuns(ctx, t, reader, "grouped")
	// Every window of the old keys started by now and ends one throttle
	// period (500 ms) later, before the cutoff; every new event is stored
	// after it.
	cutoff := time.Now().Add(time.Second)
	before, err := count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if before.events != old || before.firings != 3*old || before.windows < 5 || before.groups == 0 {
		t.Fatalf("before the sweep: %+v, want %d events, %d firings, a window per old key and groups", before, old, 3*old)
	}
	time.Sleep(time.Until(cutoff) + 10*time.Millisecond)

	pruner := &lossyPrune{Store: db.open(t, "hephaestus-chaos-prn-sweep"), rng: rand.New(rand.NewPCG(7, 41))}
	stopKiller, killRounds := chaosSessionKiller(t, ctx, db, "hephaestus-chaos-prn-")
	defer stopKiller()
	var sweep sync.WaitGroup
	var sweeps, failed atomic.Int64
	sweep.Go(func() {
		for ctx.Err() == nil {
			sweeps.Add(1)
			n, err := pruner.PruneEvents(ctx, &store.PruneEventsParams{Before: cutoff, Limit: 5})
			if err != nil {
				failed.Add(1)
			} else if n == 0 {
				if left, err := count(ctx); err == nil && left == (oldRows{}) {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	sendGroupEvents(ctx, clients, events, func(n int) (string, any) {
		return fmt.Sprint("g-", n), map[string]int{"n": n, "k": n % 10}
	})
	sweep.Wait()
	// As in TestChaosTriggerGroups: kills for 5 s more, then no more.
	time.AfterFunc(5*time.Second, stopKiller)
	groups := waitGroupsEnded(ctx, t, reader, "g-", events)
	stopKiller()
	// An old group left would fail here too (its events are not g-n).
	checkChaosGroups(ctx, t, reader, groups, events, oldRuns)
	left, err := count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if left != (oldRows{}) {
		t.Errorf("after the sweep the old rows left are %+v, want none", left)
	}
	var lost int64
	for _, l := range lossy {
		lost += l.lost.Load()
	}
	t.Logf("%s: before the sweep %+v; sweeps %d (failed %d, answers lost %d); groups deb %d, thr %d, bat %d; lost %d, kill rounds %d",
		db.name, before, sweeps.Load(), failed.Load(), pruner.lost.Load(), len(groups["deb"]), len(groups["thr"]), len(groups["bat"]), lost, killRounds.Load())
	if pruner.lost.Load() == 0 || lost == 0 {
		t.Errorf("no fault happened")
	}
}

// oldRows counts what the old events left, table by table.
type oldRows struct{ events, firings, groups, groupEvents, windows int64 }

const oldRowsSQL = `SELECT (SELECT count(*) FROM sent_events WHERE id LIKE 'old-%'),
	(SELECT count(*) FROM event_firings WHERE event_id LIKE 'old-%'),
	(SELECT count(*) FROM trigger_groups WHERE key LIKE 'o%'),
	(SELECT count(*) FROM trigger_group_events WHERE event_id LIKE 'old-%'),
	(SELECT count(*) FROM trigger_windows WHERE key LIKE 'o%')`

// oldRowCounter returns a function that counts the old rows in db's
// tables (reader is a store open on db).
func oldRowCounter(t *testing.T, db chaosDB, reader store.Store) func(context.Context) (oldRows, error) {
	if db.dsn == "" {
		sdb := reader.(*sqlite.Store).DB()
		return func(ctx context.Context) (r oldRows, err error) {
			err = sdb.QueryRowContext(ctx, oldRowsSQL).Scan(&r.events, &r.firings, &r.groups, &r.groupEvents, &r.windows)
			return r, err
		}
	}
	conn, err := pgx.Connect(t.Context(), withDSNParam(db.dsn, "search_path", "heph"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var mu sync.Mutex // the sweep and the test share the connection
	return func(ctx context.Context) (r oldRows, err error) {
		mu.Lock()
		defer mu.Unlock()
		err = conn.QueryRow(ctx, oldRowsSQL).Scan(&r.events, &r.firings, &r.groups, &r.groupEvents, &r.windows)
		return r, err
	}
}
