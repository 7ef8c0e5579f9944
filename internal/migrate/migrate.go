// Package migrate applies numbered SQL migrations embedded in a backend.
//
// A migration is a pair of files at the root of an fs.FS:
//
//	0001_init.up.sql
//	0001_init.down.sql
//
// The number is the version (positive, unique); the text between the number
// and ".up.sql" is its name. The down file is optional; Down refuses to
// revert a migration that has none. Applied versions are recorded in the
// table heph_schema_migrations(version, name, applied_at), applied_at in
// Unix microseconds taken from the database clock.
//
// Each migration runs in its own transaction together with the row that
// records it, so a failed migration leaves no trace. Inside that
// transaction the runner checks again that the version is not yet applied,
// which makes Up safe to race against itself on a database whose write
// transactions are serialized (SQLite with BEGIN IMMEDIATE). On PostgreSQL
// the caller holds an advisory lock around Up on a *sql.Conn: every
// function takes a DB, which both *sql.DB and *sql.Conn satisfy.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DB is what the runner needs of a database: *sql.DB and *sql.Conn
// implement it.
type DB interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Dialect holds the little SQL that differs between databases.
type Dialect struct {
	// Name appears in error messages.
	Name string
	// Bind returns the placeholder of the n-th argument, counting from 1.
	Bind func(n int) string
	// NowMicros is an SQL expression for the current time in Unix
	// microseconds.
	NowMicros string
	// HasTable is a query of one argument, a table name, that returns 1
	// when the table exists (in the schema of the connection's search
	// path) and 0 otherwise.
	HasTable string
}

// The dialects.
var (
	SQLite = Dialect{
		Name:      "sqlite",
		Bind:      func(int) string { return "?" },
		NowMicros: "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)",
		HasTable:  "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
	}
	Postgres = Dialect{
		Name:      "postgres",
		Bind:      func(n int) string { return "$" + strconv.Itoa(n) },
		NowMicros: "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
		HasTable:  "SELECT CASE WHEN to_regclass($1) IS NULL THEN 0 ELSE 1 END",
	}
)

// Table is the name of the version table.
const Table = "heph_schema_migrations"

// Migration is one numbered schema change.
type Migration struct {
	Version int
	Name    string
	Up      string
	Down    string
	// HasDown reports whether a down file exists (it may be empty).
	HasDown bool
}

// State is a migration's status in a database.
type State struct {
	Version int
	// Name is empty for a version the database has but the files lack.
	Name      string
	Applied   bool
	AppliedAt time.Time
	// Unknown marks a version applied to the database that no file
	// describes: the database is newer than this program.
	Unknown bool
}

// ErrUnknownVersion is returned by Up and Down when the database has a
// migration applied that the files do not describe.
var ErrUnknownVersion = errors.New("database has a migration this program does not know")

