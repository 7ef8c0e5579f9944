package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open opens a store and closes it when the test ends.
func open(t testing.TB, cfg *postgres.Config) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// connect opens a plain connection, closed when the test ends.
func connect(t testing.TB, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

var now = time.Date(2031, 3, 4, 5, 6, 7, 123456000, time.UTC)

func newRun(id string, tasks ...store.NewTask) *store.NewRun {
	return &store.NewRun{ID: id, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow,
		Status: hephtype.StatusRunning, Tasks: tasks}
}

func task(queue string, readyAt time.Time) store.NewTask {
	return store.NewTask{Queue: queue, Kind: store.TaskStep, Step: "a", Index: -1, Attempt: 1, ReadyAt: readyAt}
}

func apply(t testing.TB, s store.Store, p *store.ApplyParams) *store.ApplyResult {
	t.Helper()
	if p.Now.IsZero() {
		p.Now = now
	}
	res, err := s.Apply(context.Background(), p)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

func create(t testing.TB, s store.Store, runs ...*store.NewRun) []store.ChangeResult {
	t.Helper()
	var cs []store.Change
	for _, r := range runs {
		cs = append(cs, store.Change{Create: r})
	}
	res := apply(t, s, &store.ApplyParams{Changes: cs})
	for i, r := range res.Changes {
		if r.Err != nil {
			t.Fatalf("create %s: %v", runs[i].ID, r.Err)
		}
	}
	return res.Changes
}

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	storetest.RunAdmin(t, func(t *testing.T) store.Admin {
		return open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	}, storetest.WithTx(beginTx))
}

// beginTx opens a transaction of the application's on the store's pool.
func beginTx(t *testing.T, s store.Store) *storetest.Tx {
	ctx := context.WithoutCancel(t.Context())
	tx, err := s.(*postgres.Store).Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return &storetest.Tx{
		Tx:       tx,
		Exec:     func(q string) error { _, err := tx.Exec(ctx, q); return err },
		Commit:   func() error { return tx.Commit(ctx) },
		Rollback: func() error { return tx.Rollback(ctx) },
		Rows: func(table string) (n int, err error) {
			q := "SELECT count(*) FROM " + pgx.Identifier{s.(*postgres.Store).Schema(), table}.Sanitize()
			return n, tx.QueryRow(ctx, q).Scan(&n)
		},
	}
}

// A second schema in the same database is a store of its own.
func TestConformanceCustomSchema(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		dsn := pgschema.DSN(t, "other_one")
		open(t, &postgres.Config{DSN: dsn}) // a neighbour in "heph"
		return open(t, &postgres.Config{DSN: dsn, Schema: "other_one"})
	}, storetest.WithTx(beginTx))
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 58)
	for _, tc := range []struct {
		cfg   *postgres.Config
		field string
	}{
		{nil, "Config.DSN"},
		{&postgres.Config{}, "Config.DSN"},
		{&postgres.Config{DSN: "postgres://u:sekrit@h:notaport/db"}, "Config.DSN"},
		{&postgres.Config{DSN: "host=x", Schema: "Heph"}, "Config.Schema"},
		{&postgres.Config{DSN: "host=x", Schema: "1heph"}, "Config.Schema"},
		{&postgres.Config{DSN: "host=x", Schema: "a-b"}, "Config.Schema"},
		{&postgres.Config{DSN: "host=x", Schema: `a"; DROP TABLE x; --`}, "Config.Schema"},
		{&postgres.Config{DSN: "host=x", Schema: "pg_heph"}, "Config.Schema"},
		{&postgres.Config{DSN: "host=x", Schema: long}, "Config.Schema"},
		{&postgres.Config{DSN: "host=x", MaxConns: -1}, "Config.MaxConns"},
		{&postgres.Config{DSN: "host=x", Timeout: -time.Second}, "Config.Timeout"},
		{&postgres.Config{DSN: "host=x", ConnectTimeout: -time.Second}, "Config.ConnectTimeout"},
		{&postgres.Config{DSN: "host=x", VacuumTasksEvery: -2}, "Config.VacuumTasksEvery"},
	} {
		s, err := postgres.Open(t.Context(), tc.cfg)
		if err == nil {
			s.Close()
			t.Errorf("Open(%+v): no error", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Open(%+v): error %q does not name %s", tc.cfg, err, tc.field)
		}
		if strings.Contains(err.Error(), "sekrit") {
			t.Errorf("Open: error %q shows the password", err)
		}
	}
	// A schema of 57 bytes is fine (its channel has 63).
	_, err := postgres.Open(t.Context(), &postgres.Config{DSN: "postgres://u@127.0.0.1:1/db", Schema: long[:57]})
	if err == nil || strings.Contains(err.Error(), "Config.Schema") {
		t.Errorf("57-byte schema: %v, want a connection error", err)
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := postgres.Open(t.Context(), &postgres.Config{DSN: "postgres://postgres@127.0.0.1:1/x?sslmode=disable", ConnectTimeout: 2 * time.Second})
	if err == nil {
		t.Fatal("Open of a closed port: no error")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Open took %v to fail", d)
	}
}

// tables lists the tables of the test database by schema.
func tables(t *testing.T, conn *pgx.Conn) map[string][]string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for rows.Next() {
		var schema, name string
		if err := rows.Scan(&schema, &name); err != nil {
			t.Fatal(err)
		}
		out[schema] = append(out[schema], name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSchemaHonoured(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := open(t, &postgres.Config{DSN: dsn, Schema: "tenant_a"})
	b := open(t, &postgres.Config{DSN: dsn, Schema: "tenant_b"})
	if a.Schema() != "tenant_a" || a.Channel() != "tenant_a_tasks" || b.Channel() != "tenant_b_tasks" ||
		a.CancelChannel() != "tenant_a_lost" || b.CancelChannel() != "tenant_b_lost" {
		t.Fatalf("schema %q, channels %q, %q, %q and %q", a.Schema(), a.Channel(), b.Channel(), a.CancelChannel(), b.CancelChannel())
	}
	create(t, a, newRun("only-in-a", task("q", now)))
	if _, err := b.GetRun(t.Context(), "only-in-a"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("GetRun in the other schema: %v", err)
	}
	if ts, err := b.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 9, LeaseFor: time.Minute, Now: now}); err != nil || len(ts) != 0 {
		t.Fatalf("claim in the other schema: %v, %v", ts, err)
	}
	got := tables(t, connect(t, dsn))
	want := []string{"api_tokens", "audit_log", "definition_versions", "definitions", "documents", "event_firings", "event_waits", "history", migrate.Table, "operations", "principals", "queue_keys", "queue_leases", "queues", "remote_claims", "requests", "retired_builds", "run_attributes", "runs", "schedule_ticks", "schedules", "secrets", "sent_events", "sessions", "step_logs", "tasks", "trigger_group_events", "trigger_groups", "trigger_windows", "triggers", "version_generation", "version_rules", "webhook_attempts", "webhook_deliveries", "webhook_events", "webhooks", "workers"}
	slices.Sort(want)
	for _, schema := range []string{"tenant_a", "tenant_b"} {
		if !slices.Equal(got[schema], want) {
			t.Errorf("tables in %s: %v, want %v", schema, got[schema], want)
		}
	}
	if len(got) != 2 {
		t.Errorf("tables outside the two schemas: %v", got)
	}
}

// Processes that start together on a fresh database all open it: the
// advisory lock takes them through the migrations one at a time.
func TestConcurrentMigrations(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	const n = 4
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(t.Context(), &postgres.Config{DSN: dsn}) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		defer stores[i].Close()
		create(t, stores[i], newRun(fmt.Sprint("r", i)))
	}
	var versions []int
	rows, err := connect(t, dsn).Query(t.Context(), "SELECT version FROM heph."+migrate.Table+" ORDER BY version")
	if err == nil {
		versions, err = pgx.CollectRows(rows, pgx.RowTo[int])
	}
	want := migrationsFrom(t, 1)
	slices.Reverse(want)
	if err != nil || !slices.Equal(versions, want) {
		t.Fatalf("applied versions %v, %v; want %v", versions, err, want)
	}
}

