package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
)

// The commit protocol: when the answer to COMMIT is lost with the
// connection, Apply asks the database whether the transaction committed,
// and reports a commit that happened as applied, and runs one that did
// not again. These tests lose the answer on purpose: a wrapper of the
// store's connections, armed for the next pipeline that holds COMMIT, cuts
// the connection at a chosen point of that pipeline's answers (or drops
// the pipeline before the server sees it), while the test terminates the
// backend.

// cut is where a faultConn cuts the connection.
type cut int

const (
	// Before the answer to COMMIT: the server committed, and the answers
	// to the statements before COMMIT arrive.
	cutBeforeCommit cut = iota + 1
	// After the answer to COMMIT, before the end of the pipeline.
	cutAfterCommit
	// Before any answer of the pipeline, once the server committed.
	cutAll
	// The pipeline never reaches the server; the test terminates the
	// backend, which rolls the transaction back.
	cutDrop
	// The pipeline never reaches the server, and the connection stays open
	// on the server's side: the backend, idle in its transaction, waits
	// for a client that is gone (a network partition).
	cutPartition
)

func (c cut) String() string {
	return [...]string{"", "before-commit", "after-commit", "all", "drop", "partition"}[c]
}

var errCut = errors.New("test: connection cut")

// faultConn passes everything through until it is armed; then it cuts
// the connection as its mode says.
type faultConn struct {
	net.Conn
	mu   sync.Mutex
	mode cut
	// kill terminates the backend (set when armed).
	kill func()
	// in holds bytes read from the server, not parsed yet; out, bytes
	// parsed and to be delivered. done: the cut point was reached.
	in, out []byte
	done    bool
}

func (c *faultConn) arm(mode cut, kill func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mode, c.kill = mode, kill
}

func (c *faultConn) armed() cut {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mode
}

func (c *faultConn) Write(b []byte) (int, error) {
	if m := c.armed(); m == cutDrop || m == cutPartition {
		return len(b), nil // lost on the way
	}
	return c.Conn.Write(b)
}

func (c *faultConn) Close() error {
	if c.armed() == cutPartition {
		return nil // the server's side stays open; closeReal closes it
	}
	return c.Conn.Close()
}

func (c *faultConn) closeReal() { c.Conn.Close() }

func (c *faultConn) Read(p []byte) (int, error) {
	mode := c.armed()
	switch mode {
	case 0:
		return c.Conn.Read(p)
	case cutDrop:
		c.kill()
		return 0, errCut
	case cutPartition:
		return 0, errCut
	}
	for {
		if len(c.out) > 0 {
			n := copy(p, c.out)
			c.out = c.out[n:]
			return n, nil
		}
		if c.done {
			c.kill()
			return 0, errCut
		}
		// Parse the complete messages read so far (a type byte, then a
		// length that counts itself).
		for !c.done && len(c.in) >= 5 {
			n := 1 + int(binary.BigEndian.Uint32(c.in[1:5]))
			if len(c.in) < n {
				break
			}
			msg := c.in[:n]
			c.in = c.in[n:]
			commit := msg[0] == 'C' && string(msg[5:]) == "COMMIT\x00"
			switch {
			case commit && mode == cutAfterCommit:
				c.out = append(c.out, msg...)
				c.done = true
			case commit:
				c.done = true
			case mode != cutAll:
				c.out = append(c.out, msg...)
			}
		}
		if len(c.out) > 0 || c.done {
			continue
		}
		buf := make([]byte, 8192)
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		if err != nil {
			return 0, err
		}
	}
}

// commitTracer arms the connection of the next batch that holds COMMIT,
// and counts those batches.
type commitTracer struct {
	mu      sync.Mutex
	mode    cut
	kill    func(pid uint32)
	armed   *faultConn
	commits atomic.Int64
}

func (tr *commitTracer) arm(mode cut, kill func(pid uint32)) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.mode, tr.kill = mode, kill
	tr.commits.Store(0)
}

