package sqlite

import (
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/store"
)

// A database made by the first migration is upgraded in place: its runs,
// history and tasks read as if they had been written with no handler, no
// details, no keys and no condition.
func TestUpgradeKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := Open(t.Context(), &Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{
		ID: "r", Workflow: "wf", Kind: hephtype.KindFlow, Status: hephtype.StatusRunning,
		History: []store.NewEvent{{Kind: hephtype.EventRunStarted}},
		Tasks:   []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: "a", Index: -1}},
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatal(err, res)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Back to the first migration.
	db, err := sql.Open("sqlite", "file:"+escapePath(path))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Down(t.Context(), db, Migrations(), migrate.SQLite, len(ms)-1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "SELECT handler FROM tasks"); err == nil {
		t.Fatal("tasks.handler survived the down migration")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, &Config{Path: path})
	r, err := s.GetRun(t.Context(), "r")
	if err != nil || !r.Condition.IsZero() {
		t.Fatalf("run after the upgrade: %+v, %v", r, err)
	}
	evs, err := s.History(t.Context(), &store.HistoryParams{RunID: "r"})
	if err != nil || len(evs) != 1 || evs[0].Key != "" {
		t.Fatalf("history after the upgrade: %+v, %v", evs, err)
	}
	// The old task has no handler: a worker with none takes it.
	ts, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Handlers: []string{},
		Owner: "w", Limit: 1, LeaseFor: time.Minute, Now: now})
	if err != nil || len(ts) != 1 || ts[0].Handler != "" || ts[0].Details != nil {
		t.Fatalf("claim after the upgrade: %+v, %v", ts, err)
	}
}

// The writer keeps runs in memory: a condition and the keys recorded by
// another connection must still count.
func TestConditionAndKeysAcrossConnections(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	a, b := open(t, &Config{Path: path}), open(t, &Config{Path: path})
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	apply := func(s *Store, c store.Change) store.ChangeResult {
		t.Helper()
		res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{c}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Changes[0]
	}
	update := func(s *Store, key string, u *store.Update) store.ChangeResult {
		t.Helper()
		return apply(s, store.Change{RunID: "r", Key: key, Decide: func(*store.Run) (*store.Update, error) { return u, nil }})
	}
	marker := []store.NewEvent{{Kind: hephtype.EventMarker}}

	if res := apply(a, store.Change{Create: &store.NewRun{ID: "r", Workflow: "wf"}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	// b reads the run into its cache.
	if res := update(b, "", &store.Update{}); res.Err != nil {
		t.Fatal(res.Err)
	}
	// a records a condition (with a Since finer than a microsecond) and a key.
	since := now.Add(-time.Hour + 1).In(time.FixedZone("x", 3600))
	res := update(a, "k1", &store.Update{History: marker, Condition: &store.Condition{Code: "unserved", Message: "no worker", Since: since}})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	want := store.Condition{Code: "unserved", Message: "no worker", Since: now.Add(-time.Hour)}
	if res.Run.Condition != want {
		t.Fatalf("condition in the result = %+v, want %+v", res.Run.Condition, want)
	}
	// b sees both, and keeps the condition when it does not name one.
	if res := update(b, "k1", &store.Update{History: marker}); !errors.Is(res.Err, store.ErrDuplicateChange) {
		t.Fatalf("b's change with a's key: %v", res.Err)
	}
	res = update(b, "k2", &store.Update{History: marker})
	if res.Err != nil || res.Run.Condition != want {
		t.Fatalf("b's change: %+v, %v", res.Run, res.Err)
	}
	for _, s := range []*Store{a, b} {
		if r, err := s.GetRun(t.Context(), "r"); err != nil || r.Condition != want {
			t.Fatalf("GetRun = %+v, %v", r, err)
		}
	}
	if res := update(a, "k2", &store.Update{History: marker}); !errors.Is(res.Err, store.ErrDuplicateChange) {
		t.Fatalf("a's change with b's key: %v", res.Err)
	}
	// Cleared by a, seen cleared by b.
	if res := update(a, "", &store.Update{Condition: &store.Condition{}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if res := update(b, "", &store.Update{}); res.Err != nil || !res.Run.Condition.IsZero() {
		t.Fatalf("condition after clearing: %+v, %v", res.Run, res.Err)
	}
}