func status(t *testing.T, cfg *postgres.Config) []migrate.State {
	t.Helper()
	var st []migrate.State
	err := postgres.WithMigrationLock(t.Context(), cfg, func(ctx context.Context, conn *sql.Conn) (err error) {
		st, err = migrate.Status(ctx, conn, postgres.Migrations(), migrate.Postgres)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestMigrationsUpDownStatus(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	cfg := &postgres.Config{DSN: dsn, Schema: "mig"}
	ms, err := migrate.Load(postgres.Migrations())
	if err != nil || len(ms) == 0 {
		t.Fatalf("Load: %v, %v", ms, err)
	}
	last := ms[len(ms)-1].Version

	// Without migrations, a store that must not migrate refuses to open.
	skip := &postgres.Config{DSN: dsn, Schema: "mig", SkipMigrations: true}
	if _, err := postgres.Open(t.Context(), skip); err == nil || !strings.Contains(err.Error(), "heph migrate up") {
		t.Fatalf("Open with SkipMigrations on an empty database: %v", err)
	}
	for _, s := range status(t, cfg) {
		if s.Applied {
			t.Fatalf("status before up: %+v", s)
		}
	}
	var applied []int
	err = postgres.WithMigrationLock(t.Context(), cfg, func(ctx context.Context, conn *sql.Conn) (err error) {
		applied, err = migrate.Up(ctx, conn, postgres.Migrations(), migrate.Postgres)
		return err
	})
	if err != nil || len(applied) != len(ms) {
		t.Fatalf("up: %v, %v", applied, err)
	}
	for _, s := range status(t, cfg) {
		if !s.Applied || s.AppliedAt.IsZero() || s.Unknown {
			t.Fatalf("status after up: %+v", s)
		}
	}
	s := open(t, skip)
	create(t, s, newRun("r"))
	s.Close()

	var reverted []int
	err = postgres.WithMigrationLock(t.Context(), cfg, func(ctx context.Context, conn *sql.Conn) (err error) {
		reverted, err = migrate.Down(ctx, conn, postgres.Migrations(), migrate.Postgres, 1)
		return err
	})
	if err != nil || !slices.Equal(reverted, []int{last}) {
		t.Fatalf("down: %v, %v", reverted, err)
	}
	if st := status(t, cfg); st[len(st)-1].Applied {
		t.Fatalf("status after down: %+v", st)
	}
	// The others too, newest first.
	err = postgres.WithMigrationLock(t.Context(), cfg, func(ctx context.Context, conn *sql.Conn) (err error) {
		reverted, err = migrate.Down(ctx, conn, postgres.Migrations(), migrate.Postgres, len(ms)-1)
		return err
	})
	if err != nil || len(reverted) != len(ms)-1 {
		t.Fatalf("down the rest: %v, %v", reverted, err)
	}
	if got := tables(t, connect(t, dsn))["mig"]; !slices.Equal(got, []string{migrate.Table}) {
		t.Fatalf("tables after down: %v", got)
	}
	if _, err := postgres.Open(t.Context(), skip); err == nil {
		t.Fatal("Open with SkipMigrations after down: no error")
	}
	// Open migrates again.
	s = open(t, cfg)
	if _, err := s.GetRun(t.Context(), "r"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("GetRun after down and up: %v", err)
	}
}

// TestTraceContextMigration: a database from before trace contexts
// (migrations 14, 12 and 11 reverted) migrates when opened: its runs and tasks read
// back with none, and new runs store theirs.
func TestTraceContextMigration(t *testing.T) {
	t.Parallel()
	const tc = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	cfg := &postgres.Config{DSN: pgtest.DSN(t), Schema: "trace"}
	mk := func(id string) *store.NewRun {
		r := newRun(id, store.NewTask{Queue: "q", Kind: store.TaskTimer, Step: id, Index: -1, ReadyAt: now})
		r.TraceContext = tc
		return r
	}
	s, err := postgres.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, mk("old"))
	s.Close()
	var reverted []int
	err = postgres.WithMigrationLock(t.Context(), cfg, func(ctx context.Context, conn *sql.Conn) (err error) {
		reverted, err = migrate.Down(ctx, conn, postgres.Migrations(), migrate.Postgres, len(migrationsFrom(t, 11)))
		return err
	})
	if want := migrationsFrom(t, 11); err != nil || !slices.Equal(reverted, want) {
		t.Fatalf("down: %v, %v; want %v", reverted, err, want)
	}

	s = open(t, cfg)
	create(t, s, mk("new"))
	want := map[string]string{"old": "", "new": tc}
	for id, want := range want {
		if r, err := s.GetRun(t.Context(), id); err != nil || r.TraceContext != want {
			t.Errorf("run %s after the migration: %+v, %v; want trace context %q", id, r, err, want)
		}
	}
	for _, tk := range claim(t, s, "q", 2) {
		if tk.TraceContext != want[tk.RunID] {
			t.Errorf("task of run %s after the migration: trace context %q, want %q", tk.RunID, tk.TraceContext, want[tk.RunID])
		}
	}
}

// TestTaskRunAttrsMigration: a database from before tasks copied their
// run's tags and metadata (migrations 14 and 12 reverted) migrates when opened: the
// tasks waiting get those of their runs, and new tasks copy them.
func TestTaskRunAttrsMigration(t *testing.T) {
	t.Parallel()
	cfg := &postgres.Config{DSN: pgtest.DSN(t), Schema: "attrs"}
	tags, meta := []string{"blue", `a "quoted", {braced} tag`}, map[string]json.RawMessage{"tenant": json.RawMessage(`"acme"`), "n": json.RawMessage(`42`)}
	mk := func(id string, tagged bool) *store.NewRun {
		r := newRun(id, task("q", now))
		if tagged {
			r.Tags, r.Metadata = tags, meta
		}
		return r
	}
	s, err := postgres.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, mk("old", true), mk("old-plain", false))
	s.Close()
	var reverted []int
	err = postgres.WithMigrationLock(t.Context(), cfg, func(ctx context.Context, conn *sql.Conn) (err error) {
		reverted, err = migrate.Down(ctx, conn, postgres.Migrations(), migrate.Postgres, len(migrationsFrom(t, 12)))
		return err
	})
	if want := migrationsFrom(t, 12); err != nil || !slices.Equal(reverted, want) {
		t.Fatalf("down: %v, %v; want %v", reverted, err, want)
	}

	s = open(t, cfg)
	create(t, s, mk("new", true), mk("new-plain", false))
	for _, tk := range claim(t, s, "q", 4) {
		if strings.HasSuffix(tk.RunID, "-plain") {
			if tk.Tags != nil || tk.Metadata != nil {
				t.Errorf("task of run %s after the migration: tags %q, metadata %s; want none", tk.RunID, tk.Tags, tk.Metadata)
			}
		} else if !slices.Equal(tk.Tags, tags) || len(tk.Metadata) != 2 || string(tk.Metadata["n"]) != "42" {
			t.Errorf("task of run %s after the migration: tags %q, metadata %s; want %q, %s", tk.RunID, tk.Tags, tk.Metadata, tags, meta)
		}
	}
}

// A change whose statement fails (jsonb refuses the JSON) is refused
// alone; the others in the batch apply.
func TestFailingChangeRefusedAlone(t *testing.T) {
	t.Parallel()
	s := open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	create(t, s, newRun("u1", task("q", now)), newRun("u2"))
	lease := claim(t, s, "q", 1)[0].Lease()
	bad := newRun("bad")
	bad.Input = []byte(`{"not json`)
	nul := newRun("nul")
	nul.Input = []byte(`{"s":"\u0000"}`) // valid JSON, refused by jsonb
	mark := func(name string) func(*store.Run) (*store.Update, error) {
		return func(*store.Run) (*store.Update, error) {
			return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: name}}}, nil
		}
	}
	res := apply(t, s, &store.ApplyParams{
		Changes: []store.Change{
			{Create: newRun("before", task("q2", now))},
			{RunID: "u1", Fence: &lease, Decide: mark("done")},
			{Create: bad},
			{RunID: "u2", Decide: func(*store.Run) (*store.Update, error) {
				return &store.Update{Output: []byte(`[oops`)}, nil
			}},
			{Create: nul},
			{RunID: "u2", Decide: func(*store.Run) (*store.Update, error) {
				return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: "bad", Data: []byte(`{"x":`)}}}, nil
			}},
			{RunID: "u2", Decide: mark("after")},
			{Create: newRun("after")},
		},
		Claims: []store.ClaimParams{{Queues: []string{"q2"}, Owner: "w", Limit: 5, LeaseFor: time.Minute}},
	})
	for i, wantErr := range []bool{false, false, true, true, true, true, false, false} {
		if got := res.Changes[i].Err != nil; got != wantErr {
			t.Errorf("change %d: error %v, want an error: %v", i, res.Changes[i].Err, wantErr)
		}
	}
	if err := res.Changes[2].Err; err == nil || !strings.Contains(err.Error(), "create run bad") {
		t.Errorf("refused create: %v", err)
	}
	if err := res.Changes[5].Err; err == nil || !strings.Contains(err.Error(), "update run u2: history entry") {
		t.Errorf("refused history entry: %v", err)
	}
	for _, id := range []string{"before", "after"} {
		if _, err := s.GetRun(t.Context(), id); err != nil {
			t.Errorf("GetRun(%s): %v", id, err)
		}
	}
	for _, id := range []string{"bad", "nul"} {
		if _, err := s.GetRun(t.Context(), id); !errors.Is(err, store.ErrRunNotFound) {
			t.Errorf("GetRun(%s): %v", id, err)
		}
	}
	if r, err := s.GetRun(t.Context(), "u2"); err != nil || r.Seq != 1 || r.Output != nil {
		t.Errorf("u2 = %+v, %v; want one marker and no output", r, err)
	}
	if r, err := s.GetRun(t.Context(), "u1"); err != nil || r.Seq != 1 {
		t.Errorf("u1 = %+v, %v", r, err)
	}
	if len(res.Claimed[0]) != 1 || res.Claimed[0][0].RunID != "before" {
		t.Errorf("claimed %+v", res.Claimed[0])
	}
}

