package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t testing.TB, cfg *Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), cfg)
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

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, &Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	}, storetest.WithTx(beginTx))
}

// The suite with every search attribute condition broad: the lists
// probe the attributes per run (where.attr) instead of reading their ids
// first.
func TestConformanceBroadAttrs(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s := open(t, &Config{Memory: true})
		s.broadRows = -1
		return s
	}, storetest.WithTx(beginTx))
}

func TestAdminConformance(t *testing.T) {
	t.Parallel()
	storetest.RunAdmin(t, func(t *testing.T) store.Admin {
		return open(t, &Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	})
}

func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, &Config{Memory: true})
	}, storetest.WithTx(beginTx))
}

// beginTx opens a transaction of the application's on the store's DB.
func beginTx(t *testing.T, s store.Store) *storetest.Tx {
	tx, err := s.(*Store).DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return &storetest.Tx{
		Tx:       tx,
		Exec:     func(q string) error { _, err := tx.ExecContext(t.Context(), q); return err },
		Commit:   tx.Commit,
		Rollback: tx.Rollback,
		Rows: func(table string) (n int, err error) {
			return n, tx.QueryRowContext(t.Context(), `SELECT count(*) FROM "`+table+`"`).Scan(&n)
		},
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   *Config
		field string
	}{
		{nil, "Config.Path"},
		{&Config{}, "Config.Path"},
		{&Config{Memory: true, Path: "x.db"}, "Config.Path"},
		{&Config{Memory: true, Synchronous: "OFF"}, "Config.Synchronous"},
		{&Config{Memory: true, Synchronous: "EXTRA"}, "Config.Synchronous"},
		{&Config{Memory: true, BusyTimeout: -time.Second}, "Config.BusyTimeout"},
		{&Config{Memory: true, ReadConns: -1}, "Config.ReadConns"},
	} {
		s, err := Open(t.Context(), tc.cfg)
		if err == nil {
			s.Close()
			t.Errorf("Open(%+v): no error", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Open(%+v): error %q does not name %s", tc.cfg, err, tc.field)
		}
	}
}

func pragma(t *testing.T, s *Store, name string) string {
	t.Helper()
	var v string
	if err := s.writer.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ sync, want string }{{"", "2"}, {"FULL", "2"}, {"normal", "1"}} {
		s := open(t, &Config{Path: filepath.Join(t.TempDir(), "p.db"), Synchronous: tc.sync, BusyTimeout: 1500 * time.Millisecond})
		if got := pragma(t, s, "synchronous"); got != tc.want {
			t.Errorf("Synchronous %q: PRAGMA synchronous = %s, want %s", tc.sync, got, tc.want)
		}
		if got := pragma(t, s, "journal_mode"); got != "wal" {
			t.Errorf("journal_mode = %s", got)
		}
		if got := pragma(t, s, "foreign_keys"); got != "1" {
			t.Errorf("foreign_keys = %s", got)
		}
		if got := pragma(t, s, "busy_timeout"); got != "1500" {
			t.Errorf("busy_timeout = %s", got)
		}
		var q string
		if err := s.reader.QueryRowContext(t.Context(), "PRAGMA query_only").Scan(&q); err != nil || q != "1" {
			t.Errorf("reader query_only = %s, %v", q, err)
		}
		if _, err := s.reader.ExecContext(t.Context(), "DELETE FROM runs"); err == nil {
			t.Error("reader wrote")
		}
	}
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "dir with ? and # and %", "heph.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC)
	s, err := Open(t.Context(), &Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{
		ID: "r1", Workflow: "wf", Kind: hephtype.KindFlow, Status: hephtype.StatusRunning,
		History: []store.NewEvent{{Kind: hephtype.EventRunStarted}},
		Tasks:   []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: "a", Index: -1}},
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatal(err, res)
	}
	claimed, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 1, LeaseFor: time.Minute, Now: now})
	if err != nil || len(claimed) != 1 {
		t.Fatal(err, claimed)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, &Config{Path: path})
	r, err := s.GetRun(t.Context(), "r1")
	if err != nil || r.Seq != 1 || !r.CreatedAt.Equal(now) {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
	// The lease survived too: the old token still fences, and the next
	// claim gets a new one.
	again, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "w2", Limit: 1, LeaseFor: time.Minute, Now: now.Add(time.Minute)})
	if err != nil || len(again) != 1 || again[0].Token == claimed[0].Token {
		t.Fatalf("claim after reopen: %+v, %v (old token %d)", again, err, claimed[0].Token)
	}
	st, err := migrate.Status(t.Context(), s.writer, Migrations(), migrate.SQLite)
	if err != nil || len(st) == 0 {
		t.Fatal(err, st)
	}
}

