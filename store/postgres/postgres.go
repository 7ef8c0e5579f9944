// Package postgres is the PostgreSQL store of Hephaestus: many engine and
// worker processes on many machines share one database, and PostgreSQL
// is their coordination engine.
//
// Every table lives in one schema (Config.Schema, "heph" by default),
// created and upgraded by embedded migrations when the store is opened.
// Processes that open the store at the same time take turns through an
// advisory lock, so they never race on the schema.
//
// # Apply: one transaction, few round trips, few statements
//
// Apply commits all its changes in one READ COMMITTED transaction (group
// commit). It locks the rows of the runs it updates (SELECT … ORDER BY id
// FOR UPDATE, so concurrent Applies of many processes on one run
// serialize, and in an order that cannot deadlock) and the tasks their
// fences name (a fence may name a task of any run, and may fence a create),
// and reads the idempotency keys (Change.Key) of its keyed changes that
// the history of their runs holds, in one round trip: the key lookup
// follows the locks, so it sees what their previous holders committed. It
// then checks the fences and keys and calls the Decide functions in
// memory, and writes the changes set-based, whatever their number: one
// statement deletes the fenced tasks, cancels tasks, updates the runs
// (each once, to its last state), appends the history (one row per
// change: see "The history" below) and enqueues the tasks of all the
// updates; another
// inserts all the new runs with their history and tasks, and deletes the
// tasks that fence them (ON CONFLICT DO NOTHING: a run whose id or
// business key is taken writes nothing and leaves its fence). Consecutive
// changes that depend on each other in a way these statements would not
// keep (an update of a run created earlier in the batch, a cancellation of
// tasks enqueued earlier in the batch or of a task that fences an earlier
// create, a change fenced by the task of an earlier create, a business key
// freed after a create that takes it) are split into successive pairs of
// statements. The writes, the claims and COMMIT go as one pipeline: an
// Apply that reads takes two round trips. When the last writes create
// runs, COMMIT waits for a third, so that the holders of taken business
// keys can be looked up first.
//
// Most Applies need not read: the runs they update are as this store last
// wrote them (a worker completes the step its previous commit enqueued),
// and the tasks that fence them are the ones it claimed. The store keeps
// those (a bounded cache, known.go): each run it wrote with a task ready
// at once, with the id of the transaction that wrote its row (its xmin),
// and each lease as claimed. (A run left waiting is not kept: waiting runs
// cost no memory.) An
// Apply whose changes all have what they read there, and are each refused
// when applied twice (a create, a fenced or a keyed change; see "The
// outcome of a commit"), decides them against it and sends everything in
// one round trip: its first statement locks the same rows in the same
// order and checks, under the locks, that each run's xmin and each task's
// token are as taken and that no key is in the history yet; a create that
// meets a conflict fails the transaction too (the check after the creates
// statement). A failed check raises SQLSTATE HEPH1 (function fresh(),
// migration 0003), which skips the rest, COMMIT included; the Apply rolls
// back and runs again the way that reads. A stale guess costs a round trip
// and a rollback, never a wrong write. Measured on one-step completions,
// the guess saves 8-10 % (docs/benchmarks.md): a round trip on a local
// server is about 15 µs, a commit's flush about 200 µs.
//
// A refused change (lease lost,
// duplicate key, run not found, Decide error, duplicate business id)
// writes nothing. Should a statement fail anyway (say, JSON that jsonb
// refuses), the transaction is rolled back and the changes are applied
// again one by one, each in a savepoint of its own, so that only the
// failing change is refused.
//
// The transaction disables sequential scans (and, for claims, sorts): its
// statements reach rows by key, and their plans must not depend on
// statistics, which for a queue are often stale or missing. It also
// forces generic plans: PostgreSQL would otherwise plan these statements
// afresh for each execution's arrays, which costs more than running them
// (about half of a one-step completion, before this was set).
//
// # The outcome of a commit
//
// A transaction that fails before its COMMIT is sent, or one of whose
// statements the server refused (it then skips the rest of the pipeline,
// COMMIT included), did not commit; Apply runs it again (Decide functions
// may be called more than once) after deadlocks and connection failures, a
// few times. When COMMIT was sent and its answer was lost with the
// connection, Apply finds out: the first statements of a transaction with
// changes also read its id (txid_current(), at no cost in round trips),
// and Apply asks txid_status of it on another connection. (A guessed
// transaction learns its id in the same answer as COMMIT's: when no answer
// at all comes back, Apply fails with its outcome unknown, and leaves the
// changes, each of which is refused if applied twice, to the caller.) A transaction
// that committed is reported as applied, with its results, which are
// complete when every answer before COMMIT's was read (or else Apply
// returns an error that says the changes committed but their results were
// lost, and does not run them again); one that was aborted runs again, as
// above. One still in progress belongs to a backend that has not noticed
// yet that its client is gone: Apply asks again, and after a second
// terminates that backend (if it still runs the transaction), which
// settles the outcome. When the database does not answer within
// Config.Timeout, the outcome stays unknown and Apply returns the error
// without running the changes again, so that a change is never applied
// twice; the runtime's fencing and keys make the retry of a change that
// did commit a harmless no-op. (An Apply of claims alone, which the
// runtime sends while idle, takes no transaction id: that would cost it a
// commit record; the outcome of its lost COMMIT stays unknown, and the
// leases it may have taken expire.)
//
// # Notifications
//
// A commit that enqueued tasks ready at once (and did not lease them
// itself) sends pg_notify(channel, queue) once per queue, right after its
// COMMIT in the same pipeline, in a transaction of its own that writes
// nothing (a transaction that notifies holds a database-wide lock from its
// commit to its end: held across the flush of a commit that writes, it
// would queue every notifying commit behind the others' flushes); Listen (store.Notifier) receives them on a connection of its
// own. The channel is the schema's name followed by "_tasks" (Channel).
// (When COMMIT goes with the writes, before the claims' outcome is known, a
// queue is notified when it gets more ready tasks than the claims of the
// commit may lease.) A commit whose cancellations (Update.Cancel) deleted
// leased tasks, that is tasks with an owner (a holder whose lease expired
// may still be running its task), sends the run's id on a second channel,
// the schema's name followed by "_lost" (CancelChannel), once per run:
// the statement that cancels tasks notifies from what it deleted, so a
// commit that cancels no leased task pays nothing. The task that fences a
// change is its holder's to complete, and is not notified. Listen listens
// on both channels.
//
// # The history
//
// The entries one change appends to a run are one row of the history
// table (migration 0004): a start's run_started and step_scheduled, a
// completion's step_started, step_completed and what it schedules next
// are written, read and deleted together, so each entry after a change's
// first costs no heap tuple, primary-key entry or WAL record of its own. A
// row holds the entries seq .. seq+n-1 as a JSON array (text: SQL never
// looks inside it) of [kind, step, index, attempt, name, error, data?],
// and the change's idempotency key, unique per run (history_key). History
// reads the rows and returns the entries one by one. Measured with bench's
// bytes workload: a finished one-step flow run went from 2,431 to 1,734
// bytes, a workflow run from 2,782 to 1,675, and a job from 28 to 22 WAL
// records (docs/benchmarks.md).
//
// # JSON
//
// JSON values (inputs, outputs, states, payloads) are stored as jsonb:
// they come back equal in value, not in bytes (keys sorted, spaces added,
// duplicate keys collapsed). jsonb refuses the escape \u0000 in strings,
// and text refuses NUL bytes: a change that carries them is refused, with
// PostgreSQL's error, and the others of its batch apply. History data is
// kept as written (a change whose entry data is not JSON is refused alone,
// naming the entry).
//
// # Connection failures
//
// Every method bounds its work by Config.Timeout, so a connection that
// died without a word fails the call instead of hanging it; the pool
// replaces broken connections on the next call.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded schema migrations, for tools that show
// or run them (Open applies them itself). They name tables without a
// schema: run them with search_path set to the store's schema, as
// WithMigrationLock does.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the directory is embedded; it exists
	}
	return sub
}

