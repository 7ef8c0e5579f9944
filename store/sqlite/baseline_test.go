package sqlite

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/internal/migrate"
)

var updateBaseline = flag.Bool("update", false, "write baseline.sql from what the migrations build")

// rawDB opens a new database file with the store's settings that matter
// to a schema (foreign keys), without migrating it.
func rawDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "b.db")+"?_foreign_keys=1&_txlock=immediate&_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A new database gets baseline.sql instead of the migrations one by one
// (Open, migrate.UpFrom); this proves the two build the same database:
// the same schema, to the text of every CREATE, the same rows in every
// table, the same versions recorded. The script must stand for every
// migration, so that a new database takes the short way all the way.
func TestSchemaBaseline(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	byMigrations := rawDB(t)
	if _, err := migrate.Up(ctx, byMigrations, Migrations(), migrate.SQLite); err != nil {
		t.Fatal(err)
	}
	ms, err := migrate.Load(Migrations())
	if err != nil {
		t.Fatal(err)
	}
	want := baselineScript(t, byMigrations, ms[len(ms)-1].Version)
	if *updateBaseline {
		if err := os.WriteFile("baseline.sql", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		baselineFile = want
	}
	if baselineFile != want {
		t.Fatalf("baseline.sql is not what migrations 1 to %d build; after adding a migration, run\n"+
			"\tgo test ./store/sqlite -run TestSchemaBaseline -update\nand review the diff", ms[len(ms)-1].Version)
	}
	byBaseline := rawDB(t)
	base, err := baseline()
	if err != nil {
		t.Fatal(err)
	}
	done, err := migrate.UpFrom(ctx, byBaseline, Migrations(), migrate.SQLite, base)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != len(ms) {
		t.Fatalf("the baseline recorded %d migrations, want %d", len(done), len(ms))
	}
	if diff := cmp.Diff(dumpDB(t, byMigrations), dumpDB(t, byBaseline)); diff != "" {
		t.Fatalf("the migrations and the baseline build different databases (-migrations +baseline):\n%s", diff)
	}
}

// Open on a new database records every migration as applied, and on an
// old one (here: every migration but the last two reverted) applies what
// is missing, as it did before there was a baseline.
func TestOpenWithBaseline(t *testing.T) {
	t.Parallel()
	ms, err := migrate.Load(Migrations())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "heph.db")
	s := open(t, &Config{Path: path})
	st, err := migrate.Status(t.Context(), s.writer, Migrations(), migrate.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != len(ms) || slices.ContainsFunc(st, func(s migrate.State) bool { return !s.Applied || s.Unknown }) {
		t.Fatalf("status of a new database: %+v", st)
	}
	if _, err := migrate.Down(t.Context(), s.writer, Migrations(), migrate.SQLite, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, &Config{Path: path})
	st, err = migrate.Status(t.Context(), s2.writer, Migrations(), migrate.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(st, func(s migrate.State) bool { return !s.Applied }) {
		t.Fatalf("status after reopening: %+v", st)
	}
}

// baselineScript renders what db holds as one script: its tables, their
// rows, then its indexes, views and triggers (after the rows, so that
// inserting them fires nothing), each kind in the order it was created.
func baselineScript(t *testing.T, db *sql.DB, version int) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, baselineHeader+"\n", version)
	b.WriteString("PRAGMA defer_foreign_keys = ON;\n")
	objects := func(kind string) [][2]string {
		return queryPairs(t, db, `SELECT name, sql FROM sqlite_master WHERE type = ? AND sql IS NOT NULL
			AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name <> ? ORDER BY rowid`, kind, migrate.Table)
	}
	tables := objects("table")
	for _, tb := range tables {
		b.WriteString(tb[1] + ";\n")
	}
	for _, tb := range tables {
		for _, ins := range tableInserts(t, db, tb[0]) {
			b.WriteString(ins + ";\n")
		}
	}
	for _, kind := range []string{"index", "view", "trigger"} {
		for _, o := range objects(kind) {
			b.WriteString(o[1] + ";\n")
		}
	}
	return b.String()
}

// tableInserts returns the INSERT statements of table's rows, of its
// columns that are not generated.
func tableInserts(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	var cols, quoted []string
	for _, c := range queryPairs(t, db, `SELECT name, hidden FROM pragma_table_xinfo(?) ORDER BY cid`, table) {
		if c[1] == "0" {
			cols = append(cols, `"`+c[0]+`"`)
			quoted = append(quoted, `quote("`+c[0]+`")`)
		}
	}
	rows := queryPairs(t, db, `SELECT `+strings.Join(quoted, ` || ',' || `)+`, '' FROM "`+table+`" ORDER BY 1`)
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, fmt.Sprintf(`INSERT INTO "%s" (%s) VALUES (%s)`, table, strings.Join(cols, ", "), r[0]))
	}
	return out
}

// dumpDB returns everything a database holds that a migration could
// make: every entry of sqlite_master, every row of every table (the
// version table without the times), the user version.
func dumpDB(t *testing.T, db *sql.DB) []string {
	t.Helper()
	var out []string
	for _, o := range queryPairs(t, db, `SELECT type || ' ' || name || ' on ' || tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name`) {
		out = append(out, o[0]+": "+o[1])
	}
	for _, tb := range queryPairs(t, db, `SELECT name, '' FROM sqlite_master WHERE type = 'table' ORDER BY name`) {
		if tb[0] == migrate.Table {
			for _, r := range queryPairs(t, db, `SELECT version, name FROM `+migrate.Table+` ORDER BY version`) {
				out = append(out, "version "+r[0]+" "+r[1])
			}
			continue
		}
		out = append(out, tableInserts(t, db, tb[0])...)
	}
	for _, p := range queryPairs(t, db, `SELECT user_version, application_id FROM pragma_user_version, pragma_application_id`) {
		out = append(out, "user_version "+p[0]+", application_id "+p[1])
	}
	return out
}

// queryPairs runs q and returns the first two columns of its rows as
// text.
func queryPairs(t *testing.T, db *sql.DB, q string, args ...any) [][2]string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var a, b sql.NullString
		if err := rows.Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, [2]string{a.String, b.String})
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