func TestMigrationStatus(t *testing.T) {
	t.Parallel()
	s := open(t, &Config{Memory: true})
	st, err := migrate.Status(t.Context(), s.writer, Migrations(), migrate.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != len(ms) || len(st) == 0 {
		t.Fatalf("status %+v for %d migrations", st, len(ms))
	}
	for _, m := range st {
		if !m.Applied || m.Unknown || m.AppliedAt.IsZero() {
			t.Errorf("migration %+v not applied", m)
		}
	}
	// Down and up again.
	if _, err := migrate.Down(t.Context(), s.writer, Migrations(), migrate.SQLite, len(ms)); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Up(t.Context(), s.writer, Migrations(), migrate.SQLite); err != nil {
		t.Fatal(err)
	}
}

// TestTraceContextMigration: a database from before trace contexts
// (migrations 12, 10 and 9 reverted) migrates when opened: its runs and tasks read
// back with none, and new runs store theirs.
func TestTraceContextMigration(t *testing.T) {
	t.Parallel()
	const tc = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	path := filepath.Join(t.TempDir(), "heph.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(id string) *store.NewRun {
		return &store.NewRun{ID: id, Workflow: "wf", Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, TraceContext: tc,
			Tasks: []store.NewTask{{Queue: "q", Kind: store.TaskTimer, Step: id, Index: -1}}}
	}
	create := func(s *Store, id string) {
		t.Helper()
		res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: mk(id)}}})
		if err != nil || res.Changes[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	s, err := Open(t.Context(), &Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	create(s, "old")
	if want := migrationsFrom(t, 9); !slices.Equal(must(migrate.Down(t.Context(), s.writer, Migrations(), migrate.SQLite, len(want)))(t), want) {
		t.Fatalf("migrate down: want %v", want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, &Config{Path: path})
	create(s, "new")
	want := map[string]string{"old": "", "new": tc}
	for id, want := range want {
		if r, err := s.GetRun(t.Context(), id); err != nil || r.TraceContext != want {
			t.Errorf("run %s after the migration: %+v, %v; want trace context %q", id, r, err, want)
		}
	}
	ts, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 10, LeaseFor: time.Minute, Now: now})
	if err != nil || len(ts) != 2 {
		t.Fatalf("claim after the migration: %+v, %v", ts, err)
	}
	for _, tk := range ts {
		if tk.TraceContext != want[tk.RunID] {
			t.Errorf("task of run %s after the migration: trace context %q, want %q", tk.RunID, tk.TraceContext, want[tk.RunID])
		}
	}
}