// Config configures Open.
type Config struct {
	// DSN is the connection string, as a URL
	// ("postgres://user@host:5432/db?sslmode=disable") or as key=value
	// pairs ("host=… dbname=…"). Required.
	DSN string
	// Schema is the PostgreSQL schema that holds every table of the
	// store; it is created when missing. Several stores can share a
	// database under different schemas. A lower-case identifier: a letter
	// or "_", then letters, digits or "_", at most 57 bytes, not starting
	// with "pg_". Defaults to "heph".
	Schema string
	// MaxConns is the size of the pool of connections for queries.
	// Defaults to 16. Listen holds one more connection of its own.
	MaxConns int
	// MinConns is how many connections the pool keeps open: Open opens
	// them before it returns, and the pool opens a new one in the
	// background when one is closed (idle or too old). A connection takes
	// a PostgreSQL server tens of milliseconds to open (a new backend
	// process), so a pool that grows on demand makes the first requests of
	// a busy moment wait for that; `heph server` keeps 8. At most MaxConns.
	// A pool_min_conns parameter in DSN, when there is one, wins.
	// Defaults to 0: connections are opened when needed.
	MinConns int
	// SkipMigrations, when true, keeps Open from applying the embedded
	// migrations: it then only checks that the schema is up to date and
	// fails if it is not (apply them with `heph migrate up`). Defaults to
	// false: Open applies pending migrations, under an advisory lock.
	SkipMigrations bool
	// Timeout bounds every call to the database made by a method of the
	// store (Listen excepted, which reconnects by itself), so that a
	// connection that died silently fails the call rather than hanging it.
	// A context with an earlier deadline wins. Defaults to 1 minute.
	Timeout time.Duration
	// ConnectTimeout bounds the opening of a connection when the DSN does
	// not set connect_timeout. Defaults to 10 seconds.
	ConnectTimeout time.Duration
	// VacuumTasksEvery is how many tasks this store deletes (completes,
	// cancels) between two VACUUMs of the task table that it runs in the
	// background. A queue table is all dead rows within minutes: each one
	// left in its indexes is walked over by every claim, until a VACUUM
	// removes it, and without one claims (and so every run) slow down as
	// the history grows. Autovacuum does it too, when it is on and gets to
	// it; the store does not rely on it. The VACUUM skips the table when
	// another holds it (SKIP_LOCKED), and does not truncate it (a queue
	// grows back). Defaults to 20,000; -1 disables it.
	VacuumTasksEvery int
	// TransactionPooling says that DSN reaches the server through a
	// connection pooler in transaction mode (PgBouncer's pool_mode =
	// transaction), which hands each transaction, and each statement
	// outside one, to any server connection: nothing may live on a
	// pooled connection beyond its transaction. The store then uses no
	// named prepared statements (each statement is sent with its
	// arguments, pgx.QueryExecModeExec), and keeps what needs a session
	// of its own off the pool: the migrations (a session lock, a
	// search_path) and Listen (LISTEN) use DirectDSN. Without DirectDSN,
	// SkipMigrations must be set (run `heph migrate up` against the
	// server) and Listen delivers nothing until ctx ends: workers find
	// tasks at their poll interval (docs/deployment.md, PgBouncer).
	TransactionPooling bool
	// DirectDSN is a connection string of the server itself, not of a
	// pooler: used, with TransactionPooling, for the migrations and for
	// Listen. Ignored without TransactionPooling.
	DirectDSN string
	// QueryTracer, when set, traces the queries and batches of the
	// store's pool (pgx's hook: a tracer of SQL spans such as otelpgx, or
	// a counter of round trips, as the capacity benchmark uses).
	QueryTracer pgx.QueryTracer
}