// The same with updates only, whose batch commits with its writes.
func TestFailingUpdateRefusedAlone(t *testing.T) {
	t.Parallel()
	s := open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	create(t, s, newRun("a", task("q", now)), newRun("b"), newRun("c"))
	lease := claim(t, s, "q", 1)[0].Lease()
	output := func(out string) func(*store.Run) (*store.Update, error) {
		return func(*store.Run) (*store.Update, error) {
			return &store.Update{Output: []byte(out), History: []store.NewEvent{{Kind: hephtype.EventMarker}},
				Tasks: []store.NewTask{task("q2", now)}}, nil
		}
	}
	res := apply(t, s, &store.ApplyParams{
		Changes: []store.Change{
			{RunID: "a", Fence: &lease, Decide: output(`1`)},
			{RunID: "b", Decide: output(`[oops`)},
			{RunID: "c", Decide: output(`3`)},
		},
		Claims: []store.ClaimParams{{Queues: []string{"q2"}, Owner: "w", Limit: 5, LeaseFor: time.Minute}},
	})
	for i, wantErr := range []bool{false, true, false} {
		if got := res.Changes[i].Err != nil; got != wantErr {
			t.Errorf("change %d: error %v, want an error: %v", i, res.Changes[i].Err, wantErr)
		}
	}
	for id, seq := range map[string]int64{"a": 1, "b": 0, "c": 1} {
		if r, err := s.GetRun(t.Context(), id); err != nil || r.Seq != seq {
			t.Errorf("%s = %+v, %v; want seq %d", id, r, err, seq)
		}
	}
	if len(res.Claimed[0]) != 2 {
		t.Errorf("claimed %+v, want the tasks of a and c", res.Claimed[0])
	}
}

