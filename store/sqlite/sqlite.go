// Package sqlite is the embedded store of Hephaestus: one SQLite file in
// WAL mode, opened with the pure-Go driver modernc.org/sqlite (no cgo).
//
// The store keeps two pools over the file: a single writer connection,
// through which every write transaction goes (SQLite allows one writer at a
// time, so queueing in the process is cheaper than retrying on
// SQLITE_BUSY), and a pool of read-only connections (PRAGMA query_only)
// for GetRun, ListRuns, History and the like. In WAL mode readers see the
// last committed state and never wait for the writer, so reads do not
// queue behind writes. The schema is created and upgraded by embedded
// migrations when the store is opened.
//
// Apply commits all its changes in one transaction (group commit). A
// change is refused, if at all, before it writes anything, so a refused
// change needs no savepoint to be undone alone: its fence (a lease on a
// task of any run) and its idempotency key are checked before it writes,
// the key against the run's history (an index holds the keyed entries)
// and against the keys the earlier changes of the Apply recorded. Decide
// functions run while that transaction holds the writer: they must not
// call the store. A task's lease token grows by one at every claim, so
// tokens never repeat for a task, even with several processes on one
// file.
//
// The writer runs its statements on the driver connection directly and
// keeps the runs it changed last in memory, so that the next change of a
// run is decided without reading it back; a commit by another connection
// to the file (another process) empties that cache.
//
// # Durability: Synchronous FULL or NORMAL
//
// With Synchronous "FULL" (the default) SQLite fsyncs the WAL at every
// commit: a transaction that Apply reported committed survives a power
// loss or an operating-system crash. With "NORMAL" the WAL is fsynced only
// at checkpoints: commits are much cheaper, a crash of the process still
// loses nothing (the data is in the operating system's page cache), but a
// power loss or OS crash can roll back the last transactions — the
// database stays consistent, yet a step recorded as completed may run
// again and a run reported started may be gone. Group commit (many
// changes per Apply) amortizes the fsync of FULL; prefer it to NORMAL
// unless losing the last moments of work is acceptable.
//
// # Memory mode
//
// Config.Memory opens a private in-memory database, for tests. It lives
// as long as the store and uses one connection for reads and writes, so in
// this mode reads do queue behind writes.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// baselineFile is what the migrations build in a new database, as one
// script (migrate.Baseline): its first line names the last migration it
// stands for. TestSchemaBaseline proves the two build the same database,
// and its -update flag writes the file again after a new migration.
//
//go:embed baseline.sql
var baselineFile string

// baseline returns baselineFile as a migrate.Baseline.
func baseline() (migrate.Baseline, error) {
	first, _, _ := strings.Cut(baselineFile, "\n")
	var v int
	if _, err := fmt.Sscanf(first, baselineHeader, &v); err != nil || v <= 0 {
		return migrate.Baseline{}, fmt.Errorf("the embedded baseline.sql does not start with %q: %q", baselineHeader, first)
	}
	return migrate.Baseline{Version: v, SQL: baselineFile}, nil
}

// baselineHeader is the first line of baseline.sql.
const baselineHeader = "-- the schema of migrations 1 to %d, for a new database (go test -run TestSchemaBaseline -update writes it)"

// Migrations returns the embedded schema migrations, for tools that show
// or run them (Open applies them itself).
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the directory is embedded; it exists
	}
	return sub
}

// Config configures Open.
type Config struct {
	// Path is the database file, created when missing. Required unless
	// Memory is set.
	Path string
	// Memory opens a new, private in-memory database instead of a file;
	// Path must then be empty. Meant for tests.
	Memory bool
	// Synchronous is "FULL" or "NORMAL" (case-insensitive): see the
	// package documentation for the trade-off. Defaults to "FULL".
	Synchronous string
	// BusyTimeout is how long a statement waits for a lock held by another
	// process on the same file before it fails. Defaults to 5 seconds.
	BusyTimeout time.Duration
	// ReadConns is the number of read-only connections. Defaults to 4.
	// Ignored in Memory mode.
	ReadConns int
}

// Store is a store.Store on SQLite. Its methods are safe for concurrent
// use.
type Store struct {
	writer *sql.DB
	reader *readDB // on the writer's pool in Memory mode
	wc     wconn   // the writer's driver connection and statements
	r      readStmts
	// broadRows is how many rows make a search attribute condition broad
	// (where.attr); tests lower it to take the other plan.
	broadRows int

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) and migrates the database cfg describes.
func Open(ctx context.Context, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{broadRows: defaultBroadRows}
	if err := s.open(ctx, &c); err != nil {
		_ = s.closeDBs()
		return nil, err
	}
	return s, nil
}

