package postgres_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// A store decides a change against the run as it last wrote it, without
// reading it (one round trip). These tests make that guess wrong: another
// store, as another process would, changes the run or takes the task in
// between. The change must then be decided against the run as stored, and
// a lost lease must be refused, as if nothing had been guessed.
func TestGuessesCheckedUnderLocks(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := open(t, &postgres.Config{DSN: dsn}), open(t, &postgres.Config{DSN: dsn})
	step := store.NewTask{Queue: "q", Kind: store.TaskStep, Step: "a", Index: -1}
	res := apply(t, a, &store.ApplyParams{Now: now, Changes: []store.Change{
		{Create: newRun("r1", step)}, {Create: newRun("r2", step)}}})
	for _, r := range res.Changes {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	ts := claim(t, a, "q", 2)
	lease := map[string]store.Lease{}
	for _, tk := range ts {
		lease[tk.RunID] = tk.Lease()
	}

	// r1: b appends an entry (a signal, say) after a wrote the run.
	signal := func(*store.Run) (*store.Update, error) {
		return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: "signal"}}}, nil
	}
	res = apply(t, b, &store.ApplyParams{Now: now, Changes: []store.Change{{RunID: "r1", Key: "s1", Decide: signal}}})
	if err := res.Changes[0].Err; err != nil {
		t.Fatal(err)
	}
	var saw int64 = -1
	l := lease["r1"]
	res = apply(t, a, &store.ApplyParams{Now: now, Changes: []store.Change{{RunID: "r1", Fence: &l,
		Decide: func(r *store.Run) (*store.Update, error) {
			saw = r.Seq
			return &store.Update{Status: hephtype.StatusCompleted, History: []store.NewEvent{{Kind: hephtype.EventStepCompleted, Step: "a"}}}, nil
		}}}})
	if err := res.Changes[0].Err; err != nil {
		t.Fatalf("completion after another store's change: %v", err)
	}
	if saw != 1 || res.Changes[0].Run.Seq != 2 {
		t.Fatalf("Decide saw seq %d (want 1: the run as b left it), the result has seq %d (want 2)", saw, res.Changes[0].Run.Seq)
	}
	evs, err := a.History(t.Context(), &store.HistoryParams{RunID: "r1"})
	if err != nil || len(evs) != 2 || evs[0].Name != "signal" || evs[1].Kind != hephtype.EventStepCompleted {
		t.Fatalf("history of r1: %+v, %v", evs, err)
	}

	// r2: the lease expires and b takes the task; a, which still knows
	// its old lease, must find it lost.
	later := now.Add(2 * time.Minute)
	taken, err := b.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "b", Limit: 1, LeaseFor: time.Minute, Now: later})
	if err != nil || len(taken) != 1 || taken[0].RunID != "r2" {
		t.Fatalf("b's claim: %v, %v", taken, err)
	}
	l = lease["r2"]
	res = apply(t, a, &store.ApplyParams{Now: later, Changes: []store.Change{{RunID: "r2", Fence: &l, Decide: signal}}})
	if err := res.Changes[0].Err; !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("completion under a lease taken by another store: %v, want ErrLeaseLost", err)
	}
	// b, which knows nothing of r2, completes it; then a, which still
	// knows r2 as it created it, signals it.
	l = taken[0].Lease()
	res = apply(t, b, &store.ApplyParams{Now: later, Changes: []store.Change{{RunID: "r2", Fence: &l, Decide: signal}}})
	if err := res.Changes[0].Err; err != nil {
		t.Fatal(err)
	}
	res = apply(t, a, &store.ApplyParams{Now: later, Changes: []store.Change{{RunID: "r2", Key: "s2", Decide: signal}}})
	if r := res.Changes[0]; r.Err != nil || r.Run.Seq != 2 {
		t.Fatalf("signal to r2 known stale: %+v (want seq 2)", r)
	}
	// The same key again, through the store that just recorded it (so the
	// run is as it knows it): refused by its key.
	res = apply(t, a, &store.ApplyParams{Now: later, Changes: []store.Change{{RunID: "r2", Key: "s2", Decide: signal}}})
	if err := res.Changes[0].Err; !errors.Is(err, store.ErrDuplicateChange) {
		t.Fatalf("the same key twice: %v, want ErrDuplicateChange", err)
	}
	evs, err = b.History(t.Context(), &store.HistoryParams{RunID: "r2"})
	if err != nil || len(evs) != 2 {
		t.Fatalf("history of r2: %+v, %v", evs, err)
	}
}

// A guessed create whose business id another store's run holds is
// refused with the holder's id, as one that was not guessed.
func TestGuessedCreateConflict(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := open(t, &postgres.Config{DSN: dsn}), open(t, &postgres.Config{DSN: dsn})
	held := newRun("held")
	held.BusinessID = "order-1"
	if r := create(t, b, held)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	again := newRun("again")
	again.BusinessID = "order-1"
	free := newRun("free")
	res := apply(t, a, &store.ApplyParams{Now: now, Changes: []store.Change{{Create: again}, {Create: free}}})
	var dup *store.DuplicateRunError
	if err := res.Changes[0].Err; !errors.As(err, &dup) || dup.ExistingRunID != "held" {
		t.Fatalf("create of a held business id: %v, want a DuplicateRunError naming held", err)
	}
	if err := res.Changes[1].Err; err != nil {
		t.Fatalf("the other create of the batch: %v", err)
	}
	if _, err := a.GetRun(t.Context(), "free"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetRun(t.Context(), "again"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("GetRun(again): %v, want ErrRunNotFound", err)
	}
}

// The store vacuums its task table once it deleted VacuumTasksEvery tasks,
// autovacuum or not.
func TestTasksVacuumed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := open(t, &postgres.Config{DSN: dsn, VacuumTasksEvery: 10})
	admin := connect(t, dsn)
	vacuums := func() int64 {
		var n int64
		if err := admin.QueryRow(t.Context(), "SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = 'heph' AND relname = 'tasks'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := vacuums(); n != 0 {
		t.Fatalf("tasks vacuumed %d times before any was deleted", n)
	}
	step := store.NewTask{Queue: "q", Kind: store.TaskStep, Step: "a", Index: -1}
	for round := range 2 {
		var runs []*store.NewRun
		for i := range 6 {
			runs = append(runs, newRun(fmt.Sprintf("r%d-%d", round, i), step))
		}
		create(t, s, runs...)
		for _, tk := range claim(t, s, "q", 6) {
			l := tk.Lease()
			res := apply(t, s, &store.ApplyParams{Changes: []store.Change{{RunID: tk.RunID, Fence: &l,
				Decide: func(*store.Run) (*store.Update, error) { return &store.Update{Status: hephtype.StatusCompleted}, nil }}}})
			if err := res.Changes[0].Err; err != nil {
				t.Fatal(err)
			}
		}
		if round == 0 {
			time.Sleep(100 * time.Millisecond) // a VACUUM started now would be seen below
			if n := vacuums(); n != 0 {
				t.Fatalf("tasks vacuumed %d times after 6 deletions, want none before 10", n)
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for vacuums() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the task table was not vacuumed within a minute of the 10th deletion")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