func claim(t testing.TB, s store.Store, queue string, n int) []*store.Task {
	t.Helper()
	ts, err := s.ClaimTasks(context.Background(), &store.ClaimParams{Queues: []string{queue}, Owner: "w", Limit: n, LeaseFor: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != n {
		t.Fatalf("claimed %d tasks of %s, want %d", len(ts), queue, n)
	}
	return ts
}

// Changes of one batch that depend on a run created in the same batch see
// the outcome of that creation.
func TestCreateThenUpdateInBatch(t *testing.T) {
	t.Parallel()
	s := open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	held := newRun("holder")
	held.BusinessID = "k::1"
	create(t, s, held)
	dup := newRun("dup")
	dup.BusinessID = "k::1"
	seen := map[string]int64{}
	mark := func(run *store.Run) (*store.Update, error) {
		seen[run.ID] = run.Seq
		return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker}}}, nil
	}
	res := apply(t, s, &store.ApplyParams{Changes: []store.Change{
		{Create: newRun("fresh")},
		{RunID: "fresh", Decide: mark},
		{Create: dup},                   // refused: k::1 is held
		{RunID: "dup", Decide: mark},    // so dup does not exist
		{Create: newRun("holder")},      // the id exists
		{RunID: "holder", Decide: mark}, // and is updated
		{Create: newRun("fresh")},       // created above
	}})
	errs := make([]error, len(res.Changes))
	for i, r := range res.Changes {
		errs[i] = r.Err
	}
	if errs[0] != nil || errs[1] != nil || errs[5] != nil {
		t.Fatalf("errors %v", errs)
	}
	var de *store.DuplicateRunError
	if !errors.As(errs[2], &de) || de.ExistingRunID != "holder" {
		t.Fatalf("duplicate: %v", errs[2])
	}
	if !errors.Is(errs[3], store.ErrRunNotFound) || errs[4] == nil || errs[6] == nil {
		t.Fatalf("errors %v", errs)
	}
	if seen["fresh"] != 0 || seen["holder"] != 0 || len(seen) != 2 {
		t.Fatalf("Decide saw %v", seen)
	}
	if r, err := s.GetRun(t.Context(), "fresh"); err != nil || r.Seq != 1 {
		t.Fatalf("fresh = %+v, %v", r, err)
	}
}