// TestTaskRunAttrsMigration: a database from before tasks copied their
// run's tags and metadata (migrations 12 and 10 reverted) migrates when opened:
// the tasks waiting get those of their runs, and new tasks copy them.
func TestTaskRunAttrsMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tags, meta := []string{"blue", `a "quoted" tag`}, map[string]json.RawMessage{"tenant": json.RawMessage(`"acme"`), "n": json.RawMessage(`42`)}
	create := func(s *Store, id string, tagged bool) {
		t.Helper()
		n := &store.NewRun{ID: id, Workflow: "wf", Kind: hephtype.KindFlow, Status: hephtype.StatusRunning,
			Tasks: []store.NewTask{{Queue: "q", Kind: store.TaskStep, Step: id, Index: -1}}}
		if tagged {
			n.Tags, n.Metadata = tags, meta
		}
		res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: n}}})
		if err != nil || res.Changes[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	s, err := Open(t.Context(), &Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	create(s, "old", true)
	create(s, "old-plain", false)
	if want := migrationsFrom(t, 10); !slices.Equal(must(migrate.Down(t.Context(), s.writer, Migrations(), migrate.SQLite, len(want)))(t), want) {
		t.Fatalf("migrate down: want %v", want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, &Config{Path: path})
	create(s, "new", true)
	create(s, "new-plain", false)
	ts, err := s.ClaimTasks(t.Context(), &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 10, LeaseFor: time.Minute, Now: now})
	if err != nil || len(ts) != 4 {
		t.Fatalf("claim after the migration: %+v, %v", ts, err)
	}
	for _, tk := range ts {
		if strings.HasSuffix(tk.RunID, "-plain") {
			if tk.Tags != nil || tk.Metadata != nil {
				t.Errorf("task of run %s after the migration: tags %q, metadata %s; want none", tk.RunID, tk.Tags, tk.Metadata)
			}
		} else if !slices.Equal(tk.Tags, tags) || len(tk.Metadata) != 2 || string(tk.Metadata["n"]) != "42" {
			t.Errorf("task of run %s after the migration: tags %q, metadata %s; want %q, %s", tk.RunID, tk.Tags, tk.Metadata, tags, meta)
		}
	}
}

func TestMemoryStoresAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := open(t, &Config{Memory: true}), open(t, &Config{Memory: true})
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := a.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{ID: "r", Workflow: "w"}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetRun(t.Context(), "r"); err == nil {
		t.Fatal("run visible in another memory store")
	}
}

