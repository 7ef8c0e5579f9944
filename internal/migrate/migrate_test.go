package migrate_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	_ "modernc.org/sqlite"

	"github.com/hephaestus-go/hephaestus/internal/migrate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func openDB(t *testing.T, file string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?_txlock=immediate&_busy_timeout=5000&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newDB(t *testing.T) *sql.DB {
	return openDB(t, filepath.Join(t.TempDir(), "m.db"))
}

func files() fstest.MapFS {
	return fstest.MapFS{
		"0001_init.up.sql":     {Data: []byte("CREATE TABLE a (x INTEGER); CREATE TABLE b (y INTEGER);")},
		"0001_init.down.sql":   {Data: []byte("DROP TABLE b; DROP TABLE a;")},
		"0002_more.up.sql":     {Data: []byte("ALTER TABLE a ADD COLUMN z TEXT;")},
		"0002_more.down.sql":   {Data: []byte("ALTER TABLE a DROP COLUMN z;")},
		"0010_index.up.sql":    {Data: []byte("CREATE INDEX a_x ON a (x);")},
		"0010_index.down.sql":  {Data: []byte("DROP INDEX a_x;")},
		"README.md":            {Data: []byte("ignored")},
		"sub/0003_skip.up.sql": {Data: []byte("ignored: in a sub-directory")},
	}
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM sqlite_schema WHERE name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

type row struct {
	Version int
	Name    string
	Applied bool
}

func status(t *testing.T, db *sql.DB, fsys fstest.MapFS) []row {
	t.Helper()
	st, err := migrate.Status(context.Background(), db, fsys, migrate.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, s := range st {
		if s.Applied == s.AppliedAt.IsZero() {
			t.Errorf("version %d: applied %v but applied at %v", s.Version, s.Applied, s.AppliedAt)
		}
		out = append(out, row{s.Version, s.Name, s.Applied})
	}
	return out
}

func TestLoad(t *testing.T) {
	t.Parallel()
	ms, err := migrate.Load(files())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name)
		if !m.HasDown {
			t.Errorf("%d: no down", m.Version)
		}
	}
	if diff := cmp.Diff([]string{"init", "more", "index"}, got); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fstest.MapFS{
		"not numbered": {"init.up.sql": {Data: []byte("x")}},
		"no name":      {"0001.up.sql": {Data: []byte("x")}},
		"zero":         {"0000_init.up.sql": {Data: []byte("x")}},
		"two names":    {"0001_a.up.sql": {Data: []byte("x")}, "0001_b.down.sql": {Data: []byte("x")}},
		"no up":        {"0001_a.down.sql": {Data: []byte("x")}},
		"empty up":     {"0001_a.up.sql": {Data: nil}},
	} {
		if _, err := migrate.Load(fsys); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestUpStatusDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	fsys := files()

	if diff := cmp.Diff([]row{{1, "init", false}, {2, "more", false}, {10, "index", false}}, status(t, db, fsys)); diff != "" {
		t.Fatalf("status before (-want +got):\n%s", diff)
	}
	done, err := migrate.Up(ctx, db, fsys, migrate.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2, 10}, done); diff != "" {
		t.Fatalf("applied (-want +got):\n%s", diff)
	}
	if !tableExists(t, db, "a") || !tableExists(t, db, "a_x") {
		t.Fatal("schema missing after up")
	}
	if done, err := migrate.Up(ctx, db, fsys, migrate.SQLite); err != nil || len(done) != 0 {
		t.Fatalf("second up: %v, %v", done, err)
	}
	if diff := cmp.Diff([]row{{1, "init", true}, {2, "more", true}, {10, "index", true}}, status(t, db, fsys)); diff != "" {
		t.Fatalf("status after up (-want +got):\n%s", diff)
	}

	done, err = migrate.Down(ctx, db, fsys, migrate.SQLite, 2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{10, 2}, done); diff != "" {
		t.Fatalf("reverted (-want +got):\n%s", diff)
	}
	if tableExists(t, db, "a_x") || !tableExists(t, db, "a") {
		t.Fatal("wrong schema after down 2")
	}
	if diff := cmp.Diff([]row{{1, "init", true}, {2, "more", false}, {10, "index", false}}, status(t, db, fsys)); diff != "" {
		t.Fatalf("status after down (-want +got):\n%s", diff)
	}

	done, err = migrate.Down(ctx, db, fsys, migrate.SQLite, 5)
	if err != nil || !cmp.Equal([]int{1}, done) {
		t.Fatalf("down past the start: %v, %v", done, err)
	}
	if tableExists(t, db, "a") {
		t.Fatal("table a survived down")
	}
	if _, err := migrate.Down(ctx, db, fsys, migrate.SQLite, 0); err == nil {
		t.Fatal("down 0 steps: no error")
	}

	// Up again from scratch works.
	if done, err := migrate.Up(ctx, db, fsys, migrate.SQLite); err != nil || len(done) != 3 {
		t.Fatalf("up again: %v, %v", done, err)
	}
}

func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	fsys := files()
	fsys["0003_bad.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE c (x INTEGER); INSERT INTO nowhere VALUES (1);")}

	done, err := migrate.Up(ctx, db, fsys, migrate.SQLite)
	if err == nil || !strings.Contains(err.Error(), "0003_bad") {
		t.Fatalf("error = %v, want one naming 0003_bad", err)
	}
	if !cmp.Equal([]int{1, 2}, done) {
		t.Fatalf("applied = %v, want [1 2]", done)
	}
	if tableExists(t, db, "c") {
		t.Fatal("table c of the failed migration exists")
	}
	want := []row{{1, "init", true}, {2, "more", true}, {3, "bad", false}, {10, "index", false}}
	if diff := cmp.Diff(want, status(t, db, fsys)); diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}
}

func TestUnknownVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	if _, err := migrate.Up(ctx, db, files(), migrate.SQLite); err != nil {
		t.Fatal(err)
	}
	older := files()
	delete(older, "0010_index.up.sql")
	delete(older, "0010_index.down.sql")
	if _, err := migrate.Up(ctx, db, older, migrate.SQLite); !errors.Is(err, migrate.ErrUnknownVersion) {
		t.Fatalf("up: error = %v, want ErrUnknownVersion", err)
	}
	if _, err := migrate.Down(ctx, db, older, migrate.SQLite, 1); !errors.Is(err, migrate.ErrUnknownVersion) {
		t.Fatalf("down: error = %v, want ErrUnknownVersion", err)
	}
	st, err := migrate.Status(ctx, db, older, migrate.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if last := st[len(st)-1]; !last.Unknown || last.Version != 10 || last.Name != "index" {
		t.Fatalf("last status = %+v, want unknown version 10", last)
	}
}

func TestDownWithoutDownFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	fsys := files()
	delete(fsys, "0010_index.down.sql")
	if _, err := migrate.Up(ctx, db, fsys, migrate.SQLite); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.Down(ctx, db, fsys, migrate.SQLite, 1); err == nil {
		t.Fatal("no error reverting a migration without a down file")
	}
	if !tableExists(t, db, "a_x") {
		t.Fatal("index dropped")
	}
}

// Two processes opening one database at once: each migration is applied
// exactly once.
func TestConcurrentUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "m.db")
	dbs := []*sql.DB{openDB(t, file), openDB(t, file), openDB(t, file), openDB(t, file)}
	// Create the version table first: concurrent CREATE TABLE IF NOT
	// EXISTS outside a transaction is not what this test is about.
	if _, err := migrate.Status(ctx, dbs[0], files(), migrate.SQLite); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	applied := make([][]int, len(dbs))
	errs := make([]error, len(dbs))
	for i, db := range dbs {
		wg.Go(func() { applied[i], errs[i] = migrate.Up(ctx, db, files(), migrate.SQLite) })
	}
	wg.Wait()
	var all []int
	for i := range dbs {
		if errs[i] != nil {
			t.Fatalf("up %d: %v", i, errs[i])
		}
		all = append(all, applied[i]...)
	}
	if len(all) != 3 {
		t.Fatalf("applied %v in total, want each of 1, 2, 10 once", all)
	}
}

// The baseline of migrations 1 and 2 of files(), as one script.
var base2 = migrate.Baseline{Version: 2, SQL: "CREATE TABLE a (x INTEGER, z TEXT); CREATE TABLE b (y INTEGER); INSERT INTO b VALUES (7);"}

func TestUpFromBaseline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	fsys := files()
	done, err := migrate.UpFrom(ctx, db, fsys, migrate.SQLite, base2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2, 10}, done); diff != "" {
		t.Fatalf("applied (-want +got):\n%s", diff)
	}
	var y int
	if err := db.QueryRow("SELECT y FROM b").Scan(&y); err != nil || y != 7 {
		t.Fatalf("the baseline's row: %d, %v (want 7)", y, err)
	}
	if !tableExists(t, db, "a_x") {
		t.Fatal("migration 10, after the baseline, did not run")
	}
	if diff := cmp.Diff([]row{{1, "init", true}, {2, "more", true}, {10, "index", true}}, status(t, db, fsys)); diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}
	// The versions the baseline stands for revert as if they had run.
	if done, err := migrate.Down(ctx, db, fsys, migrate.SQLite, 3); err != nil || !cmp.Equal([]int{10, 2, 1}, done) {
		t.Fatalf("down: %v, %v", done, err)
	}
	if tableExists(t, db, "a") || tableExists(t, db, "b") {
		t.Fatal("tables left after down")
	}
}

// A database with a migration applied never gets the baseline, even one
// that would fail: it is migrated as Up migrates it.
func TestUpFromBaselineOnlyWhenNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	fsys := files()
	delete(fsys, "0002_more.up.sql")
	delete(fsys, "0002_more.down.sql")
	if _, err := migrate.Up(ctx, db, fsys, migrate.SQLite); err != nil {
		t.Fatal(err)
	}
	bad := migrate.Baseline{Version: 2, SQL: "this is not SQL"}
	done, err := migrate.UpFrom(ctx, db, files(), migrate.SQLite, bad)
	if err != nil || !cmp.Equal([]int{2}, done) {
		t.Fatalf("up from an old database: %v, %v (want [2])", done, err)
	}
}

func TestUpFromBaselineErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, tc := range map[string]struct {
		base migrate.Baseline
		want string
	}{
		"unknown version": {migrate.Baseline{Version: 3, SQL: base2.SQL}, "migration 0003, which the files lack"},
		"bad script":      {migrate.Baseline{Version: 2, SQL: "CREATE TABLE a (x INTEGER); INSERT INTO nowhere VALUES (1);"}, "baseline 0002"},
	} {
		db := newDB(t)
		done, err := migrate.UpFrom(ctx, db, files(), migrate.SQLite, tc.base)
		if err == nil || !strings.Contains(err.Error(), tc.want) || len(done) != 0 {
			t.Errorf("%s: %v, %v; want an error with %q", name, done, err, tc.want)
			continue
		}
		if tableExists(t, db, "a") {
			t.Errorf("%s: the failed baseline left table a", name)
		}
		if diff := cmp.Diff([]row{{1, "init", false}, {2, "more", false}, {10, "index", false}}, status(t, db, files())); diff != "" {
			t.Errorf("%s: status (-want +got):\n%s", name, diff)
		}
	}
}