// Times keep their microseconds and compare as instants whatever the
// location they were given in.
func TestTimes(t *testing.T) {
	t.Parallel()
	s := open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	paris := time.FixedZone("CET", 3600)
	at := time.Date(2031, 3, 4, 6, 6, 7, 123456789, paris) // 05:06:07.123456789 UTC
	res := apply(t, s, &store.ApplyParams{Now: at, Changes: []store.Change{{Create: newRun("t", task("q", at.Add(time.Nanosecond)))}}})
	r, err := s.GetRun(t.Context(), "t")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2031, 3, 4, 5, 6, 7, 123456000, time.UTC)
	if !r.CreatedAt.Equal(want) || r.CreatedAt.Location() != time.UTC || !res.Changes[0].Run.CreatedAt.Equal(want) {
		t.Fatalf("created at %v (result %v), want %v", r.CreatedAt, res.Changes[0].Run.CreatedAt, want)
	}
	// Claimable exactly at its ready time, not a microsecond before.
	if ts, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 1, LeaseFor: time.Second, Now: want.Add(-time.Microsecond)}); err != nil || len(ts) != 0 {
		t.Fatalf("claim before ready: %v, %v", ts, err)
	}
	ts, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 1, LeaseFor: 1500 * time.Microsecond, Now: want})
	if err != nil || len(ts) != 1 || !ts[0].ReadyAt.Equal(want) || !ts[0].LeaseUntil.Equal(want.Add(1500*time.Microsecond)) {
		t.Fatalf("claim at ready: %+v, %v", ts, err)
	}
}