// Load reads and checks the migrations at the root of fsys, in version
// order. Files not ending in .up.sql or .down.sql are ignored.
func Load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		file := e.Name()
		var up bool
		var base string
		switch {
		case strings.HasSuffix(file, ".up.sql"):
			up, base = true, strings.TrimSuffix(file, ".up.sql")
		case strings.HasSuffix(file, ".down.sql"):
			base = strings.TrimSuffix(file, ".down.sql")
		default:
			continue
		}
		num, name, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || name == "" || err != nil || version <= 0 {
			return nil, fmt.Errorf("load migrations: file %q is not named like 0001_name.up.sql", file)
		}
		text, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, fmt.Errorf("load migrations: %w", err)
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: name}
			byVersion[version] = m
		}
		if m.Name != name {
			return nil, fmt.Errorf("load migrations: version %d has two names, %q and %q", version, m.Name, name)
		}
		if up {
			m.Up = string(text)
		} else {
			m.Down, m.HasDown = string(text), true
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" {
			return nil, fmt.Errorf("load migrations: version %d (%s) has no up file", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	return out, nil
}

// Up applies every pending migration in version order, each in its own
// transaction, and returns the versions it applied. It refuses to run
// (ErrUnknownVersion) when the database has a version the files lack.
func Up(ctx context.Context, db DB, fsys fs.FS, d Dialect) ([]int, error) {
	return UpFrom(ctx, db, fsys, d, Baseline{})
}

// Baseline is what migrations 1 to Version build, as one script: the
// schema and the rows they leave in an empty database. It is a shortcut
// for a new database, which gets the script in one transaction instead of
// each migration in its own (building a schema statement by statement
// re-reads it after every ALTER; a backend's test proves that its script
// and its migrations build the same database).
type Baseline struct {
	Version int
	SQL     string
}

// UpFrom is Up for a database that may be new: when no migration is
// applied yet, base (unless its Version is 0) stands for migrations 1 to
// base.Version, which are recorded as applied, and the migrations after
// it run as Up runs them.
func UpFrom(ctx context.Context, db DB, fsys fs.FS, d Dialect, base Baseline) ([]int, error) {
	ms, err := Load(fsys)
	if err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, db, d)
	if err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
	}
	if err := checkKnown(ms, applied); err != nil {
		return nil, fmt.Errorf("migrate up: %w", err)
	}
	var done []int
	if len(applied) == 0 && base.Version > 0 {
		if done, err = applyBaseline(ctx, db, d, ms, base); err != nil {
			return nil, err
		}
		for _, v := range done {
			applied[v] = appliedRow{}
		}
	}
	for _, m := range ms {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		ran, err := inTx(ctx, db, d, m.Version, false, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, m.Up); err != nil {
				return err
			}
			return record(ctx, tx, d, m)
		})
		if err != nil {
			return done, fmt.Errorf("migrate up: %04d_%s: %w", m.Version, m.Name, err)
		}
		if ran {
			done = append(done, m.Version)
		}
	}
	return done, nil
}