// Store is a store.Store (and a store.Notifier) on PostgreSQL. Its methods
// are safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	conn    *pgx.ConnConfig // for Listen; nil: poll only (TransactionPooling without DirectDSN)
	schema  string
	channel string // tasks ready, by queue
	cancels string // leased tasks cancelled, by run
	timeout time.Duration
	q       queries
	acc     *accessQueries
	rc      *remoteClaimQueries
	// typedArrays: the pool's connections describe their statements, so
	// array arguments may take the types of arrays.go.
	typedArrays bool
	// suspect is when (Unix nanoseconds) the pool stops checking its
	// connections before use; see noteFailure.
	suspect *atomic.Int64
	// applyConc is how many Apply calls a runtime should run at once.
	applyConc int
	// known is what Apply takes the rows it writes to be, to write them
	// without reading them first.
	known *known
	// deleted counts the tasks deleted since the last VACUUM of the task
	// table, which runs in the background (vacuuming) once it reaches
	// vacuumEvery (0: never); bg waits for it on Close.
	deleted     atomic.Int64
	vacuumEvery int64
	vacuuming   atomic.Bool
	bg          sync.WaitGroup

	// ctx ends when the store is closed: it stops Listen.
	ctx       context.Context
	stop      context.CancelFunc
	mu        sync.Mutex // orders Listen's start with Close
	listeners sync.WaitGroup

	closed    atomic.Bool
	closeOnce sync.Once
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// Open connects to the database cfg describes and, unless
// cfg.SkipMigrations is set, creates or upgrades the schema.
func Open(ctx context.Context, cfg *Config) (*Store, error) {
	return open(ctx, cfg, nil)
}