// Calls fail rather than hang when the store's connections are killed,
// and the store recovers by itself.
func TestConnectionsKilled(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := open(t, &postgres.Config{DSN: dsn, MaxConns: 4})
	admin := connect(t, dsn)
	create(t, s, newRun("r", task("q", now)))
	for round := range 5 {
		kill(t, admin)
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := s.GetRun(t.Context(), "r")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: GetRun still fails: %v", round, err)
			}
		}
		res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{RunID: "r", Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker}}}, nil
		}}}})
		if err != nil || res.Changes[0].Err != nil {
			t.Fatalf("round %d: Apply after recovery: %v, %+v", round, err, res)
		}
	}
}

// kill ends every session of the test database but the caller's.
func kill(t testing.TB, admin *pgx.Conn) int {
	t.Helper()
	var n int
	err := admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCloseStopsListen(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open(t.Context(), &postgres.Config{DSN: pgtest.DSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Listen(context.Background(), func(store.Notification) {}) }()
	s.Close()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrClosed) {
			t.Fatalf("Listen after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Listen still runs after Close")
	}
	if err := s.Listen(context.Background(), func(store.Notification) {}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Listen on a closed store: %v", err)
	}
}

// A transaction that takes business keys in the opposite order of an
// Apply deadlocks with it; PostgreSQL breaks the deadlock by failing the
// Apply's transaction (it waited first), and Apply runs it again: the
// caller sees no store error, and learns who holds the keys.
func TestDeadlockRetried(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	// The Apply's session looks for deadlocks after waiting 3 s, the
	// other's after a minute: whatever the load, the Apply finds this one.
	s := open(t, &postgres.Config{DSN: dsn + "&options=-c%20deadlock_timeout%3D3s"})
	ctx := t.Context()
	other := connect(t, dsn)
	if _, err := other.Exec(ctx, "SET deadlock_timeout = '60s'"); err != nil {
		t.Fatal(err)
	}
	watcher := connect(t, dsn)
	insert := func(tx pgx.Tx, id, key string) error {
		_, err := tx.Exec(ctx, `INSERT INTO heph.runs (id, workflow, version, kind, status, business_id, key_scope, unique_key, created_at, updated_at)
			VALUES ($1, 'wf', 1, 'flow', 'running', $2, 'active', 'wf' || chr(31) || $2, now(), now())`, id, key)
		return err
	}
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit, a no-op
	if err := insert(tx, "other-2", "k::2"); err != nil {
		t.Fatal(err)
	}
	// The Apply takes k::1, then waits for k::2.
	type outcome struct {
		res *store.ApplyResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		mk := func(id, key string) store.Change {
			r := newRun(id)
			r.BusinessID = key
			return store.Change{Create: r}
		}
		res, err := s.Apply(context.Background(), &store.ApplyParams{Now: now, Changes: []store.Change{mk("mine-1", "k::1"), mk("mine-2", "k::2")}})
		done <- outcome{res, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = 'hephaestus'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Apply never waited for k::2")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Now the other transaction wants k::1: a deadlock, which fails the
	// Apply's transaction; this one then gets k::1 and commits.
	if err := insert(tx, "other-1", "k::1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("Apply: %v", o.err)
	}
	for i, want := range []string{"other-1", "other-2"} {
		var de *store.DuplicateRunError
		if err := o.res.Changes[i].Err; !errors.As(err, &de) || de.ExistingRunID != want {
			t.Errorf("change %d: %v, want a duplicate held by %s", i, err, want)
		}
	}
}

// The writes of a batch go to the database as a few set-based statements
// per segment; the outcome is still that of the changes applied one after
// the other.
func TestBatchKeepsChangeOrder(t *testing.T) {
	t.Parallel()
	s := open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	holder := newRun("holder")
	holder.BusinessID = "k::1"
	create(t, s, holder, newRun("r", task("q", now)), newRun("other", task("q", now)))
	lease := claim(t, s, "q", 2)
	var rLease, otherLease store.Lease
	for _, tk := range lease {
		if tk.RunID == "r" {
			rLease = tk.Lease()
		} else {
			otherLease = tk.Lease()
		}
	}
	enqueue := func(step string) func(*store.Run) (*store.Update, error) {
		return func(*store.Run) (*store.Update, error) {
			return &store.Update{Tasks: []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: step, Index: -1}},
				History: []store.NewEvent{{Kind: hephtype.EventStepScheduled, Step: step}}}, nil
		}
	}
	cancelAll := func(*store.Run) (*store.Update, error) {
		return &store.Update{Cancel: []store.TaskMatch{{Index: -1}}, Tasks: []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: "kept", Index: -1}}}, nil
	}
	finish := func(*store.Run) (*store.Update, error) {
		return &store.Update{Status: hephtype.StatusCompleted, History: []store.NewEvent{{Kind: hephtype.EventRunCompleted}}}, nil
	}
	dup := newRun("dup")
	dup.BusinessID = "k::1"
	again := newRun("again")
	again.BusinessID = "k::1"
	res := apply(t, s, &store.ApplyParams{Changes: []store.Change{
		{RunID: "r", Decide: enqueue("b")},                    // enqueues b
		{RunID: "r", Decide: cancelAll},                       // cancels a (leased) and b, enqueues kept
		{RunID: "r", Fence: &rLease, Decide: enqueue("late")}, // a was cancelled: lease lost
		{Create: dup},                     // k::1 is still held
		{RunID: "holder", Decide: finish}, // frees k::1
		{Create: again},                   // takes it
		{RunID: "other", Fence: &otherLease, Decide: enqueue("c")}, // unaffected
	}})
	if err := res.Changes[2].Err; !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("fence of a task cancelled earlier in the batch: %v", err)
	}
	var de *store.DuplicateRunError
	if err := res.Changes[3].Err; !errors.As(err, &de) || de.ExistingRunID != "holder" {
		t.Errorf("create before the key is freed: %v", err)
	}
	for _, i := range []int{0, 1, 4, 5, 6} {
		if err := res.Changes[i].Err; err != nil {
			t.Errorf("change %d: %v", i, err)
		}
	}
	var steps []string
	for _, tk := range claim(t, s, "q", 2) {
		steps = append(steps, tk.RunID+"/"+tk.Step)
	}
	slices.Sort(steps)
	if want := []string{"other/c", "r/kept"}; !slices.Equal(steps, want) {
		t.Errorf("tasks left %v, want %v", steps, want)
	}
	if r, err := s.GetRun(t.Context(), "r"); err != nil || r.Seq != 1 {
		t.Errorf("r = %+v, %v; want seq 1", r, err)
	}
	if _, err := s.GetRun(t.Context(), "again"); err != nil {
		t.Errorf("GetRun(again): %v", err)
	}
	if _, err := s.GetRun(t.Context(), "dup"); !errors.Is(err, store.ErrRunNotFound) {
		t.Errorf("GetRun(dup): %v", err)
	}
}