// applyBaseline runs base and records the migrations it stands for, in
// one transaction, if the database still has no migration applied inside
// it; it returns the versions recorded (none when another process
// migrated the database first). Migrations apply in order and revert
// newest first, so a database without the first one has none.
func applyBaseline(ctx context.Context, db DB, d Dialect, ms []Migration, base Baseline) ([]int, error) {
	i := slices.IndexFunc(ms, func(m Migration) bool { return m.Version == base.Version })
	if i < 0 {
		return nil, fmt.Errorf("migrate up: the baseline stands for migration %04d, which the files lack", base.Version)
	}
	ran, err := inTx(ctx, db, d, ms[0].Version, false, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, base.SQL); err != nil {
			return err
		}
		for _, m := range ms[:i+1] {
			if err := record(ctx, tx, d, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("migrate up: baseline %04d: %w", base.Version, err)
	}
	if !ran {
		return nil, nil
	}
	done := make([]int, 0, i+1)
	for _, m := range ms[:i+1] {
		done = append(done, m.Version)
	}
	return done, nil
}

// record writes m into the version table: applied now.
func record(ctx context.Context, tx *sql.Tx, d Dialect, m Migration) error {
	q := fmt.Sprintf("INSERT INTO %s (version, name, applied_at) VALUES (%s, %s, %s)",
		Table, d.Bind(1), d.Bind(2), d.NowMicros)
	_, err := tx.ExecContext(ctx, q, m.Version, m.Name)
	return err
}

// Down reverts the last steps applied migrations, newest first, each in
// its own transaction, and returns the versions it reverted.
func Down(ctx context.Context, db DB, fsys fs.FS, d Dialect, steps int) ([]int, error) {
	if steps <= 0 {
		return nil, fmt.Errorf("migrate down: steps must be positive, got %d", steps)
	}
	ms, err := Load(fsys)
	if err != nil {
		return nil, err
	}
	applied, err := appliedVersions(ctx, db, d)
	if err != nil {
		return nil, fmt.Errorf("migrate down: %w", err)
	}
	if err := checkKnown(ms, applied); err != nil {
		return nil, fmt.Errorf("migrate down: %w", err)
	}
	var done []int
	for i := len(ms) - 1; i >= 0 && len(done) < steps; i-- {
		m := ms[i]
		if _, ok := applied[m.Version]; !ok {
			continue
		}
		if !m.HasDown {
			return done, fmt.Errorf("migrate down: %04d_%s has no down file", m.Version, m.Name)
		}
		ran, err := inTx(ctx, db, d, m.Version, true, func(tx *sql.Tx) error {
			if strings.TrimSpace(m.Down) != "" {
				if _, err := tx.ExecContext(ctx, m.Down); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE version = %s", Table, d.Bind(1)), m.Version)
			return err
		})
		if err != nil {
			return done, fmt.Errorf("migrate down: %04d_%s: %w", m.Version, m.Name, err)
		}
		if ran {
			done = append(done, m.Version)
		}
	}
	return done, nil
}

// Status returns every migration, known or applied, in version order. It
// only reads: a database without the version table has every migration
// pending.
func Status(ctx context.Context, db DB, fsys fs.FS, d Dialect) ([]State, error) {
	ms, err := Load(fsys)
	if err != nil {
		return nil, err
	}
	applied := map[int]appliedRow{}
	has, err := hasTable(ctx, db, d)
	if err != nil {
		return nil, fmt.Errorf("migrate status: %w", err)
	}
	if has {
		if applied, err = readApplied(ctx, db); err != nil {
			return nil, fmt.Errorf("migrate status: %w", err)
		}
	}
	var out []State
	for _, m := range ms {
		s := State{Version: m.Version, Name: m.Name}
		if r, ok := applied[m.Version]; ok {
			s.Applied, s.AppliedAt = true, r.at
			delete(applied, m.Version)
		}
		out = append(out, s)
	}
	for v, r := range applied {
		out = append(out, State{Version: v, Name: r.name, Applied: true, AppliedAt: r.at, Unknown: true})
	}
	slices.SortFunc(out, func(a, b State) int { return a.Version - b.Version })
	return out, nil
}

type appliedRow struct {
	name string
	at   time.Time
}

func appliedVersions(ctx context.Context, db DB, d Dialect) (map[int]appliedRow, error) {
	create := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)", Table)
	if _, err := db.ExecContext(ctx, create); err != nil {
		return nil, err
	}
	return readApplied(ctx, db)
}

// hasTable reports whether the version table exists.
func hasTable(ctx context.Context, db DB, d Dialect) (bool, error) {
	rows, err := db.QueryContext(ctx, d.HasTable, Table)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	n := 0
	if rows.Next() {
		if err := rows.Scan(&n); err != nil {
			return false, err
		}
	}
	return n > 0, rows.Err()
}

// readApplied reads the version table.
func readApplied(ctx context.Context, db DB) (map[int]appliedRow, error) {
	rows, err := db.QueryContext(ctx, fmt.Sprintf("SELECT version, name, applied_at FROM %s", Table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int]appliedRow{}
	for rows.Next() {
		var v int
		var r appliedRow
		var at int64
		if err := rows.Scan(&v, &r.name, &at); err != nil {
			return nil, err
		}
		r.at = time.UnixMicro(at).UTC()
		out[v] = r
	}
	return out, rows.Err()
}

func checkKnown(ms []Migration, applied map[int]appliedRow) error {
	for v, r := range applied {
		if !slices.ContainsFunc(ms, func(m Migration) bool { return m.Version == v }) {
			return fmt.Errorf("%w: %04d_%s", ErrUnknownVersion, v, r.name)
		}
	}
	return nil
}

// inTx runs fn in a transaction if, checked inside that transaction, the
// version's applied state is still wantApplied; it reports whether fn ran.
func inTx(ctx context.Context, db DB, d Dialect, version int, wantApplied bool, fn func(*sql.Tx) error) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var n int
	q := fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE version = %s", Table, d.Bind(1))
	if err := tx.QueryRowContext(ctx, q, version).Scan(&n); err != nil {
		return false, err
	}
	if (n > 0) != wantApplied {
		return false, nil // someone else got there first
	}
	if err := fn(tx); err != nil {
		return false, err
	}
	return true, tx.Commit()
}