// The writer decides changes from the runs it keeps in memory: a change
// made by another connection (another process) on the same file, and a
// change rolled back, must not be missed.
func TestRunCacheCoherence(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	a, b := open(t, &Config{Path: path}), open(t, &Config{Path: path})
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	apply := func(s *Store, ctx context.Context, cs ...store.Change) ([]store.ChangeResult, error) {
		t.Helper()
		res, err := s.Apply(ctx, &store.ApplyParams{Now: now, Changes: cs})
		if err != nil {
			return nil, err
		}
		return res.Changes, nil
	}
	seen := func(s *Store) *store.Run {
		t.Helper()
		var got *store.Run
		res, err := apply(s, t.Context(), store.Change{RunID: "r", Decide: func(r *store.Run) (*store.Update, error) {
			got = r
			return nil, errors.New("just looking")
		}})
		if err != nil || res[0].Err == nil {
			t.Fatal(err, res)
		}
		return got
	}
	setState := func(s *Store, ctx context.Context, state string) error {
		res, err := apply(s, ctx, store.Change{RunID: "r", Decide: func(*store.Run) (*store.Update, error) {
			return &store.Update{State: json.RawMessage(state), History: []store.NewEvent{{Kind: hephtype.EventMarker}}}, nil
		}})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		return err
	}

	if _, err := apply(a, t.Context(), store.Change{Create: &store.NewRun{ID: "r", Workflow: "wf", State: json.RawMessage(`1`)}}); err != nil {
		t.Fatal(err)
	}
	if r := seen(a); string(r.State) != "1" || r.Seq != 0 {
		t.Fatalf("a sees %s at %d", r.State, r.Seq)
	}
	// Another connection changes the run.
	if err := setState(b, t.Context(), `2`); err != nil {
		t.Fatal(err)
	}
	if r := seen(a); string(r.State) != "2" || r.Seq != 1 {
		t.Fatalf("after b's change, a sees %s at %d", r.State, r.Seq)
	}
	if err := setState(a, t.Context(), `3`); err != nil {
		t.Fatal(err)
	}
	if r := seen(b); string(r.State) != "3" || r.Seq != 2 {
		t.Fatalf("after a's change, b sees %s at %d", r.State, r.Seq)
	}
	// A change rolled back (the context ends before the Apply commits)
	// leaves no trace.
	ctx, cancel := context.WithCancel(t.Context())
	_, err := apply(a, ctx,
		store.Change{RunID: "r", Decide: func(*store.Run) (*store.Update, error) {
			cancel()
			return &store.Update{State: json.RawMessage(`4`), History: []store.NewEvent{{Kind: hephtype.EventMarker}}}, nil
		}},
		store.Change{RunID: "r", Decide: func(*store.Run) (*store.Update, error) { return nil, nil }},
	)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Apply: %v", err)
	}
	if r := seen(a); string(r.State) != "3" || r.Seq != 2 {
		t.Fatalf("after a rolled back change, a sees %s at %d", r.State, r.Seq)
	}
	if got, err := a.GetRun(t.Context(), "r"); err != nil || string(got.State) != "3" || got.Seq != 2 {
		t.Fatalf("GetRun = %+v, %v", got, err)
	}
	if evs, err := a.History(t.Context(), &store.HistoryParams{RunID: "r"}); err != nil || len(evs) != 2 {
		t.Fatalf("history = %v, %v", evs, err)
	}
	// Pruned runs are gone for the writer too.
	if err := setState(a, t.Context(), `5`); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(a, t.Context(), store.Change{RunID: "r", Decide: func(*store.Run) (*store.Update, error) {
		return &store.Update{Status: hephtype.StatusCompleted}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if n, err := a.PruneRuns(t.Context(), &store.PruneParams{FinishedBefore: now.Add(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	res, err := apply(a, t.Context(), store.Change{RunID: "r", Decide: func(*store.Run) (*store.Update, error) { return nil, nil }})
	if err != nil || !errors.Is(res[0].Err, store.ErrRunNotFound) {
		t.Fatalf("update of a pruned run: %v, %v", res, err)
	}
}

// Decide gets a copy of the run: scribbling on it changes nothing stored,
// and neither does changing a returned run.
func TestDecideScribbles(t *testing.T) {
	t.Parallel()
	s := open(t, &Config{Memory: true})
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{
		ID: "r", Workflow: "wf", Input: json.RawMessage(`"in"`), State: json.RawMessage(`"st"`),
		Tags: []string{"a"}, Metadata: map[string]json.RawMessage{"k": json.RawMessage(`"v"`)},
	}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatal(err, res)
	}
	scribble := func(r *store.Run) {
		r.Input[1], r.State[1], r.Tags[0] = 'X', 'X', "X"
		r.Metadata["k"][1] = 'X'
		r.Metadata["z"] = nil
	}
	scribble(res.Changes[0].Run)
	for range 2 {
		res, err = s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{RunID: "r", Decide: func(r *store.Run) (*store.Update, error) {
			if string(r.Input) != `"in"` || string(r.State) != `"st"` || r.Tags[0] != "a" || string(r.Metadata["k"]) != `"v"` || len(r.Metadata) != 1 {
				t.Errorf("Decide sees %+v", r)
			}
			scribble(r)
			return &store.Update{}, nil
		}}}})
		if err != nil || res.Changes[0].Err != nil {
			t.Fatal(err, res)
		}
		scribble(res.Changes[0].Run)
	}
}

// TestPrincipalsMigration: a database from before principals (migration
// 11 reverted) migrates when opened: every token gets a principal named
// after it, and keeps its role.
func TestPrincipalsMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := Open(t.Context(), &Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsurePrincipal(t.Context(), &store.EnsurePrincipalParams{Name: "ci", Now: now}); err != nil {
		t.Fatal(err)
	}
	tok := &store.Token{ID: "t1", Name: "ci", Principal: "ci", Role: "worker", Hash: store.HashToken("s"), CreatedAt: now}
	if err := s.CreateToken(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	if want := migrationsFrom(t, 11); !slices.Equal(must(migrate.Down(t.Context(), s.writer, Migrations(), migrate.SQLite, len(want)))(t), want) {
		t.Fatalf("migrate down: want %v", want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, &Config{Path: path})
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
	ms, err := migrate.Load(Migrations())
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for i := len(ms) - 1; i >= 0 && ms[i].Version >= v; i-- {
		out = append(out, ms[i].Version)
	}
	return out
}

// must fails the test on err, and returns v.
func must(v []int, err error) func(t *testing.T) []int {
	return func(t *testing.T) []int {
		t.Helper()
		if err != nil {
			t.Fatalf("migrate down: %v (reverted %v)", err, v)
		}
		return v
	}
}

func TestRewritePayloads(t *testing.T) {
	t.Parallel()
	storetest.RunRewrite(t, func(t *testing.T) store.Store {
		return open(t, &Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	})
}