// A fenced create refused for its business key leaves its fence to the
// changes after it in the batch; one that succeeds takes it away from
// them; a cancellation after a fenced create does not undo it.
func TestFencedCreatesInBatch(t *testing.T) {
	t.Parallel()
	s := open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	holder := newRun("holder")
	holder.BusinessID = "k::1"
	create(t, s, holder, newRun("p", task("q", now), task("q", now)))
	ts := claim(t, s, "q", 2)
	l1, l2 := ts[0].Lease(), ts[1].Lease()
	dup := newRun("dup")
	dup.BusinessID = "k::1"
	mark := func(*store.Run) (*store.Update, error) {
		return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker}}}, nil
	}
	res := apply(t, s, &store.ApplyParams{Changes: []store.Change{
		{Create: dup, Fence: &l1},               // refused: k::1 is held; l1 stays
		{Create: newRun("c1"), Fence: &l1},      // takes l1
		{Create: newRun("c2"), Fence: &l1},      // l1 is gone
		{Create: newRun("holder"), Fence: &l2},  // refused: the id exists; l2 stays
		{RunID: "p", Fence: &l2, Decide: mark},  // completes with l2
		{Create: newRun("c3"), Fence: &l2},      // l2 is gone
		{RunID: "p", Decide: mark, Key: "once"}, // keyed
		{RunID: "p", Decide: mark, Key: "once"}, // duplicate
		{Create: newRun("c4"), Fence: &l1},      // still gone
	}})
	var de *store.DuplicateRunError
	checks := []func(error) bool{
		func(err error) bool { return errors.As(err, &de) && de.ExistingRunID == "holder" },
		func(err error) bool { return err == nil },
		func(err error) bool { return errors.Is(err, store.ErrLeaseLost) },
		func(err error) bool { return errors.Is(err, store.ErrRunExists) },
		func(err error) bool { return err == nil },
		func(err error) bool { return errors.Is(err, store.ErrLeaseLost) },
		func(err error) bool { return err == nil },
		func(err error) bool { return errors.Is(err, store.ErrDuplicateChange) },
		func(err error) bool { return errors.Is(err, store.ErrLeaseLost) },
	}
	for i, ok := range checks {
		if !ok(res.Changes[i].Err) {
			t.Errorf("change %d: %v", i, res.Changes[i].Err)
		}
	}
	for id, want := range map[string]bool{"c1": true, "c2": false, "c3": false, "c4": false, "dup": false} {
		_, err := s.GetRun(t.Context(), id)
		if got := err == nil; got != want {
			t.Errorf("GetRun(%s): %v", id, err)
		}
	}
	if r, err := s.GetRun(t.Context(), "p"); err != nil || r.Seq != 2 {
		t.Errorf("p = %+v, %v; want 2 entries", r, err)
	}
	if lost, err := s.Heartbeat(t.Context(), &store.HeartbeatParams{Leases: []store.Lease{l1, l2}, Until: now.Add(time.Hour)}); err != nil || len(lost) != 2 {
		t.Errorf("heartbeat of the fences: lost %v, %v; want both", lost, err)
	}
}