// open is Open with a hook that adjusts the pool's configuration (tests
// count round trips with a tracer).
func open(ctx context.Context, cfg *Config, tune func(*pgxpool.Config)) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pcfg, err := poolConfig(&c)
	if err != nil {
		return nil, err
	}
	// After a connection failure, check the pooled connections before
	// use for a while: when the server restarted, they are all dead, and
	// each would otherwise fail one call.
	suspect := new(atomic.Int64)
	pcfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration > time.Second || time.Now().UnixNano() < suspect.Load()
	}
	if tune != nil {
		tune(pcfg)
	}
	// direct is a session of its own: the migrations', Listen's.
	direct := pcfg.ConnConfig
	if c.TransactionPooling {
		direct = nil
		if c.DirectDSN != "" {
			dcfg, err := pgx.ParseConfig(c.DirectDSN)
			if err != nil {
				return nil, fmt.Errorf("postgres: Config.DirectDSN cannot be parsed: %w", redact(err))
			}
			if dcfg.ConnectTimeout == 0 {
				dcfg.ConnectTimeout = c.ConnectTimeout
			}
			if dcfg.RuntimeParams["application_name"] == "" {
				dcfg.RuntimeParams["application_name"] = pcfg.ConnConfig.RuntimeParams["application_name"]
			}
			direct = dcfg
		}
	}
	switch {
	case c.SkipMigrations:
		cc := direct
		if cc == nil {
			cc = pcfg.ConnConfig // a check reads; it keeps nothing on the session
		}
		err = checkMigrated(ctx, cc, c.Schema)
	case direct == nil:
		err = errors.New("Config.TransactionPooling without Config.DirectDSN needs Config.SkipMigrations: migrations hold a session lock, which a pooler in transaction mode cannot keep (run `heph migrate up` against the server, or set DirectDSN)")
	default:
		err = withMigrationLock(ctx, direct, c.Schema, func(ctx context.Context, conn *sql.Conn) error {
			_, err := migrate.Up(ctx, conn, Migrations(), migrate.Postgres)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s := &Store{
		pool: pool, conn: direct, schema: c.Schema, channel: channelName(c.Schema),
		cancels: cancelChannelName(c.Schema), timeout: c.Timeout, q: newQueries(c.Schema), acc: newAccessQueries(c.Schema), rc: newRemoteClaimQueries(c.Schema), suspect: suspect,
		applyConc: max(1, c.MaxConns/4), known: newKnown(), vacuumEvery: int64(max(0, c.VacuumTasksEvery)),
		typedArrays: describes(pcfg.ConnConfig),
	}
	var warm []string
	if !c.TransactionPooling {
		warm = s.statements()
	}
	if err := warmPool(ctx, pool, int(pcfg.MinConns), warm); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %d connections (Config.MinConns): %w", pcfg.MinConns, err)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s, nil
}

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (cfg *Config) withDefaults() (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	var errs []error
	if c.DSN == "" {
		errs = append(errs, errors.New("postgres: Config.DSN is required"))
	}
	if c.Schema == "" {
		c.Schema = "heph"
	}
	if err := validSchema(c.Schema); err != nil {
		errs = append(errs, fmt.Errorf("postgres: Config.Schema: %w", err))
	}
	switch {
	case c.MaxConns < 0:
		errs = append(errs, fmt.Errorf("postgres: Config.MaxConns must not be negative, got %d", c.MaxConns))
	case c.MaxConns == 0:
		c.MaxConns = 16
	}
	switch {
	case c.MinConns < 0:
		errs = append(errs, fmt.Errorf("postgres: Config.MinConns must not be negative, got %d", c.MinConns))
	case c.MinConns > c.MaxConns:
		errs = append(errs, fmt.Errorf("postgres: Config.MinConns (%d) must not be more than MaxConns (%d)", c.MinConns, c.MaxConns))
	}
	switch {
	case c.Timeout < 0:
		errs = append(errs, fmt.Errorf("postgres: Config.Timeout must not be negative, got %v", c.Timeout))
	case c.Timeout == 0:
		c.Timeout = time.Minute
	}
	switch {
	case c.VacuumTasksEvery < -1:
		errs = append(errs, fmt.Errorf("postgres: Config.VacuumTasksEvery must be -1 (never) or more, got %d", c.VacuumTasksEvery))
	case c.VacuumTasksEvery == 0:
		c.VacuumTasksEvery = 20000
	}
	switch {
	case c.ConnectTimeout < 0:
		errs = append(errs, fmt.Errorf("postgres: Config.ConnectTimeout must not be negative, got %v", c.ConnectTimeout))
	case c.ConnectTimeout == 0:
		c.ConnectTimeout = 10 * time.Second
	}
	return c, errors.Join(errs...)
}

func validSchema(s string) error {
	switch {
	case !schemaRE.MatchString(s):
		return fmt.Errorf("%q is not a lower-case identifier (a letter or _, then letters, digits or _)", s)
	case len(s) > 57:
		return fmt.Errorf("%q is longer than 57 bytes", s)
	case strings.HasPrefix(s, "pg_"):
		return fmt.Errorf("%q starts with pg_, which PostgreSQL reserves", s)
	}
	return nil
}

// channelName is the channel of a schema's notifications of ready tasks.
func channelName(schema string) string { return schema + "_tasks" }

// cancelChannelName is the channel of a schema's notifications of
// cancelled leased tasks. (A channel name has at most 63 bytes, and a
// schema's 57: hence short suffixes.)
func cancelChannelName(schema string) string { return schema + "_lost" }

func poolConfig(c *Config) (*pgxpool.Config, error) {
	pcfg, err := pgxpool.ParseConfig(c.DSN)
	if err != nil {
		// The error may quote the DSN, password included: keep only its kind.
		return nil, fmt.Errorf("postgres: Config.DSN cannot be parsed: %w", redact(err))
	}
	pcfg.MaxConns = int32(c.MaxConns)
	if !strings.Contains(c.DSN, "pool_min_conns") {
		pcfg.MinConns = int32(c.MinConns)
	}
	if pcfg.MinConns > pcfg.MaxConns {
		return nil, fmt.Errorf("postgres: %d connections to keep open (pool_min_conns or Config.MinConns) is more than MaxConns (%d)", pcfg.MinConns, pcfg.MaxConns)
	}
	if c.QueryTracer != nil {
		pcfg.ConnConfig.Tracer = c.QueryTracer
	}
	if c.TransactionPooling {
		// No named prepared statements: the next statement may reach
		// another server connection, which does not have them.
		pcfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = c.ConnectTimeout
	}
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "hephaestus"
	}
	return pcfg, nil
}

// redact drops the text of a DSN parse error, which may contain the
// password, and keeps what is wrong.
func redact(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return pe.Unwrap()
	}
	return errors.New("invalid connection string")
}