func (cfg *Config) withDefaults() (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	switch {
	case c.Memory && c.Path != "":
		return c, errors.New("sqlite: Config.Path must be empty when Config.Memory is set")
	case !c.Memory && c.Path == "":
		return c, errors.New("sqlite: Config.Path is required (or set Config.Memory)")
	}
	switch strings.ToUpper(c.Synchronous) {
	case "":
		c.Synchronous = "FULL"
	case "FULL", "NORMAL":
		c.Synchronous = strings.ToUpper(c.Synchronous)
	default:
		return c, fmt.Errorf("sqlite: Config.Synchronous must be \"FULL\" or \"NORMAL\", got %q", c.Synchronous)
	}
	switch {
	case c.BusyTimeout < 0:
		return c, fmt.Errorf("sqlite: Config.BusyTimeout must not be negative, got %v", c.BusyTimeout)
	case c.BusyTimeout == 0:
		c.BusyTimeout = 5 * time.Second
	}
	switch {
	case c.ReadConns < 0:
		return c, fmt.Errorf("sqlite: Config.ReadConns must not be negative, got %d", c.ReadConns)
	case c.ReadConns == 0:
		c.ReadConns = 4
	}
	return c, nil
}

func (s *Store) open(ctx context.Context, c *Config) error {
	// Query parameters starting with "_" are read by the driver; SQLite
	// ignores them.
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(c.BusyTimeout.Milliseconds(), 10))
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", c.Synchronous)
	// Savepoint journals and temporary b-trees stay in memory.
	q.Add("_pragma", "temp_store(MEMORY)")
	var base string
	if c.Memory {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		base = "file:heph-" + hex.EncodeToString(b[:])
		q.Set("mode", "memory")
		q.Set("cache", "shared")
	} else {
		base = "file:" + escapePath(c.Path)
		q.Set("_journal_mode", "WAL")
	}
	// BEGIN IMMEDIATE: take the write lock at the start of a transaction,
	// so another process's writer makes it wait (busy timeout) instead of
	// failing it at its first write.
	q.Set("_txlock", "immediate")

	var err error
	s.writer, err = sql.Open("sqlite", base+"?"+q.Encode())
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	s.writer.SetMaxOpenConns(1)
	s.writer.SetMaxIdleConns(1)
	s.writer.SetConnMaxLifetime(0)
	s.writer.SetConnMaxIdleTime(0)
	if !c.Memory {
		var mode string
		if err := s.writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			return fmt.Errorf("sqlite: open %s: %w", c.Path, err)
		}
		if !strings.EqualFold(mode, "wal") {
			return fmt.Errorf("sqlite: open %s: journal mode is %q, could not switch to WAL", c.Path, mode)
		}
	}
	schema, err := baseline()
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if _, err := migrate.UpFrom(ctx, s.writer, Migrations(), migrate.SQLite, schema); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}

	if c.Memory {
		s.reader = newReadDB(s.writer)
	} else {
		rq := url.Values{}
		rq.Set("_busy_timeout", q.Get("_busy_timeout"))
		rq.Set("_query_only", "1")
		rdb, err := sql.Open("sqlite", base+"?"+rq.Encode())
		if err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
		rdb.SetMaxOpenConns(c.ReadConns)
		rdb.SetMaxIdleConns(c.ReadConns)
		rdb.SetConnMaxLifetime(0)
		rdb.SetConnMaxIdleTime(0)
		s.reader = newReadDB(rdb)
	}
	if err := s.syncCaptureAfterMigrate(ctx); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	if err := s.withWriter(ctx, (*wconn).prepareAll); err != nil {
		return fmt.Errorf("sqlite: prepare: %w", err)
	}
	if err := s.r.prepare(ctx, s.reader.DB); err != nil {
		return fmt.Errorf("sqlite: prepare: %w", err)
	}
	return nil
}

// escapePath makes a file path safe inside a file: URI.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

// Close closes the database. It is safe to call more than once; the other
// methods then return store.ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closeErr = s.closeDBs()
	})
	return s.closeErr
}

func (s *Store) closeDBs() error {
	var errs []error
	errs = append(errs, s.closeWriter(), s.r.close())
	if s.reader != nil {
		errs = append(errs, s.reader.closeStmts())
		if s.reader.DB != s.writer {
			errs = append(errs, s.reader.Close())
		}
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

// check returns store.ErrClosed after Close.
func (s *Store) check() error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return nil
}

// fail wraps err for the operation op, reporting store.ErrClosed when the
// store was closed under the call.
func (s *Store) fail(op string, err error) error {
	if s.closed.Load() && !errors.Is(err, store.ErrClosed) {
		err = store.ErrClosed
	}
	return fmt.Errorf("%s: %w", op, err)
}

// stmtSet prepares and closes a list of statements.
type stmtSet []struct {
	dst   **sql.Stmt
	query string
}

func (ss stmtSet) prepare(ctx context.Context, db *sql.DB) error {
	for _, s := range ss {
		st, err := db.PrepareContext(ctx, s.query)
		if err != nil {
			return fmt.Errorf("%w\n%s", err, s.query)
		}
		*s.dst = st
	}
	return nil
}

func (ss stmtSet) close() error {
	var errs []error
	for _, s := range ss {
		if *s.dst != nil {
			errs = append(errs, (*s.dst).Close())
		}
	}
	return errors.Join(errs...)
}