func (tr *commitTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (tr *commitTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData)     {}
func (tr *commitTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (tr *commitTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (tr *commitTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	hasCommit := false
	for _, q := range data.Batch.QueuedQueries {
		hasCommit = hasCommit || q.SQL == "COMMIT"
	}
	if !hasCommit {
		return ctx
	}
	tr.commits.Add(1)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.mode != 0 {
		fc := conn.PgConn().Conn().(*faultConn)
		pid, kill := conn.PgConn().PID(), tr.kill
		fc.arm(tr.mode, sync.OnceFunc(func() { kill(pid) }))
		tr.mode, tr.armed = 0, fc
	}
	return ctx
}

// openFaulty opens a store of one connection (so that the statements a
// test warms up are prepared on the connection it cuts) whose connections
// a commitTracer can cut.
func openFaulty(t *testing.T) (*Store, *commitTracer, *pgx.Conn) {
	t.Helper()
	dsn := pgtest.DSN(t)
	tr := &commitTracer{}
	var conns []*faultConn
	var mu sync.Mutex
	s, err := open(t.Context(), &Config{DSN: dsn, MaxConns: 1, Timeout: 30 * time.Second}, func(c *pgxpool.Config) {
		c.ConnConfig.Tracer = tr
		dial := c.ConnConfig.DialFunc
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			fc := &faultConn{Conn: conn}
			mu.Lock()
			conns = append(conns, fc)
			mu.Unlock()
			return fc, nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, fc := range conns {
			fc.closeReal()
		}
	})
	admin, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return s, tr, admin
}

// terminate ends a backend and waits until it is gone.
func terminate(t *testing.T, admin *pgx.Conn, pid uint32) {
	var ok bool
	if err := admin.QueryRow(context.Background(), "SELECT pg_terminate_backend($1, 30000)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Errorf("terminate backend %d: %v, %v", pid, ok, err)
	}
}

var commitNow = time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)

// shapes of Apply: updates whose COMMIT goes with their writes and
// claims, and creates whose COMMIT follows in a round trip of its own.
type shape struct {
	name string
	// prepare stores what apply needs, under a name; apply applies one
	// change and returns its result; check checks the result and that the
	// change was applied exactly once.
	prepare func(t *testing.T, s *Store, name string)
	apply   func(t *testing.T, s *Store, name string) (*store.ApplyResult, error)
	check   func(t *testing.T, s *Store, name string, res *store.ApplyResult)
}

var shapes = []shape{
	{
		name: "update",
		prepare: func(t *testing.T, s *Store, name string) {
			res, err := s.Apply(t.Context(), &store.ApplyParams{Now: commitNow, Changes: []store.Change{{Create: &store.NewRun{
				ID: name, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow}}}})
			if err != nil || res.Changes[0].Err != nil {
				t.Fatal(err, res.Changes[0].Err)
			}
		},
		// A change that is not idempotent: it appends a marker and
		// enqueues a task, which the Apply claims.
		apply: func(t *testing.T, s *Store, name string) (*store.ApplyResult, error) {
			return s.Apply(t.Context(), &store.ApplyParams{Now: commitNow,
				Changes: []store.Change{{RunID: name, Decide: func(*store.Run) (*store.Update, error) {
					return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: "once"}},
						Tasks: []store.NewTask{{Queue: name, Kind: store.TaskStep, Step: "a", Index: -1}}}, nil
				}}},
				Claims: []store.ClaimParams{{Queues: []string{name}, Owner: "w", Limit: 1, LeaseFor: time.Minute}}})
		},
		check: checkEnqueued,
	},
	{
		// A change fenced by a lease: the store, which claimed the task and
		// created the run, knows both, and sends it in one round trip.
		name: "fenced",
		prepare: func(t *testing.T, s *Store, name string) {
			res, err := s.Apply(t.Context(), &store.ApplyParams{Now: commitNow, Changes: []store.Change{{Create: &store.NewRun{
				ID: name, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow,
				Tasks: []store.NewTask{{Queue: name + "-in", Kind: store.TaskStep, Step: "a", Index: -1}}}}},
				Claims: []store.ClaimParams{{Queues: []string{name + "-in"}, Owner: "w", Limit: 1, LeaseFor: time.Minute}}})
			if err != nil || res.Changes[0].Err != nil || len(res.Claimed[0]) != 1 {
				t.Fatal(err, res.Changes[0].Err)
			}
			fencedLeases.Store(name, res.Claimed[0][0].Lease())
		},
		apply: func(t *testing.T, s *Store, name string) (*store.ApplyResult, error) {
			v, _ := fencedLeases.Load(name)
			l := v.(store.Lease)
			return s.Apply(t.Context(), &store.ApplyParams{Now: commitNow,
				Changes: []store.Change{{RunID: name, Fence: &l, Decide: func(*store.Run) (*store.Update, error) {
					return &store.Update{History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: "once"}},
						Tasks: []store.NewTask{{Queue: name, Kind: store.TaskStep, Step: "b", Index: -1}}}, nil
				}}},
				Claims: []store.ClaimParams{{Queues: []string{name}, Owner: "w", Limit: 1, LeaseFor: time.Minute}}})
		},
		check: checkEnqueued,
	},
	{
		name:    "create",
		prepare: func(*testing.T, *Store, string) {},
		apply: func(t *testing.T, s *Store, name string) (*store.ApplyResult, error) {
			return s.Apply(t.Context(), &store.ApplyParams{Now: commitNow, Changes: []store.Change{{Create: &store.NewRun{
				ID: name, Workflow: "wf", Version: 1, Kind: hephtype.KindFlow,
				History: []store.NewEvent{{Kind: hephtype.EventMarker, Name: "once"}},
				Tasks:   []store.NewTask{{Queue: name, Kind: store.TaskStep, Step: "a", Index: -1}}}}}})
		},
		check: func(t *testing.T, s *Store, name string, res *store.ApplyResult) {
			t.Helper()
			// A create that committed and ran again would be refused as
			// existing.
			r := res.Changes[0]
			if r.Err != nil || r.Run == nil || len(r.Tasks) != 1 || r.Tasks[0].ID == 0 {
				t.Fatalf("result %+v", r)
			}
			checkOnce(t, s, name)
		},
	},
}