// Channel returns the name of the channel the store notifies ready tasks
// on (the payload is the queue).
func (s *Store) Channel() string { return s.channel }

// CancelChannel returns the name of the channel the store notifies
// cancelled leased tasks on (the payload is the run's id).
func (s *Store) CancelChannel() string { return s.cancels }

// Schema returns the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Close closes the pool and stops Listen. It is safe to call more than
// once; the other methods then return store.ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed.Store(true)
		s.mu.Unlock()
		s.stop()
		s.listeners.Wait()
		s.bg.Wait()
		s.pool.Close()
	})
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
	s.noteFailure(err)
	return fmt.Errorf("%s: %w", op, err)
}

// noteFailure makes the pool ping its connections before handing them out
// for the next seconds when err says that connections may be dead.
func (s *Store) noteFailure(err error) {
	if transient(err) {
		s.suspect.Store(time.Now().Add(2 * time.Second).UnixNano())
	}
}

// bound applies Config.Timeout to ctx.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// idempotent runs fn, once more after a transient failure: for reads and
// for writes that may safely run twice.
func (s *Store) idempotent(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err := fn(ctx)
	if err != nil && ctx.Err() == nil && transient(err) && s.check() == nil {
		s.noteFailure(err)
		err = fn(ctx)
	}
	return err
}

// once runs fn once, or again only when the failure happened before
// anything was sent: for writes whose outcome is otherwise unknown.
func (s *Store) once(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err := fn(ctx)
	if err != nil && ctx.Err() == nil && pgconn.SafeToRetry(err) && s.check() == nil {
		s.noteFailure(err)
		err = fn(ctx)
	}
	return err
}

