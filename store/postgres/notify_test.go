package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// listener runs Listen on s and records the queues and runs it hears
// of.
type listener struct {
	mu    sync.Mutex
	heard []store.Notification
	ch    chan store.Notification
	done  chan error
}

func listen(t *testing.T, s *postgres.Store) *listener {
	t.Helper()
	l := &listener{ch: make(chan store.Notification, 1000), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		l.done <- s.Listen(ctx, func(n store.Notification) {
			if set := btoi(n.Queue != "") + btoi(n.RunID != "") + btoi(n.Resync); set != 1 {
				t.Errorf("notification %+v: want exactly one field set", n)
			}
			l.mu.Lock()
			l.heard = append(l.heard, n)
			l.mu.Unlock()
			l.ch <- n
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-l.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	})
	return l
}

// await commits ready tasks of queue in s until l hears of queue: the
// first commits may come before Listen is listening.
func (l *listener) await(t *testing.T, s store.Store, queue string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	n := 0
	for {
		n++
		create(t, s, newRun(fmt.Sprintf("%s-%d", queue, n), task(queue, time.Time{})))
		for {
			select {
			case n := <-l.ch:
				if n.Queue == queue {
					return
				}
				continue
			case <-tick.C:
			case <-deadline:
				t.Fatalf("no notification for queue %s", queue)
			}
			break
		}
	}
}

func (l *listener) count(queue string) int {
	return l.countOf(store.Notification{Queue: queue})
}

func (l *listener) countOf(want store.Notification) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, h := range l.heard {
		if h == want {
			n++
		}
	}
	return n
}

func TestNotifier(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := open(t, &postgres.Config{DSN: dsn})
	b := open(t, &postgres.Config{DSN: dsn})
	other := open(t, &postgres.Config{DSN: dsn, Schema: "other"})
	l := listen(t, b)
	l.await(t, a, "first")

	// Not notified: tasks ready later, tasks the committing Apply leased
	// itself, and commits of another schema. Notifications of one
	// session arrive in commit order: once "marker" arrives, any earlier
	// one has.
	create(t, a, newRun("later", task("later", now.Add(time.Hour))))
	apply(t, a, &store.ApplyParams{
		Changes: []store.Change{{Create: newRun("handoff", task("handoff", time.Time{}))}},
		Claims:  []store.ClaimParams{{Queues: []string{"handoff"}, Owner: "w", Limit: 1, LeaseFor: time.Minute}},
	})
	create(t, other, newRun("elsewhere", task("elsewhere", time.Time{})))
	// Notified once per queue and commit, whatever the number of tasks.
	create(t, a, newRun("many", task("many", time.Time{}), task("many", time.Time{}), task("marker", time.Time{})))
	l.await(t, a, "marker")
	for q, want := range map[string]int{"later": 0, "handoff": 0, "elsewhere": 0, "many": 1} {
		if got := l.count(q); got != want {
			t.Errorf("%d notifications for queue %s, want %d", got, q, want)
		}
	}
	// A refused change notifies nothing.
	dup := newRun("many", task("refused", time.Time{}))
	res := apply(t, a, &store.ApplyParams{Changes: []store.Change{{Create: dup}}})
	if res.Changes[0].Err == nil {
		t.Fatal("duplicate create applied")
	}
	l.await(t, a, "marker2")
	if n := l.count("refused"); n != 0 {
		t.Errorf("%d notifications for a refused change", n)
	}
}

// Listen survives the death of its connection and hears later commits.
func TestListenReconnects(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := open(t, &postgres.Config{DSN: dsn})
	b := open(t, &postgres.Config{DSN: dsn})
	admin := connect(t, dsn)
	l := listen(t, b)
	l.await(t, a, "before")
	for round := range 3 {
		var pid int
		err := admin.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'hephaestus-listen'`).Scan(&pid)
		if err != nil {
			t.Fatalf("round %d: find the listening session: %v", round, err)
		}
		var ok bool
		if err := admin.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
			t.Fatalf("round %d: terminate %d: %v, %v", round, pid, ok, err)
		}
		l.await(t, a, fmt.Sprint("after", round))
	}
	// Killing everything, the pool's sessions too, does no lasting harm.
	kill(t, admin)
	l.await(t, a, "after-all")
	// Each time it listened anew, it said so: what was notified while it
	// did not listen is lost, and the worker checks its leases.
	if n := l.countOf(store.Notification{Resync: true}); n < 5 {
		t.Errorf("%d resync notifications, want one per LISTEN (5)", n)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A commit whose cancellations delete leased tasks names their run on the
// cancel channel, once per run; one that deletes only unleased tasks, or
// a task it completes (its fence), does not.
func TestNotifyCancelledLeases(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := open(t, &postgres.Config{DSN: dsn})
	b := open(t, &postgres.Config{DSN: dsn})
	if a.CancelChannel() != "heph_lost" {
		t.Fatalf("cancel channel %q", a.CancelChannel())
	}
	l := listen(t, b)
	l.await(t, a, "first")

	create(t, a, newRun("leased", task("lq", now), task("lq", now)), newRun("unleased", task("uq", now)),
		newRun("done", task("dq", now)), newRun("other", task("oq", now)))
	claim(t, a, "lq", 2)
	doneLease := claim(t, a, "dq", 1)[0].Lease()
	otherTask := claim(t, a, "oq", 1)[0]
	cancelAll := func(*store.Run) (*store.Update, error) {
		return &store.Update{Status: hephtype.StatusCancelled, Cancel: []store.TaskMatch{{Index: -1}}}, nil
	}
	res := apply(t, a, &store.ApplyParams{Changes: []store.Change{
		{RunID: "leased", Decide: cancelAll},
		{RunID: "unleased", Decide: cancelAll},
		{RunID: "done", Fence: &doneLease, Decide: cancelAll}, // its leased task is its fence
	}})
	for i, r := range res.Changes {
		if r.Err != nil {
			t.Fatalf("change %d: %v", i, r.Err)
		}
	}
	// A released task is not leased.
	if err := a.ReleaseTasks(t.Context(), []store.Lease{otherTask.Lease()}); err != nil {
		t.Fatal(err)
	}
	apply(t, a, &store.ApplyParams{Changes: []store.Change{{RunID: "other", Decide: cancelAll}}})

	deadline := time.After(20 * time.Second)
	for l.countOf(store.Notification{RunID: "leased"}) == 0 {
		select {
		case <-l.ch:
		case <-deadline:
			t.Fatal("no notification for the run whose leased tasks were cancelled")
		}
	}
	// Notifications of one session arrive in commit order.
	l.await(t, a, "marker")
	for run, want := range map[string]int{"leased": 1, "unleased": 0, "done": 0, "other": 0} {
		if got := l.countOf(store.Notification{RunID: run}); got != want {
			t.Errorf("%d notifications for run %s, want %d", got, run, want)
		}
	}
}