// checkEnqueued checks the result of a change that appended one entry and
// enqueued a task, which the Apply claimed, and that it was applied once.
func checkEnqueued(t *testing.T, s *Store, name string, res *store.ApplyResult) {
	t.Helper()
	r := res.Changes[0]
	if r.Err != nil || r.Run == nil || r.Run.Seq != 1 || len(r.Tasks) != 1 || r.Tasks[0].ID == 0 {
		t.Fatalf("result %+v", r)
	}
	if len(res.Claimed) != 1 || len(res.Claimed[0]) != 1 || res.Claimed[0][0].ID != r.Tasks[0].ID {
		t.Fatalf("claimed %v, want the task enqueued (%d)", res.Claimed, r.Tasks[0].ID)
	}
	checkOnce(t, s, name)
}

// fencedLeases holds the lease of each run of shape "fenced", by name.
var fencedLeases sync.Map

// checkOnce checks that run name has one marker, and one task.
func checkOnce(t *testing.T, s *Store, name string) {
	t.Helper()
	evs, err := s.History(t.Context(), &store.HistoryParams{RunID: name})
	if err != nil {
		t.Fatal(err)
	}
	var markers int
	for _, e := range evs {
		if e.Kind == hephtype.EventMarker {
			markers++
		}
	}
	if markers != 1 {
		t.Fatalf("run %s has %d markers, want 1: %+v", name, markers, evs)
	}
	var tasks int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM heph.tasks WHERE run_id = $1`, name).Scan(&tasks); err != nil {
		t.Fatal(err)
	}
	if tasks != 1 {
		t.Fatalf("run %s has %d tasks, want 1", name, tasks)
	}
}

func TestCommitAnswerLost(t *testing.T) {
	t.Parallel()
	for _, sh := range shapes {
		for _, mode := range []cut{cutBeforeCommit, cutAfterCommit, cutAll, cutDrop, cutPartition} {
			t.Run(sh.name+"/"+mode.String(), func(t *testing.T) {
				t.Parallel()
				s, tr, admin := openFaulty(t)
				// The same Apply once, to prepare its statements on the
				// connection.
				sh.prepare(t, s, "warm")
				res, err := sh.apply(t, s, "warm")
				if err != nil {
					t.Fatal(err)
				}
				sh.check(t, s, "warm", res)

				sh.prepare(t, s, "r")
				var killed atomic.Bool
				kill := func(pid uint32) {
					if mode != cutPartition {
						killed.Store(true)
						terminate(t, admin, pid)
					}
				}
				tr.arm(mode, kill)
				res, err = sh.apply(t, s, "r")
				commits := tr.commits.Load()
				if mode != cutPartition && !killed.Load() {
					t.Fatalf("the connection was not cut (Apply: %+v, %v)", res, err)
				}
				// Who committed: the transaction whose answer was lost
				// (once), or the one that ran again (twice).
				committed := mode == cutBeforeCommit || mode == cutAfterCommit || mode == cutAll
				// A guessed Apply (every shape but "update", which is
				// neither fenced nor keyed) sends COMMIT before it learns its
				// transaction's id: when no answer at all comes back, its
				// outcome cannot be asked for. Applied again, as the runtime
				// does, it is refused if the first one committed.
				guessed := sh.name != "update" && (mode == cutAll || mode == cutDrop || mode == cutPartition)
				switch {
				case guessed:
					if !errors.Is(err, errOutcomeUnknown) {
						t.Fatalf("Apply: %+v, %v; want an error wrapping errOutcomeUnknown", res, err)
					}
					res, err = sh.apply(t, s, "r")
					if err != nil {
						t.Fatalf("Apply again: %v", err)
					}
					want := map[string]error{"fenced": store.ErrLeaseLost, "create": store.ErrRunExists}[sh.name]
					if committed && !errors.Is(res.Changes[0].Err, want) {
						t.Fatalf("Apply again: %v, want %v", res.Changes[0].Err, want)
					}
					if committed {
						checkOnce(t, s, "r")
					} else {
						sh.check(t, s, "r", res)
					}
					if commits != 1 {
						t.Errorf("%d transactions sent COMMIT, want 1", commits)
					}
					return
				case committed && mode == cutAll && sh.name != "create":
					// The results of the writes and claims went with the
					// answer to COMMIT.
					if !errors.Is(err, errCommittedUnread) || !strings.Contains(err.Error(), "committed, but its results were lost") {
						t.Fatalf("Apply: %v, want an error wrapping errCommittedUnread", err)
					}
					checkOnce(t, s, "r")
				case err != nil:
					t.Fatalf("Apply: %v", err)
				default:
					sh.check(t, s, "r", res)
				}
				if want := map[bool]int64{true: 1, false: 2}[committed]; commits != want {
					t.Errorf("%d transactions sent COMMIT, want %d", commits, want)
				}
			})
		}
	}
}

// commitStatus tells a committed transaction, an aborted one, and one in
// progress on a backend cut off from its client, which it terminates.
func TestCommitStatus(t *testing.T) {
	t.Parallel()
	s, _, admin := openFaulty(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cut, err := pgx.Connect(ctx, s.conn.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer cut.Close(context.Background())
	var xid int64
	var pid uint32
	if _, err := cut.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if err := cut.QueryRow(ctx, "SELECT txid_current(), pg_backend_pid()").Scan(&xid, &pid); err != nil {
		t.Fatal(err)
	}
	// In progress until commitStatus terminates its backend.
	if st := s.commitStatus(ctx, &lostCommit{xid: xid, pid: pid}); st != "aborted" {
		t.Fatalf("status of a transaction in progress: %q, want aborted", st)
	}
	var alive bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", int32(pid)).Scan(&alive); err != nil || alive {
		t.Fatalf("the backend of the transaction lives on: %v, %v", alive, err)
	}
	// Committed: the pid of another backend is not terminated.
	if err := admin.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if st := s.commitStatus(ctx, &lostCommit{xid: xid, pid: pid}); st != "committed" {
		t.Fatalf("status of a committed transaction: %q", st)
	}
	// Rolled back.
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.commitStatus(ctx, &lostCommit{xid: xid}); st != "aborted" {
		t.Fatalf("status of a rolled back transaction: %q", st)
	}
	if st := s.commitStatus(ctx, &lostCommit{}); st != "" {
		t.Fatalf("status without a transaction id: %q", st)
	}
}