// transient reports whether err is a failure after which a transaction
// that did not commit may run again with a chance of success: a broken
// connection, a server shutting down or starting, a deadlock.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"57P01", // admin_shutdown (pg_terminate_backend, fast shutdown)
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now (starting up, shutting down)
			"53300": // too_many_connections
			return true
		}
		return strings.HasPrefix(pe.Code, "08") // connection_exception
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// withMigrationLock runs fn on one connection, with the schema created,
// search_path set to it and the store's advisory migration lock held.
func withMigrationLock(ctx context.Context, cc *pgx.ConnConfig, schema string, fn func(ctx context.Context, conn *sql.Conn) error) (err error) {
	db := stdlib.OpenDB(*cc)
	defer func() {
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	// A session lock: released below, or when the connection closes.
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", lockKey(schema)); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_, _ = conn.ExecContext(uctx, "SELECT pg_advisory_unlock($1)", lockKey(schema))
	}()
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.ExecContext(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	if _, err := conn.ExecContext(ctx, "SET search_path TO "+ident); err != nil {
		return fmt.Errorf("set search_path: %w", err)
	}
	return fn(ctx, conn)
}

// WithMigrationLock connects to the database cfg describes (cfg.DSN and
// cfg.Schema count) and runs fn on one connection, with the schema
// created, search_path set to it, and the advisory lock held that Open
// takes to migrate: so fn can run the migrations (Migrations) by hand, as
// `heph migrate` does, without racing a process that opens the store.
func WithMigrationLock(ctx context.Context, cfg *Config, fn func(ctx context.Context, conn *sql.Conn) error) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	pcfg, err := poolConfig(&c)
	if err != nil {
		return err
	}
	if err := withMigrationLock(ctx, pcfg.ConnConfig, c.Schema, fn); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// lockKey is the advisory lock that serializes migrations of a schema.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("hephaestus migrate " + schema))
	return int64(h.Sum64())
}

// checkMigrated fails unless every embedded migration is applied, and no
// unknown one.
func checkMigrated(ctx context.Context, cc *pgx.ConnConfig, schema string) error {
	ms, err := migrate.Load(Migrations())
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var table *string
	q := "SELECT to_regclass($1)::text"
	if err := conn.QueryRow(ctx, q, pgx.Identifier{schema, migrate.Table}.Sanitize()).Scan(&table); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if table == nil {
		return fmt.Errorf("schema %s is not migrated (Config.SkipMigrations is set): run `heph migrate up`", schema)
	}
	rows, err := conn.Query(ctx, "SELECT version FROM "+pgx.Identifier{schema, migrate.Table}.Sanitize())
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	for _, v := range applied {
		if !slices.ContainsFunc(ms, func(m migrate.Migration) bool { return m.Version == v }) {
			return fmt.Errorf("schema %s: %w: %04d", schema, migrate.ErrUnknownVersion, v)
		}
	}
	for _, m := range ms {
		if !slices.Contains(applied, m.Version) {
			return fmt.Errorf("schema %s lacks migration %04d_%s (Config.SkipMigrations is set): run `heph migrate up`", schema, m.Version, m.Name)
		}
	}
	return nil
}

var _ store.ConcurrentApplier = (*Store)(nil)

// ApplyConcurrency tells runtimes to run a quarter of the pool's
// connections' worth of Apply calls at once (4 by default): rows are locked
// in id order, so concurrent batches do not deadlock, and one commit's
// fsync overlaps the next batch's work.
func (s *Store) ApplyConcurrency() int { return s.applyConc }

// tasksDeleted counts n tasks deleted and, once VacuumTasksEvery were,
// starts a VACUUM of the task table in the background (one at a time).
func (s *Store) tasksDeleted(n int) {
	if s.vacuumEvery == 0 || n == 0 || s.deleted.Add(int64(n)) < s.vacuumEvery || !s.vacuuming.CompareAndSwap(false, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return
	}
	s.deleted.Store(0)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.vacuuming.Store(false)
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
		defer cancel()
		// An error (the store closed, the table locked by another VACUUM,
		// lost connection) leaves it to the next one.
		_, _ = s.pool.Exec(ctx, s.q.vacuumTasks, pgx.QueryExecModeSimpleProtocol)
	}()
}