// Keys hold when a statement's failure sends the batch down the slow path
// (one change at a time), and a key that text cannot hold refuses its
// change alone.
func TestKeysOneChangeAtATime(t *testing.T) {
	t.Parallel()
	s := open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	create(t, s, newRun("a"), newRun("b"))
	mark := func(name string) func(*store.Run) (*store.Update, error) {
		return func(*store.Run) (*store.Update, error) {
			return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: name}},
				Condition: &store.Condition{Code: "c", Message: name}}, nil
		}
	}
	res := apply(t, s, &store.ApplyParams{Changes: []store.Change{
		{RunID: "a", Key: "k1", Decide: mark("1")},
		{RunID: "b", Decide: func(*store.Run) (*store.Update, error) { return &store.Update{Output: []byte(`[oops`)}, nil }},
		{RunID: "a", Key: "k1", Decide: mark("2")},
		{RunID: "a", Key: "nul\x00", Decide: mark("3")},
		{RunID: "a", Key: "bad\xff", Decide: mark("4")},
		{RunID: "b", Key: "k1", Decide: mark("5")},
	}})
	for i, want := range []error{nil, errors.New("any"), store.ErrDuplicateChange, errors.New("any"), errors.New("any"), nil} {
		err := res.Changes[i].Err
		switch {
		case want == nil && err != nil, want != nil && err == nil:
			t.Errorf("change %d: %v, want %v", i, err, want)
		case errors.Is(want, store.ErrDuplicateChange) && !errors.Is(err, want):
			t.Errorf("change %d: %v, want %v", i, err, want)
		}
	}
	evs, err := s.History(t.Context(), &store.HistoryParams{RunID: "a"})
	if err != nil || len(evs) != 1 || evs[0].Key != "k1" || evs[0].Name != "1" {
		t.Fatalf("history of a = %+v, %v", evs, err)
	}
	if r, err := s.GetRun(t.Context(), "a"); err != nil || r.Condition.Message != "1" || !r.Condition.Since.Equal(now.Truncate(time.Microsecond)) {
		t.Fatalf("a = %+v, %v", r, err)
	}
	// In a later batch, the fast path finds the key stored.
	res = apply(t, s, &store.ApplyParams{Changes: []store.Change{{RunID: "a", Key: "k1", Decide: mark("6")}}})
	if !errors.Is(res.Changes[0].Err, store.ErrDuplicateChange) {
		t.Fatalf("key again: %v", res.Changes[0].Err)
	}
}

// TestPrincipalsMigration: a database from before principals (migration
// 13 and those after it reverted) migrates when opened: every token gets a principal named
// after it, and keeps its role.
func TestPrincipalsMigration(t *testing.T) {
	t.Parallel()
	cfg := &postgres.Config{DSN: pgtest.DSN(t), Schema: "princ"}
	s := open(t, cfg)
	if _, err := s.EnsurePrincipal(t.Context(), &store.EnsurePrincipalParams{Name: "ci", Now: now}); err != nil {
		t.Fatal(err)
	}
	tok := &store.Token{ID: "t1", Name: "ci", Principal: "ci", Role: "worker", Hash: store.HashToken("s"), CreatedAt: now}
	if err := s.CreateToken(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	s.Close()
	err := postgres.WithMigrationLock(t.Context(), cfg, func(ctx context.Context, conn *sql.Conn) error {
		want := migrationsFrom(t, 13)
		v, err := migrate.Down(ctx, conn, postgres.Migrations(), migrate.Postgres, len(want))
		if err == nil && !slices.Equal(v, want) {
			t.Fatalf("down: %v; want %v", v, want)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s = open(t, cfg)
	got, err := s.TokenByHash(t.Context(), tok.Hash)
	if err != nil || got.Principal != "ci" || got.Role != "worker" {
		t.Fatalf("the token after the migration: %+v, %v", got, err)
	}
	p, err := s.GetPrincipal(t.Context(), "ci")
	if err != nil || p.Kind != store.PrincipalUser || len(p.Groups) != 0 || !p.Enabled() {
		t.Fatalf("the token's principal after the migration: %+v, %v", p, err)
	}
}

// migrationsFrom returns the versions of the embedded migrations from v
// up, newest first: what reverting down to v reverts.
func migrationsFrom(t *testing.T, v int) []int {
	t.Helper()
	ms, err := migrate.Load(postgres.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for i := len(ms) - 1; i >= 0 && ms[i].Version >= v; i-- {
		out = append(out, ms[i].Version)
	}
	return out
}

func TestRewritePayloads(t *testing.T) {
	t.Parallel()
	storetest.RunRewrite(t, func(t *testing.T) store.Store {
		return open(t, &postgres.Config{DSN: pgschema.DSN(t)})
	})
}
