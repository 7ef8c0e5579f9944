package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Option adjusts Run.
type Option func(*config)

type config struct {
	begin   func(t *testing.T, s store.Store) *Tx
	encoded bool
}

// EncodedPayloads tells the suite that the store encodes payloads (a
// payload codec's wrapper): searching events by a field of their data is
// then refused with ErrInvalidInput, which the suite checks instead of
// the matches.
func EncodedPayloads() Option {
	return func(c *config) { c.encoded = true }
}

// Tx is a transaction of the caller's own, as a backend's test opens it
// for the insert-in-transaction tests (store.TxInserter).
type Tx struct {
	// Tx is what InsertInTx takes (a pgx.Tx, a *sql.Tx).
	Tx any
	// Exec runs a statement of the application's in the transaction.
	Exec func(sql string) error
	// Commit and Rollback end it.
	Commit, Rollback func() error
	// Rows counts the rows of one of the store's own tables (in the
	// store's schema), in the transaction: the suite checks with it what
	// no read of the store shows, such as state it prunes.
	Rows func(table string) (int, error)
}

// WithTx gives the suite a way to open a transaction of the caller's
// kind on the store's database: a backend that implements
// store.TxInserter must pass it, and the suite then checks InsertInTx.
func WithTx(begin func(t *testing.T, s store.Store) *Tx) Option {
	return func(c *config) { c.begin = begin }
}

// countOrders counts the rows o1 to o3 of the application's table, in a
// transaction of its own: each is there when inserting it again fails
// (tried in a savepoint, and undone).
func (c *config) countOrders(t *testing.T, s store.Store) int {
	t.Helper()
	tx := c.begin(t, s)
	defer func() { _ = tx.Rollback() }()
	n := 0
	for _, id := range []string{"o1", "o2", "o3"} {
		if err := tx.Exec("SAVEPOINT probe"); err != nil {
			t.Fatalf("savepoint: %v", err)
		}
		if tx.Exec("INSERT INTO app_orders (id) VALUES ('"+id+"')") != nil {
			n++
		}
		if err := tx.Exec("ROLLBACK TO SAVEPOINT probe"); err != nil {
			t.Fatalf("rollback to savepoint: %v", err)
		}
	}
	return n
}

func txTests(c *config) []struct {
	name string
	fn   func(t *testing.T, h *harness)
} {
	with := func(fn func(t *testing.T, h *harness, c *config)) func(t *testing.T, h *harness) {
		return func(t *testing.T, h *harness) {
			if _, ok := h.s.(store.TxInserter); !ok {
				t.Skip("the store does not implement store.TxInserter")
			}
			if c.begin == nil {
				t.Fatal("the store implements store.TxInserter: pass storetest.WithTx to Run")
			}
			fn(t, h, c)
		}
	}
	return []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"InsertInTxCommitAndRollback", with(testInsertInTx)},
		{"InsertInTxBusinessKeys", with(testInsertInTxKeys)},
		{"InsertInTxWrongType", with(testInsertInTxWrongType)},
		{"InsertInTxTraceContext", with(testInsertInTxTrace)},
		{"ThrottleWindowsPruned", with(testThrottleWindowsPruned)},
	}
}

// rows counts the rows of a table of the store's, in a transaction of
// its own.
func (c *config) rows(t *testing.T, s store.Store, table string) int {
	t.Helper()
	tx := c.begin(t, s)
	defer func() { _ = tx.Rollback() }()
	if tx.Rows == nil {
		t.Fatal("storetest.Tx.Rows is not set: WithTx must give it")
	}
	n, err := tx.Rows(table)
	if err != nil {
		t.Fatalf("count the rows of %s: %v", table, err)
	}
	return n
}

