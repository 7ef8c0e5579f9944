package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// A change's entries are one row of the history table; History reads them
// back one by one, a page at a time, with the change's key on its first
// entry. Migration 0004 moves a history of one row per entry into rows per
// change and back, keeping every entry and key.
func TestHistoryRows(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	cfg := &postgres.Config{DSN: dsn, Schema: "hist"}
	s := open(t, cfg)
	ctx := t.Context()

	nr := newRun("r", task("q", now))
	nr.History = []store.NewEvent{
		{Kind: hephtype.EventRunStarted, Data: []byte(`{"input":{"name":"Zoë \"the\" <first>","n":[1,2.5,null]}}`)},
		{Kind: hephtype.EventStepScheduled, Step: "a", Index: -1, Attempt: 1},
	}
	create(t, s, nr)
	entries := []store.NewEvent{
		{Kind: hephtype.EventStepStarted, Step: "a", Index: -1, Attempt: 1, Data: []byte(`{"worker":"w\u00e9","claim":1}`)},
		{Kind: hephtype.EventStepFailed, Step: "a", Index: 3, Attempt: 2, Error: "line one\nline \"two\"\t\\ end"},
		{Kind: hephtype.EventMarker, Name: "json null", Data: []byte(`null`)},
	}
	keyed := store.Change{RunID: "r", Key: "signal:1", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{History: entries}, nil
	}}
	if res := apply(t, s, &store.ApplyParams{Changes: []store.Change{keyed}}); res.Changes[0].Err != nil {
		t.Fatalf("keyed change: %v", res.Changes[0].Err)
	}

	want := []store.Event{
		{RunID: "r", Seq: 1, Kind: hephtype.EventRunStarted, Data: nr.History[0].Data, At: now},
		{RunID: "r", Seq: 2, Kind: hephtype.EventStepScheduled, Step: "a", Index: -1, Attempt: 1, At: now},
		{RunID: "r", Seq: 3, Kind: hephtype.EventStepStarted, Step: "a", Index: -1, Attempt: 1, Data: entries[0].Data, Key: "signal:1", At: now},
		{RunID: "r", Seq: 4, Kind: hephtype.EventStepFailed, Step: "a", Index: 3, Attempt: 2, Error: entries[1].Error, At: now},
		{RunID: "r", Seq: 5, Kind: hephtype.EventMarker, Name: "json null", Data: []byte(`null`), At: now},
	}
	history := func(after int64, limit int) []store.Event {
		t.Helper()
		h, err := s.History(ctx, &store.HistoryParams{RunID: "r", AfterSeq: after, Limit: limit})
		if err != nil {
			t.Fatalf("History(after %d, limit %d): %v", after, limit, err)
		}
		return h
	}
	sameEvents(t, "history", history(0, 0), want)
	// Pages that start and end inside a change's row.
	sameEvents(t, "after 1, limit 3", history(1, 3), want[1:4])
	sameEvents(t, "after 3, limit 1", history(3, 1), want[3:4])
	sameEvents(t, "after 4", history(4, 0), want[4:])
	if h := history(5, 0); len(h) != 0 {
		t.Errorf("after 5: %+v, want nothing", h)
	}

	// Two rows: the create's and the keyed change's.
	var rows int
	if err := connect(t, dsn).QueryRow(ctx, "SELECT count(*) FROM hist.history").Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("history rows: %d, %v; want 2", rows, err)
	}
	s.Close()

	migrateTo := func(down bool) {
		t.Helper()
		err := postgres.WithMigrationLock(ctx, cfg, func(ctx context.Context, conn *sql.Conn) error {
			var err error
			if down {
				var v []int
				// Every later migration first, newest first, then the
				// history rows (0004).
				want := migrationsFrom(t, 4)
				v, err = migrate.Down(ctx, conn, postgres.Migrations(), migrate.Postgres, len(want))
				if err == nil && !slices.Equal(v, want) {
					t.Fatalf("reverted %v, want %v", v, want)
				}
			} else {
				_, err = migrate.Up(ctx, conn, postgres.Migrations(), migrate.Postgres)
			}
			return err
		})
		if err != nil {
			t.Fatalf("migrate (down %v): %v", down, err)
		}
	}
	// Down: one row per entry, the key on the change's first.
	migrateTo(true)
	var n, keyed3 int
	err := connect(t, dsn).QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE key = 'signal:1' AND seq = 3) FROM hist.events").Scan(&n, &keyed3)
	if err != nil || n != 5 || keyed3 != 1 {
		t.Fatalf("events after down: %d rows, %d keyed at 3, %v; want 5, 1", n, keyed3, err)
	}
	// Up again: rows of one entry each, read as before.
	migrateTo(false)
	s = open(t, cfg)
	sameEvents(t, "history after down and up", history(0, 0), want)
	sameEvents(t, "after 2, limit 2, after down and up", history(2, 2), want[2:4])
	res, err := s.Apply(ctx, &store.ApplyParams{Now: now, Changes: []store.Change{keyed}})
	if err != nil || !errors.Is(res.Changes[0].Err, store.ErrDuplicateChange) {
		t.Fatalf("keyed change again after down and up: %v, %v; want ErrDuplicateChange", res, err)
	}
}

// sameEvents compares histories, their data as JSON values.
func sameEvents(t *testing.T, what string, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d: %+v", what, len(got), len(want), got)
	}
	for i := range got {
		g, w := got[i], want[i]
		if !sameJSON(g.Data, w.Data) {
			t.Errorf("%s: entry %d data %s, want %s", what, i, g.Data, w.Data)
		}
		g.Data, w.Data = nil, nil
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s: entry %d\n got %+v\nwant %+v", what, i, g, w)
		}
	}
}

func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