// setupApp creates the application's own table, committed.
func setupApp(t *testing.T, h *harness, c *config) {
	t.Helper()
	tx := c.begin(t, h.s)
	if err := tx.Exec("CREATE TABLE IF NOT EXISTS app_orders (id text PRIMARY KEY)"); err != nil {
		t.Fatalf("create the application's table: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func insertInTx(t *testing.T, h *harness, tx *Tx, now time.Time, runs ...*store.NewRun) []store.ChangeResult {
	t.Helper()
	res, err := h.s.(store.TxInserter).InsertInTx(t.Context(), tx.Tx, &store.InsertParams{Runs: runs, Now: now})
	if err != nil {
		t.Fatalf("InsertInTx: %v", err)
	}
	if len(res) != len(runs) {
		t.Fatalf("InsertInTx returned %d results for %d runs", len(res), len(runs))
	}
	return res
}

// A rolled-back transaction leaves neither the application's row nor the
// run; a committed one leaves both, with the run's history and a task a
// worker claims.
func testInsertInTx(t *testing.T, h *harness, c *config) {
	setupApp(t, h, c)
	mk := func(id string) *store.NewRun {
		r := withTasks(newRun(id), task("q", "work", time.Time{}))
		r.History = []store.NewEvent{{Kind: hephtype.EventRunStarted}, {Kind: hephtype.EventStepScheduled, Step: "work", Attempt: 1}}
		return r
	}

	tx := c.begin(t, h.s)
	if err := tx.Exec("INSERT INTO app_orders (id) VALUES ('o1')"); err != nil {
		t.Fatalf("the application's insert: %v", err)
	}
	res := insertInTx(t, h, tx, at(0), mk("gone"))
	if res[0].Err != nil || res[0].Run == nil || len(res[0].Tasks) != 1 || res[0].Tasks[0].ID == 0 {
		t.Fatalf("insert: %+v", res[0])
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if _, err := h.s.GetRun(t.Context(), "gone"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("a rolled-back run: GetRun = %v, want ErrRunNotFound", err)
	}
	if ts := h.claim(at(time.Second), "w", 10, time.Minute, "q"); len(ts) != 0 {
		t.Fatalf("a rolled-back run left tasks: %v", taskIDs(ts))
	}
	if n := c.countOrders(t, h.s); n != 0 {
		t.Fatalf("a rolled-back transaction left %d rows of the application", n)
	}

	tx = c.begin(t, h.s)
	if err := tx.Exec("INSERT INTO app_orders (id) VALUES ('o1')"); err != nil {
		t.Fatalf("the application's insert: %v", err)
	}
	res = insertInTx(t, h, tx, at(0), mk("kept"), mk("kept2"))
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("insert: %v", r.Err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n := c.countOrders(t, h.s); n != 1 {
		t.Fatalf("the committed transaction left %d rows of the application, want 1", n)
	}
	got := h.get("kept")
	if got.Status != hephtype.StatusRunning || got.Seq != 2 || !got.CreatedAt.Equal(at(0)) {
		t.Fatalf("run as stored: %+v", got)
	}
	if hist := h.history("kept"); len(hist) != 2 || hist[1].Kind != hephtype.EventStepScheduled {
		t.Fatalf("history: %+v", hist)
	}
	ts := h.claim(at(time.Second), "w", 10, time.Minute, "q")
	if len(ts) != 2 || ts[0].RunID != "kept" || ts[0].ID != res[0].Tasks[0].ID || ts[1].ID != res[1].Tasks[0].ID {
		t.Fatalf("claimed %+v, want the tasks of kept and kept2", ts)
	}
	// The store's own writes go on after the caller's transaction.
	h.mustUpdate(at(2*time.Second), "kept", &store.Lease{TaskID: ts[0].ID, Token: ts[0].Token}, &store.Update{Status: hephtype.StatusCompleted})
	if again := insertInTx(t, h, func() *Tx { tx := c.begin(t, h.s); t.Cleanup(func() { _ = tx.Rollback() }); return tx }(), at(3*time.Second), mk("kept")); !errors.Is(again[0].Err, store.ErrRunExists) {
		t.Fatalf("insert of an existing id: %v, want ErrRunExists", again[0].Err)
	}
}

// Business keys hold as for Apply's creates, against committed runs and
// within the transaction; a refused create leaves the transaction usable.
func testInsertInTxKeys(t *testing.T, h *harness, c *config) {
	setupApp(t, h, c)
	mk := func(id, bid string, scope businesskey.Scope) *store.NewRun {
		r := withTasks(newRun(id), task("q", "work", time.Time{}))
		r.BusinessID, r.KeyScope = bid, scope
		return r
	}
	h.create(at(0), mk("held", "job::a", businesskey.ScopeActive))

	tx := c.begin(t, h.s)
	res := insertInTx(t, h, tx, at(time.Second),
		mk("r1", "job::a", businesskey.ScopeActive), // held by a committed run
		mk("r2", "job::b", businesskey.ScopeForever),
		mk("r3", "job::b", businesskey.ScopeForever)) // held by r2, in the same transaction
	var de *store.DuplicateRunError
	if !errors.As(res[0].Err, &de) || de.ExistingRunID != "held" || res[0].Run != nil {
		t.Fatalf("r1: %v, want a *DuplicateRunError naming held", res[0].Err)
	}
	if res[1].Err != nil {
		t.Fatalf("r2: %v", res[1].Err)
	}
	if !errors.As(res[2].Err, &de) || de.ExistingRunID != "r2" {
		t.Fatalf("r3: %v, want a *DuplicateRunError naming r2", res[2].Err)
	}
	if err := tx.Exec("INSERT INTO app_orders (id) VALUES ('o2')"); err != nil {
		t.Fatalf("the transaction is not usable after a refused create: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if n := c.countOrders(t, h.s); n != 1 {
		t.Fatalf("%d rows of the application, want 1", n)
	}
	for id, want := range map[string]bool{"r1": false, "r2": true, "r3": false} {
		_, err := h.s.GetRun(t.Context(), id)
		if (err == nil) != want {
			t.Fatalf("run %s stored: %v, want %v", id, err, want)
		}
	}
	// Once committed, Apply sees the key taken.
	dup := h.apply(at(2*time.Second), store.Change{Create: mk("r4", "job::b", businesskey.ScopeForever)})[0]
	wantErr(t, "Apply after the transaction", dup.Err, store.ErrDuplicateRun)
}

func testInsertInTxWrongType(t *testing.T, h *harness, c *config) {
	for _, tx := range []any{nil, "a transaction", struct{}{}} {
		_, err := h.s.(store.TxInserter).InsertInTx(t.Context(), tx, &store.InsertParams{Runs: []*store.NewRun{newRun("x")}, Now: at(0)})
		wantErr(t, "InsertInTx with a tx of another kind", err, store.ErrTxType)
	}
	if _, err := h.s.GetRun(t.Context(), "x"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("GetRun = %v, want ErrRunNotFound", err)
	}
}
