package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/store"
)

// applyAttempts bounds the transactions one Apply runs when the earlier
// ones did not commit (deadlock, broken connection).
const applyAttempts = 4

var (
	errRunExists = store.ErrRunExists
	// errFallback: the pipelined batch went wrong; undo it and apply the
	// changes one by one.
	errFallback = errors.New("fall back to one change at a time")
	// errCommittedUnread: the transaction committed, but the connection
	// failed before the results of its writes or claims were read: the
	// changes are applied, and their results (ids of new tasks, leased
	// tasks) are not known.
	errCommittedUnread = errors.New("committed, but its results were lost")
	// errOutcomeUnknown: COMMIT was sent, its answer lost, and the database
	// could not tell whether the transaction committed.
	errOutcomeUnknown = errors.New("outcome unknown")
	// errRolledBack: COMMIT answered that the transaction rolled back.
	errRolledBack = errors.New("the transaction was rolled back")
	// errStale: a guessed transaction found a row other than known; undo
	// it and apply the changes again, reading the rows first.
	errStale = errors.New("a row changed since it was last seen")
)

// staleCode is the SQLSTATE that fresh() raises.
const staleCode = "HEPH1"

// Apply performs the changes in one transaction (group commit); see the
// package documentation for how.
func (s *Store) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if len(p.Changes) == 0 && len(p.Claims) == 0 {
		return &store.ApplyResult{Changes: []store.ChangeResult{}, Claimed: [][]*store.Task{}}, nil
	}
	if p.Now.IsZero() {
		return nil, errors.New("apply: Now is zero")
	}
	claims := make([]store.ClaimParams, len(p.Claims))
	for i := range p.Claims {
		c := p.Claims[i]
		c.Now = p.Now
		if err := checkClaim(&c); err != nil {
			return nil, fmt.Errorf("apply: claim %d: %w", i, err)
		}
		claims[i] = c
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// The first attempt guesses when this store knows every row the
	// changes read; a later one has met a failure and reads them.
	kruns, kleases, guess := s.known.covers(p)
	backoff := 10 * time.Millisecond
	var controlled []string
	for attempt := 1; ; attempt++ {
		var g *guessed
		if guess && attempt == 1 {
			g = &guessed{runs: kruns, leases: kleases}
		}
		res, lost, err := s.applyOnce(ctx, p, claims, g, &controlled)
		if err == nil {
			s.claimControlledAfter(ctx, claims, controlled, res)
			return res, nil
		}
		if errors.Is(err, errCommittedUnread) {
			return nil, fmt.Errorf("apply: %w", err)
		}
		if lost != nil {
			// COMMIT was sent and its answer lost: the database tells.
			s.noteFailure(err)
			switch s.commitStatus(ctx, lost) {
			case "committed":
				if lost.res != nil {
					return lost.res, nil
				}
				return nil, fmt.Errorf("apply: %w: %w", errCommittedUnread, err)
			case "aborted":
				// As a failure before COMMIT: run the transaction again.
			default:
				return nil, s.fail("apply", fmt.Errorf("%w: %w", errOutcomeUnknown, err))
			}
		}
		// A transaction that did not commit runs again after a failure
		// that may pass.
		if attempt == applyAttempts || (lost == nil && !transient(err)) || ctx.Err() != nil || s.check() != nil {
			return nil, s.fail("apply", err)
		}
		s.noteFailure(err)
		if !sleep(ctx, jitter(backoff)) {
			return nil, s.fail("apply", err)
		}
		backoff *= 4
	}
}

// applyOnce runs one transaction. When its COMMIT was sent and the answer
// lost, it returns the error with what is needed to learn the outcome.
func (s *Store) applyOnce(ctx context.Context, p *store.ApplyParams, claims []store.ClaimParams, g *guessed, controlled *[]string) (*store.ApplyResult, *lostCommit, error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	conn := pc.Conn()
	defer func() {
		// A transaction left open by a failure: roll it back so that the
		// connection can serve again (the pool drops it if that fails).
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
				_ = conn.Close(rctx)
			}
			cancel()
		}
		pc.Release()
	}()
	a := &applier{s: s, conn: conn, p: p, claims: claims, now: truncate(p.Now), guess: g}
	res, lost, err := a.run(ctx)
	*controlled = a.controlled
	return res, lost, err
}

// claimControlledAfter serves the claims of controlled queues, which the
// transaction of the changes skipped, each in a transaction of its own
// after it committed (so a completion's freed slot counts). A failure
// leaves a claim short: its worker claims again at its next poll.
func (s *Store) claimControlledAfter(ctx context.Context, claims []store.ClaimParams, controlled []string, res *store.ApplyResult) {
	if len(controlled) == 0 {
		return
	}
	for i := range claims {
		c := &claims[i]
		for _, q := range c.Queues {
			if !slices.Contains(controlled, q) || len(res.Claimed[i]) >= c.Limit {
				continue
			}
			ts, err := s.claimControlled(ctx, c, q, c.Limit-len(res.Claimed[i]))
			if err != nil {
				break
			}
			res.Claimed[i] = append(res.Claimed[i], ts...)
		}
	}
}

// guessed is what a guessing Apply takes the rows it would read to be.
type guessed struct {
	runs   map[string]knownRun
	leases map[int64]fencedTask
}

// lostCommit is a transaction whose COMMIT was sent and whose answer was
// lost.
type lostCommit struct {
	xid int64              // txid_current(); 0 when it was not read
	pid uint32             // the backend that ran it
	res *store.ApplyResult // its results, when all of them were read
}

// applyBegin starts the transaction of an Apply with changes: the settings
// of applySettings, and the transaction's id, which tells its outcome
// should the answer to COMMIT be lost. (It gives the transaction an id,
// which one that writes nothing would not take: an Apply of claims only,
// which the runtime sends while idle, does without, and a lost COMMIT
// answer leaves its outcome unknown; its leases, if any, expire.)
//
// It reads the backend's pid as well: the connection's own may be a
// pooler's (Config.TransactionPooling), not the server process that runs
// the transaction.
const applyBegin = "SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), " +
	"set_config('plan_cache_mode', 'force_generic_plan', true), txid_current(), pg_backend_pid()"

// statusSQL tells the outcome of a transaction; terminateSQL ends the
// backend $1 if it still runs transaction $2 (a txid, whose low 32 bits
// are the xid).
const (
	statusSQL    = "SELECT txid_status($1)"
	terminateSQL = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE pid = $1::int4 AND backend_xid = ($2::int8 % 4294967296)::text::xid`
)

// commitStatus asks the database, on another connection, whether the
// transaction of l committed: it returns "committed", "aborted", or "" when
// it cannot tell in time (Config.Timeout, whatever ctx says: the outcome
// matters more than the caller's patience). A transaction in progress
// belongs to a backend that has not yet noticed that its client is gone;
// it may be dying, or be cut off from its client, holding its locks for as
// long as TCP takes to tell it. After a second of this the backend is
// terminated, which settles the outcome: committed if the commit got
// through, else aborted.
func (s *Store) commitStatus(ctx context.Context, l *lostCommit) string {
	if l.xid == 0 {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	start, terminated := time.Now(), false
	backoff := 5 * time.Millisecond
	for {
		var status *string
		err := s.pool.QueryRow(ctx, statusSQL, l.xid).Scan(&status)
		switch {
		case err == nil && status == nil:
			return "" // too old to tell, which a transaction this recent is not
		case err == nil && *status != "in progress":
			return *status
		case err == nil && !terminated && time.Since(start) >= time.Second:
			if _, err = s.pool.Exec(ctx, terminateSQL, int64(l.pid), l.xid); err == nil {
				terminated = true
			}
		}
		if err != nil {
			if !transient(err) || s.check() != nil {
				return ""
			}
			s.noteFailure(err)
		}
		if !sleep(ctx, jitter(backoff)) {
			return ""
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// applier runs the changes of one Apply inside its transaction.
//
// It keeps the runs it deals with in memory: those that updates name are
// loaded and locked first, then each change is decided against the
// in-memory state and its writes join the current segment: consecutive
// changes whose writes go to the database as two set-based statements, one
// for all the updates of the segment and one for all its creates, whatever
// their number. A create's outcome is known only when its statement ran
// (the business key may be held by a run this transaction does not see);
// so a change whose outcome or writes depend on the writes of the segment
// in an order the statements do not keep sends the segment first: a change
// that names a run the segment creates, an update that frees a business
// key a create of the segment takes, and an update that cancels tasks of
// a run the segment enqueues tasks for.
type applier struct {
	s      *Store
	conn   *pgx.Conn
	p      *store.ApplyParams
	claims []store.ClaimParams
	now    time.Time

	// loaded is the state as locked at the start: runs by id (a nil run:
	// absent), fenced tasks by id, and their ids by run.
	loaded   map[string]*runState
	fenced   map[int64]fencedTask
	fencedOf map[string][]int64

	// guess, when not nil, is what the rows the changes read are taken to
	// be, without reading them: the transaction goes to the database in
	// one round trip, its first statement checking the guess under the
	// locks (queries.guard), and fails with errStale if it was wrong.
	guess *guessed

	// inTx: the changes are creates written in a transaction of the
	// caller's (InsertInTx), which the applier neither begins nor
	// commits.
	inTx bool

	// The state as the changes so far left it.
	slow bool
	runs map[string]*runState
	gone map[int64]bool // fenced tasks deleted by earlier changes
	seg  segment        // writes not sent yet
	// keys are the keys of the keyed changes found in the history as
	// locked, by run; recorded, those that the changes so far recorded.
	keys, recorded map[string]map[string]bool
	// gen is the version generation as read at the start, when a create
	// carries one (NewRun.VersionGen) and the rows were read, not guessed
	// (0: not read; a guess checks it in the guard instead).
	gen int64

	// xid is the transaction's id (txid_current), once read; pid its
	// backend's.
	xid int64
	pid uint32
	// commitSent: COMMIT was sent; committed: it succeeded. read: every
	// result of the writes and claims was read. unread: a transaction whose
	// COMMIT was sent could not make sense of them.
	commitSent, committed, read, unread bool
	results                             []store.ChangeResult
	claimed                             [][]*store.Task
	// controlled are the queues of the claims that flow control governs.
	controlled []string
	pl         pipeline
}

type runState struct {
	run *store.Run // nil: the run does not exist
	key *string    // its unique_key
	// unknown: a run with this id exists, but it is not loaded.
	unknown bool
	// written: this transaction wrote it.
	written bool
}

type fencedTask struct {
	runID string
	token int64
	owned bool
	kind  store.TaskKind
	step  string
	index int
}

// op is the write of one change.
type op struct {
	i      int
	create bool
	id     string
	run    *store.Run // the run as the change leaves it
	key    *string    // the business key it holds after the change
	meta   *string    // a create's metadata
	frees  *string    // an update's business key that it releases
	takes  *string    // an update's business key that it takes again (Update.Reopen)
	seq    int64      // the run's seq before the change
	fence  *store.Lease
	cancel []store.TaskMatch
	// The history entries it appends (a JSON array, see history.go) and
	// how many.
	entries string
	n       int
	cond    *string // an update's condition, as JSON
	paused  *string // an update's paused column (Run.Paused), as JSON
	sattrs  *string // the run's search_attributes column, as JSON
	release bool    // an update releases its run's leases (Update.Release)
	ckey    string  // the change's key, recorded on its first entry
	// fenceRun is the run of the task that fences a create.
	fenceRun string
	res      store.ChangeResult
	effect   func()    // applies the change to the in-memory state
	prev     *runState // a create's entry before it
	// A create read back.
	inserted bool
	// retry: a create whose conflict vanished before it could be named.
	retry bool
}

// segment is the writes of consecutive changes not sent yet.
type segment struct {
	ops     []*op
	creates map[string]bool // run ids the segment creates
	keys    map[string]bool // business keys its creates take
	tasksOf map[string]bool // runs its updates enqueue tasks for
	// The tasks that fence its creates (whose outcome is not known yet),
	// and their runs.
	fences    map[int64]bool
	fenceRuns map[string]bool
}

func (g *segment) add(o *op) {
	if g.creates == nil {
		g.creates, g.keys, g.tasksOf = map[string]bool{}, map[string]bool{}, map[string]bool{}
		g.fences, g.fenceRuns = map[int64]bool{}, map[string]bool{}
	}
	g.ops = append(g.ops, o)
	switch {
	case o.create:
		g.creates[o.id] = true
		if o.key != nil {
			g.keys[*o.key] = true
		}
		if o.fence != nil {
			g.fences[o.fence.TaskID] = true
			g.fenceRuns[o.fenceRun] = true
		}
	case len(o.res.Tasks) > 0:
		g.tasksOf[o.id] = true
	}
}

// conflicts reports whether update o must wait for the segment to be
// written: it frees a key a create of the segment takes (the create came
// first, so it must meet the key held), or it cancels tasks of a run that
// the segment enqueues tasks for (the cancellation must see them) or whose
// task fences a create of the segment (the create came first, so it must
// meet its fence held: the statement of the updates runs first).
func (g *segment) conflicts(o *op) bool {
	return (o.frees != nil && g.keys[*o.frees]) || (o.takes != nil && g.keys[*o.takes]) ||
		(len(o.cancel) > 0 && (g.tasksOf[o.id] || g.fenceRuns[o.id]))
}

func (a *applier) run(ctx context.Context) (*store.ApplyResult, *lostCommit, error) {
	for {
		if err := a.begin(ctx); err != nil {
			return nil, nil, err
		}
		err := a.applyAll(ctx)
		switch {
		case a.committed:
			// COMMIT went with the writes and succeeded: an error can only
			// have come after its answer.
			return a.outcome(err)
		case errors.Is(err, errStale) && a.guess != nil:
			// The guess was wrong: nothing was written (the guard failed
			// before the writes, or the creates' check after them, and the
			// server skipped the rest, COMMIT included). Undo, and read.
			if _, err := a.conn.Exec(ctx, "ROLLBACK"); err != nil {
				return nil, nil, err
			}
			a.s.known.forgetGuess(a.guess)
			a.guess = nil
			continue
		case errors.Is(err, errFallback) && !a.slow:
			// A statement failed (so COMMIT, if sent, was skipped): undo
			// everything and start again, one change at a time.
			if _, err := a.conn.Exec(ctx, "ROLLBACK"); err != nil {
				return nil, nil, err
			}
			a.slow = true
			continue
		case err != nil && a.commitSent && commitUnknown(err):
			// COMMIT went with the writes, and its answer was lost.
			return nil, a.lost(), fmt.Errorf("commit: %w", err)
		case err != nil:
			return nil, nil, err
		}
		break
	}
	a.read = true
	a.pl.commit(&a.committed)
	a.commitSent = true
	a.notify(a.notifications())
	// From here on ctx no longer cancels (the bound of Config.Timeout
	// remains): an answer lost leaves the outcome to be found out.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.s.timeout)
	defer cancel()
	err := a.pl.send(cctx, a.conn, a.typed())
	switch {
	case a.committed:
		return a.outcome(nil)
	case commitUnknown(err):
		return nil, a.lost(), fmt.Errorf("commit: %w", err)
	default:
		// The server refused a notification or COMMIT: nothing committed.
		return nil, nil, fmt.Errorf("commit: %w", err)
	}
}

// outcome is what Apply returns for a committed transaction: its results,
// unless they could not be read.
func (a *applier) outcome(err error) (*store.ApplyResult, *lostCommit, error) {
	if a.unread {
		return nil, nil, fmt.Errorf("%w: %w", errCommittedUnread, err)
	}
	a.remember()
	return &store.ApplyResult{Changes: a.results, Claimed: a.claimed}, nil, nil
}

// remember records in the store's known what the committed transaction
// leaves: the runs it wrote that are about to change again, because it
// enqueued a task of theirs ready now (a run that waits, for a signal or a
// timer, costs no memory here), the leases it claimed, and not the tasks
// it deleted. Runs written in the slow mode are forgotten: their rows
// carry the id of a subtransaction.
func (a *applier) remember() {
	k := a.s.known
	busy := map[string]bool{}
	for _, r := range a.results {
		for _, t := range r.Tasks {
			if r.Err == nil && !t.ReadyAt.After(a.now) {
				busy[t.RunID] = true
			}
		}
	}
	var forget []string
	for id, st := range a.runs {
		if st.written && busy[id] && !a.slow && a.xid != 0 && st.run != nil && !st.run.Status.Terminal() {
			k.putRun(st.run, st.key, xmin(a.xid))
		} else {
			forget = append(forget, id)
		}
	}
	gone := make([]int64, 0, len(a.gone))
	for id := range a.gone {
		gone = append(gone, id)
	}
	k.forget(forget, gone)
	for _, ts := range a.claimed {
		k.putLeases(ts)
	}
	a.s.tasksDeleted(len(gone))
}

// lost describes the transaction whose COMMIT answer was lost.
func (a *applier) lost() *lostCommit {
	l := &lostCommit{xid: a.xid, pid: a.pid}
	if a.read && !a.unread {
		l.res = &store.ApplyResult{Changes: a.results, Claimed: a.claimed}
	}
	return l
}

// commitUnknown reports whether err, the failure of a pipeline that held
// COMMIT, leaves its outcome unknown. When the server answered a statement
// before COMMIT with an error, it skipped the rest of the pipeline, COMMIT
// included (a session terminated there had not reached COMMIT either: the
// answers come in order); when COMMIT failed with an ERROR or answered
// ROLLBACK, nothing committed; nor when nothing was sent. Any other
// failure (the connection broke, a FATAL error in place of COMMIT's answer,
// a result that could not be read) may have come after the commit.
func commitUnknown(err error) bool {
	if errors.Is(err, errRolledBack) || pgconn.SafeToRetry(err) {
		return false
	}
	var oe *opError
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &oe) && !oe.commit:
		return !errors.As(oe.err, &pe)
	case errors.As(err, &pe):
		sev := pe.SeverityUnlocalized
		if sev == "" {
			sev = pe.Severity
		}
		return sev == "FATAL" || sev == "PANIC"
	}
	return true
}

// notify queues the notifications of queues after COMMIT, in the same
// pipeline: they run in a transaction of their own, which PostgreSQL
// commits when the pipeline ends. A transaction that notifies holds a lock
// of the whole database's notification queue from its commit until it
// ends; this one writes nothing, so it ends at once, where the transaction
// of the changes would hold the lock until its commit is flushed to disk,
// and so make every committing notifier wait for the others' flushes. Only
// what committed is notified. (Should the connection fail between the two,
// the notification is lost: listeners also poll.)
func (a *applier) notify(queues []string) {
	for _, q := range queues {
		a.pl.add(false, func(br pgx.BatchResults) error {
			_, _ = br.Exec() // the changes committed: a failure here is no failure of theirs
			return nil
		}, "SELECT pg_notify($1, $2)", a.s.channel, q)
	}
}

// notifications are the queues to wake other processes for: those of
// tasks ready now that this commit did not lease itself.
func (a *applier) notifications() []string {
	leased := map[int64]bool{}
	for _, ts := range a.claimed {
		for _, t := range ts {
			leased[t.ID] = true
		}
	}
	var queues []string
	for _, r := range a.results {
		for _, t := range r.Tasks {
			if r.Err == nil && !t.ReadyAt.After(a.now) && !leased[t.ID] && !slices.Contains(queues, t.Queue) {
				queues = append(queues, t.Queue)
			}
		}
	}
	return queues
}

// predictNotifications are the notifications of a commit sent before its
// claims ran: the queues that get more ready tasks than the claims of the
// commit may lease. (When the claims lease older tasks instead, the queue
// had a backlog already, which other processes learnt about.)
func (a *applier) predictNotifications(ops []*op) []string {
	ready := map[string]int{}
	var queues []string
	for _, o := range ops {
		if o.res.Err != nil {
			continue
		}
		for _, t := range o.res.Tasks {
			if !t.ReadyAt.After(a.now) {
				if ready[t.Queue] == 0 {
					queues = append(queues, t.Queue)
				}
				ready[t.Queue]++
			}
		}
	}
	for _, c := range a.claims {
		for _, q := range c.Queues {
			ready[q] -= c.Limit
		}
	}
	return slices.DeleteFunc(queues, func(q string) bool { return ready[q] <= 0 })
}

// serverError reports whether err is an error the server returned for a
// statement: the transaction then did not commit (the statements after
// it, COMMIT included, were skipped).
func serverError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// begin starts the transaction and locks the runs that updates name and
// the tasks that fences name, in id order (so that concurrent Applies
// cannot deadlock on them), and reads the keys of keyed changes that the
// history of their runs holds (a statement after the locks: under READ
// COMMITTED it sees what the previous holders of the locks committed). The
// writes that follow run in the same (sub)transaction as the locks: a
// write to a row locked by a parent transaction would cost a MultiXact per
// row.
func (a *applier) begin(ctx context.Context) error {
	a.commitSent, a.committed, a.read, a.unread, a.xid = false, false, false, false, 0
	a.pid = a.conn.PgConn().PID()
	a.pl.exec("BEGIN ISOLATION LEVEL READ COMMITTED")
	if len(a.p.Changes) > 0 {
		a.pl.queryRow(func(row pgx.Row) error {
			var seqscan, jit, plans string
			var pid int32
			if err := row.Scan(&seqscan, &jit, &plans, &a.xid, &pid); err != nil {
				return err
			}
			a.pid = uint32(pid)
			return nil
		}, applyBegin)
	} else {
		a.pl.exec(applySettings)
	}
	var ids []string
	var fences []int64
	var keyRuns, keys []string
	var gens []int64
	seen := map[string]bool{}
	for _, c := range a.p.Changes {
		if c.Fence != nil {
			fences = append(fences, c.Fence.TaskID)
		}
		if c.Create != nil {
			if c.Create.VersionGen > 0 {
				gens = append(gens, c.Create.VersionGen)
			}
			continue
		}
		if !seen[c.RunID] {
			seen[c.RunID] = true
			ids = append(ids, c.RunID)
		}
		if lookupKey(c.Key) {
			keyRuns, keys = append(keyRuns, c.RunID), append(keys, c.Key)
		}
	}
	a.loaded = make(map[string]*runState, len(ids))
	a.gen = 0
	if a.guess != nil {
		if len(gens) > 0 {
			// Creates whose versions were chosen from a kept policy: the
			// guess is that the policy has not changed since.
			a.pl.queryRow(func(row pgx.Row) error {
				var ok bool
				return staleErr(row.Scan(&ok))
			}, a.s.q.genGuard, gens)
		}
		return a.guessRows(ids, fences, keyRuns, keys)
	}
	if len(gens) > 0 {
		a.pl.queryRow(func(row pgx.Row) error { return row.Scan(&a.gen) }, a.s.q.gen)
	}
	for _, id := range ids {
		a.loaded[id] = &runState{}
	}
	if len(ids) > 0 {
		a.pl.query(func(rows pgx.Rows) error {
			for rows.Next() {
				st := &runState{}
				r, err := scanRun(rows, &st.key)
				if err != nil {
					return err
				}
				st.run = r
				a.loaded[r.ID] = st
			}
			return rows.Err()
		}, a.s.q.loadRuns, ids)
	}
	a.fenced = make(map[int64]fencedTask, len(fences))
	a.fencedOf = make(map[string][]int64, len(fences))
	if len(fences) > 0 {
		a.pl.query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id int64
				var ft fencedTask
				var kind string
				if err := rows.Scan(&id, &ft.runID, &ft.token, &ft.owned, &kind, &ft.step, &ft.index); err != nil {
					return err
				}
				ft.kind = store.TaskKind(kind)
				a.fenced[id] = ft
				a.fencedOf[ft.runID] = append(a.fencedOf[ft.runID], id)
			}
			return rows.Err()
		}, a.s.q.loadFenced, fences)
	}
	a.keys = map[string]map[string]bool{}
	if len(keys) > 0 {
		a.pl.query(a.readKeys, a.s.q.loadKeys, keyRuns, keys)
	}
	if len(ids) == 0 && len(fences) == 0 && len(gens) == 0 {
		return nil // nothing to wait for: the writes go in the same round trip
	}
	return a.pl.send(ctx, a.conn, a.typed())
}

// guessRows takes the runs ids and the tasks fences to be as the store
// knows them, and the keys of keyed changes to be absent from their
// histories, and queues the statement that checks it under the locks (the
// locks that begin would take otherwise, in the same order).
func (a *applier) guessRows(ids []string, fences []int64, keyRuns, keys []string) error {
	xmins := make([]int64, len(ids))
	for i, id := range ids {
		kr := a.guess.runs[id]
		a.loaded[id] = &runState{run: kr.run, key: kr.key}
		xmins[i] = kr.xmin
	}
	a.fenced = make(map[int64]fencedTask, len(fences))
	a.fencedOf = make(map[string][]int64, len(fences))
	tokens := make([]int64, len(fences))
	for i, id := range fences {
		ft := a.guess.leases[id]
		if _, dup := a.fenced[id]; !dup {
			a.fencedOf[ft.runID] = append(a.fencedOf[ft.runID], id)
		}
		a.fenced[id] = ft
		tokens[i] = ft.token
	}
	a.keys = map[string]map[string]bool{}
	if len(ids) == 0 && len(fences) == 0 && len(keys) == 0 {
		return nil
	}
	// The guard locks each row once; a task that fences two changes is
	// listed once.
	slices.Sort(fences)
	fences = slices.Compact(fences)
	tokens = tokens[:0]
	for _, id := range fences {
		tokens = append(tokens, a.fenced[id].token)
	}
	a.pl.queryRow(func(row pgx.Row) error {
		var ok bool
		return staleErr(row.Scan(&ok))
	}, a.s.q.guard, nonNil(ids), nonNil(xmins), nonNil(fences), nonNil(tokens), nonNil(keyRuns), nonNil(keys))
	return nil
}

// staleErr marks the failure of fresh() as errStale.
func staleErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == staleCode {
		return fmt.Errorf("%w: %w", errStale, err)
	}
	return err
}

// lookupKey reports whether a change's key is worth looking up: one that
// text cannot hold would fail the statement (the change that carries it is
// refused when it writes it), and one that is too long is refused at once.
func lookupKey(key string) bool {
	return key != "" && len(key) <= store.MaxKeyLen && utf8.ValidString(key) && !strings.Contains(key, "\x00")
}

// readKeys reads the rows of loadKeys into a.keys.
func (a *applier) readKeys(rows pgx.Rows) error {
	for rows.Next() {
		var run, key string
		if err := rows.Scan(&run, &key); err != nil {
			return err
		}
		addKey(a.keys, run, key)
	}
	return rows.Err()
}

func addKey(m map[string]map[string]bool, run, key string) {
	if m[run] == nil {
		m[run] = map[string]bool{}
	}
	m[run][key] = true
}

// applyAll applies every change, then the claims. In the fast mode the
// writes of all changes go in few segments, sent with the claims in one
// pipeline; errFallback asks for the slow mode, where each change is sent
// alone in a savepoint, so that a statement's failure refuses that change
// only.
func (a *applier) applyAll(ctx context.Context) error {
	a.runs = make(map[string]*runState, len(a.loaded)+len(a.p.Changes))
	for id, st := range a.loaded {
		a.runs[id] = st
	}
	a.gone = map[int64]bool{}
	a.recorded = map[string]map[string]bool{}
	a.seg = segment{}
	a.results = make([]store.ChangeResult, len(a.p.Changes))
	var ops []*op
	for i := range a.p.Changes {
		o, err := a.change(ctx, i)
		if err != nil {
			return err
		}
		if o != nil {
			ops = append(ops, o)
		}
	}
	w := a.write() // before the claims, which may lease its tasks
	a.claimed = make([][]*store.Task, len(a.claims))
	a.controlled = nil
	if len(a.claims) > 0 {
		a.pl.exec(claimSettings)
		// The claims skip controlled queues: Apply claims those after the
		// commit (claimControlled).
		var queues []string
		for _, c := range a.claims {
			queues = append(queues, c.Queues...)
		}
		a.pl.query(func(rows pgx.Rows) error {
			var err error
			a.controlled, err = controlledQueues(rows)
			return err
		}, a.s.sq(controlledSQL), queues)
	}
	for i := range a.claims {
		sql, args := claimArgs(&a.s.q, &a.claims[i])
		a.pl.query(func(rows pgx.Rows) error {
			ts, err := collectTasks(rows)
			a.claimed[i] = ts
			return err
		}, sql, args...)
	}
	// Unless a create may meet a conflict, whose holder must then be
	// looked up in the transaction, COMMIT goes with the writes; and when
	// guessing, where a conflict fails the transaction (queries.created).
	if !a.inTx && (a.guess != nil || !slices.ContainsFunc(w.ops, func(o *op) bool { return o.create })) {
		a.pl.mark(&a.read)
		a.pl.commit(&a.committed)
		a.commitSent = true
		a.notify(a.predictNotifications(ops))
		// As in run: once COMMIT is sent, ctx no longer cancels.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.s.timeout)
		defer cancel()
		ctx = cctx
	}
	err := a.settle(ctx, w)
	if err == nil || a.read {
		for _, o := range ops {
			a.results[o.i] = o.res
		}
	}
	return err
}

// change plans change i and adds its writes to the segment (in the slow
// mode, writes them at once). It returns the change's op, or nil when the
// change was refused at once (its result is then set).
func (a *applier) change(ctx context.Context, i int) (*op, error) {
	c := &a.p.Changes[i]
	id := c.RunID
	if c.Create != nil {
		id = c.Create.ID
	}
	// The outcome of a create of this run, or of one fenced by the same
	// task, decides this change.
	if a.seg.creates[id] || (c.Fence != nil && a.seg.fences[c.Fence.TaskID]) {
		if err := a.flush(ctx); err != nil {
			return nil, err
		}
	}
	if st := a.runs[id]; st != nil && st.unknown {
		if err := a.flush(ctx); err != nil {
			return nil, err
		}
		if err := a.load(ctx, id); err != nil {
			return nil, err
		}
	}
	if !a.slow {
		o, refused := a.plan(i)
		if o == nil {
			a.results[i] = refused
			return nil, nil
		}
		if !o.create && a.seg.conflicts(o) {
			if err := a.flush(ctx); err != nil {
				return nil, err
			}
		}
		o.effect()
		a.seg.add(o)
		return o, nil
	}
	for tries := 0; ; tries++ {
		o, refused := a.plan(i)
		if o == nil {
			a.results[i] = refused
			return nil, nil
		}
		a.pl.exec("SAVEPOINT change")
		a.seg.add(o)
		ops := a.write()
		a.pl.exec("RELEASE SAVEPOINT change")
		err := a.settle(ctx, ops)
		var oe *opError
		switch {
		case err == nil && o.retry && tries < 3:
			continue
		case err == nil && o.retry:
			return nil, fmt.Errorf("create run %s: the business id holder keeps changing", o.id)
		case err == nil:
			if o.res.Err == nil {
				o.effect()
			}
			return o, nil
		case errors.As(err, &oe) && oe.write && !transient(oe.err):
			// This change alone is refused.
			if _, err := a.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT change; RELEASE SAVEPOINT change"); err != nil {
				return nil, err
			}
			verb := "update"
			if o.create {
				verb = "create"
			}
			o.res = store.ChangeResult{Err: fmt.Errorf("%s run %s: %w", verb, o.id, oe.err)}
			if keyTaken(oe.err) {
				// A transaction the locks did not keep out recorded the key.
				o.res.Err = fmt.Errorf("update run %s: key %q: %w", o.id, o.ckey, store.ErrDuplicateChange)
			}
			if o.takes != nil && businessKeyTaken(oe.err) {
				// A reopened run's business id is held by another run.
				var same, other *string
				if err := a.conn.QueryRow(ctx, a.s.q.lookup, o.id, *o.takes).Scan(&same, &other); err != nil {
					return nil, err
				}
				holder := ""
				if other != nil {
					holder = *other
				}
				o.res.Err = fmt.Errorf("update run %s: reopen: %w", o.id, &store.DuplicateRunError{BusinessID: o.run.BusinessID, ExistingRunID: holder})
			}
			return o, nil
		default:
			return nil, err
		}
	}
}

// load locks and reads one run, and the keys of the keyed changes of the
// batch that its history holds.
func (a *applier) load(ctx context.Context, id string) error {
	st := &runState{}
	a.pl.query(func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanRun(rows, &st.key)
			if err != nil {
				return err
			}
			st.run = r
		}
		return rows.Err()
	}, a.s.q.loadRuns, []string{id})
	var keyRuns, keys []string
	for _, c := range a.p.Changes {
		if c.Create == nil && c.RunID == id && lookupKey(c.Key) {
			keyRuns, keys = append(keyRuns, id), append(keys, c.Key)
		}
	}
	if len(keys) > 0 {
		delete(a.keys, id)
		a.pl.query(a.readKeys, a.s.q.loadKeys, keyRuns, keys)
	}
	if err := a.pl.send(ctx, a.conn, a.typed()); err != nil {
		return err
	}
	a.runs[id] = st
	return nil
}

// keyTaken reports whether err is the violation of history_key: a change
// key recorded twice in a run.
func keyTaken(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "history_key"
}

// businessKeyTaken reports whether err is the violation of
// runs_unique_key: a business id held by another run.
func businessKeyTaken(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "runs_unique_key"
}

// flush sends the segment's writes, with whatever else is queued, and
// reads back their outcome.
func (a *applier) flush(ctx context.Context) error {
	return a.settle(ctx, a.write())
}

// write queues the statements that write the segment and empties it. It
// returns the ops written.
func (a *applier) write() *written {
	g := a.seg
	a.seg = segment{}
	w := &written{ops: g.ops}
	if len(g.ops) == 0 {
		return w
	}
	var creates, updates []*op
	for _, o := range g.ops {
		if o.create {
			creates = append(creates, o)
		} else {
			updates = append(updates, o)
		}
	}
	// Updates first: a create of the segment may take a business key that
	// one of them frees (conflicts keeps the other order out).
	if len(updates) > 0 {
		args := a.updateArgs(updates, w)
		a.pl.writeRow(func(row pgx.Row) error {
			var notified int64
			return row.Scan(&w.fencesDeleted, &w.runsUpdated, &w.updTaskIDs, &notified)
		}, a.s.q.writeUpdates, args...)
	}
	if len(creates) > 0 {
		args := a.createArgs(creates)
		a.pl.writeRow(func(row pgx.Row) error {
			return row.Scan(&w.created, &w.crTaskIDs, &w.crTaskRuns, &w.crFencesDeleted)
		}, a.s.q.writeCreates, args...)
		if a.guess != nil {
			a.pl.queryRow(func(row pgx.Row) error {
				var ok bool
				return staleErr(row.Scan(&ok))
			}, a.s.q.created, args[0])
		}
	}
	return w
}

// written is a segment sent, and what its statements return.
type written struct {
	ops                                         []*op
	fences, runs                                int64 // expected counts
	fencesDeleted, runsUpdated, crFencesDeleted int64
	updTaskIDs, crTaskIDs                       []int64
	created, crTaskRuns                         []string
}

// settle sends the pipeline and reads back the outcome of the changes of
// w. Creates that met a conflict learn who holds the id. When the
// pipeline holds COMMIT and the connection fails after the results of the
// writes and claims were read, it makes sense of them all the same, and
// returns the failure: the caller then learns whether the transaction
// committed.
func (a *applier) settle(ctx context.Context, w *written) error {
	err := a.pl.send(ctx, a.conn, a.typed())
	if err != nil && !a.read {
		var oe *opError
		// A write the server refused: the transaction, COMMIT included,
		// went no further.
		if !a.slow && errors.As(err, &oe) && oe.write && serverError(oe.err) && !transient(oe.err) {
			return errFallback
		}
		return err
	}
	if perr := a.process(ctx, w); perr != nil {
		if a.commitSent {
			a.unread = true
		}
		if err != nil {
			return err
		}
		return perr
	}
	return err
}

// process reads back the outcome of the changes of w from what their
// statements returned.
func (a *applier) process(ctx context.Context, w *written) error {
	if len(w.ops) == 0 {
		return nil
	}
	if w.fencesDeleted != w.fences || w.runsUpdated != w.runs {
		return fmt.Errorf("runs or tasks changed under their locks: %d of %d fenced tasks deleted, %d of %d runs updated",
			w.fencesDeleted, w.fences, w.runsUpdated, w.runs)
	}
	created := make(map[string]bool, len(w.created))
	for _, id := range w.created {
		created[id] = true
	}
	// Task ids come in the order of the tasks: those of updates in the
	// order of the changes, those of creates by run.
	taskIDs := map[string][]int64{}
	for k, id := range w.crTaskIDs {
		taskIDs[w.crTaskRuns[k]] = append(taskIDs[w.crTaskRuns[k]], id)
	}
	next := 0
	var conflicts []*op
	for _, o := range w.ops {
		var ids []int64
		if o.create {
			o.inserted = created[o.id]
			if !o.inserted {
				conflicts = append(conflicts, o)
				continue
			}
			ids = taskIDs[o.id]
		} else {
			end := min(next+len(o.res.Tasks), len(w.updTaskIDs))
			ids = w.updTaskIDs[next:end]
			next = end
		}
		if len(ids) != len(o.res.Tasks) {
			return fmt.Errorf("run %s: %d task ids for %d tasks", o.id, len(ids), len(o.res.Tasks))
		}
		for k, id := range ids {
			o.res.Tasks[k].ID = id
		}
	}
	if next != len(w.updTaskIDs) {
		return fmt.Errorf("%d task ids for %d tasks", len(w.updTaskIDs), next)
	}
	var crFences int64
	for _, o := range w.ops {
		if o.create && o.inserted && o.fence != nil {
			crFences++
		}
	}
	if w.crFencesDeleted != crFences {
		return fmt.Errorf("tasks changed under their locks: %d of %d tasks that fence creates deleted", w.crFencesDeleted, crFences)
	}
	if len(conflicts) == 0 {
		return nil
	}
	type holder struct{ same, other *string }
	found := make([]holder, len(conflicts))
	for k, o := range conflicts {
		a.pl.queryRow(func(row pgx.Row) error { return row.Scan(&found[k].same, &found[k].other) }, a.s.q.lookup, o.id, o.key)
	}
	if err := a.pl.send(ctx, a.conn, a.typed()); err != nil {
		return err
	}
	for k, o := range conflicts {
		o.retry = false
		switch h := found[k]; {
		case h.same != nil:
			o.res = refused(fmt.Errorf("create run %s: %w", o.id, errRunExists))
			a.restore(o)
			a.runs[o.id] = &runState{unknown: true}
		case h.other != nil:
			o.res = refused(&store.DuplicateRunError{BusinessID: o.run.BusinessID, ExistingRunID: *h.other})
			a.restore(o)
		case a.slow:
			// The holder finished (or went) between the conflict and the
			// lookup: the id is free now; try again.
			o.retry = true
		default:
			return errFallback
		}
	}
	return nil
}

// restore undoes the in-memory effect of a create that did not happen:
// its run, and its fence, which it left held.
func (a *applier) restore(o *op) {
	if a.slow {
		return // the effect was not applied
	}
	if o.prev == nil {
		delete(a.runs, o.id)
	} else {
		a.runs[o.id] = o.prev
	}
	if o.fence != nil {
		delete(a.gone, o.fence.TaskID)
	}
}

func refused(err error) store.ChangeResult { return store.ChangeResult{Err: err} }

// updateArgs are the arguments of writeUpdates for the updates of a
// segment; it sets the counts w expects.
func (a *applier) updateArgs(ops []*op, w *written) []any {
	var fids []int64
	var cruns, ckinds, csteps []string
	var cidx []int64
	// A run updated twice ends with the last state.
	last := map[string]int{}
	var order []*op
	var ev groups
	var tk tasks
	var released []string
	for _, o := range ops {
		if o.fence != nil {
			fids = append(fids, o.fence.TaskID)
		}
		if o.release {
			released = append(released, o.id)
		}
		for _, m := range o.cancel {
			cruns, ckinds, csteps, cidx = append(cruns, o.id), append(ckinds, string(m.Kind)), append(csteps, m.Step), append(cidx, int64(m.Index))
		}
		if k, ok := last[o.id]; ok {
			order[k] = o
		} else {
			last[o.id] = len(order)
			order = append(order, o)
		}
		ev.add(o.id, o.seq, o.n, o.ckey, o.entries)
		tk.add(o.run, o.res.Tasks)
	}
	n := len(order)
	ids, statuses, errs := make([]string, n), make([]string, n), make([]string, n)
	outputs, states, published, keys := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	conds, builds, paused, sattrs := make([]*string, n), make([]string, n), make([]*string, n), make([]*string, n)
	seqs := make([]int64, n)
	finished := make([]*time.Time, n)
	for k, o := range order {
		r := o.run
		ids[k], statuses[k], errs[k] = r.ID, string(r.Status), r.Error
		outputs[k], states[k], published[k], keys[k] = jsonArg(r.Output), jsonArg(r.State), jsonArg(r.Published), o.key
		seqs[k], conds[k], builds[k], paused[k], sattrs[k] = r.Seq, o.cond, r.BuildID, o.paused, o.sattrs
		if !r.FinishedAt.IsZero() {
			t := r.FinishedAt
			finished[k] = &t
		}
	}
	w.fences, w.runs = int64(len(fids)), int64(n)
	args := []any{nonNil(fids), nonNil(cruns), nonNil(ckinds), nonNil(csteps), nonNil(cidx),
		ids, statuses, outputs, errs, states, published, seqs, finished, keys, conds, a.now}
	args = append(args, ev.args()...)
	args = append(args, tk.args()...)
	return append(args, a.s.cancels, nonNil(tk.keys), nonNil(tk.traces), builds, paused, nonNil(released), sattrs)
}

// createArgs are the arguments of writeCreates for the creates of a
// segment.
func (a *applier) createArgs(ops []*op) []any {
	n := len(ops)
	ids, workflows, kinds, statuses, errs, scopes, parents := make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions, seqs := make([]int64, n), make([]int64, n)
	inputs, outputs, businessIDs, keys := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	tags, metas, states, sattrs := make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
	ckeys, traces, builds := make([]string, n), make([]string, n), make([]string, n)
	finished, deadlines := make([]*time.Time, n), make([]*time.Time, n)
	var fruns []string
	var fids []int64
	var ev groups
	var tk tasks
	for k, o := range ops {
		if o.fence != nil {
			fruns, fids = append(fruns, o.id), append(fids, o.fence.TaskID)
		}
		r := o.run
		ids[k], workflows[k], kinds[k], statuses[k], errs[k] = r.ID, r.Workflow, string(r.Kind), string(r.Status), r.Error
		scopes[k], parents[k] = string(r.KeyScope), r.ParentID
		versions[k], seqs[k] = int64(r.Version), r.Seq
		inputs[k], outputs[k], businessIDs[k], keys[k] = jsonArg(r.Input), jsonArg(r.Output), nullString(r.BusinessID), o.key
		tags[k], metas[k], states[k], ckeys[k] = tagsArg(r.Tags), o.meta, jsonArg(r.State), r.ConcurrencyKey
		traces[k], builds[k], sattrs[k] = r.TraceContext, r.BuildID, o.sattrs
		if !r.FinishedAt.IsZero() {
			t := r.FinishedAt
			finished[k] = &t
		}
		if !r.Deadline.IsZero() {
			t := r.Deadline
			deadlines[k] = &t
		}
		ev.add(r.ID, 0, o.n, "", o.entries)
		tk.add(r, o.res.Tasks)
	}
	args := []any{ids, workflows, versions, kinds, statuses, inputs, outputs, errs, businessIDs, scopes, keys,
		parents, tags, metas, states, seqs, finished, a.now}
	args = append(args, ev.args()...)
	args = append(args, tk.args()...)
	return append(args, nonNil(fruns), nonNil(fids), ckeys, nonNil(tk.keys), traces, nonNil(tk.traces), builds, deadlines, sattrs)
}

// tasks are the columns of tasks to insert.
type tasks struct {
	runs, queues, kinds, workflows, steps, handlers []string
	traces                                          []string
	versions, idx, attempts, prios                  []int64
	payloads, items, details, keys                  []*string
	ready                                           []time.Time
}

func (t *tasks) add(r *store.Run, ts []*store.Task) {
	for _, n := range ts {
		t.runs, t.queues, t.kinds, t.workflows = append(t.runs, r.ID), append(t.queues, n.Queue), append(t.kinds, string(n.Kind)), append(t.workflows, r.Workflow)
		t.steps, t.versions, t.idx, t.attempts = append(t.steps, n.Step), append(t.versions, int64(r.Version)), append(t.idx, int64(n.Index)), append(t.attempts, int64(n.Attempt))
		t.prios, t.payloads, t.items, t.ready = append(t.prios, int64(n.Priority)), append(t.payloads, jsonArg(n.Payload)), append(t.items, jsonArg(n.Item)), append(t.ready, n.ReadyAt)
		t.handlers, t.details, t.traces = append(t.handlers, n.Handler), append(t.details, jsonArg(n.Details)), append(t.traces, r.TraceContext)
		var key *string
		if n.Kind.Controlled() {
			key = &r.ConcurrencyKey
		}
		t.keys = append(t.keys, key)
	}
}

func (t *tasks) args() []any {
	return []any{nonNil(t.runs), nonNil(t.queues), nonNil(t.kinds), nonNil(t.workflows), nonNil(t.versions),
		nonNil(t.steps), nonNil(t.idx), nonNil(t.attempts), nonNil(t.payloads), nonNil(t.items), nonNil(t.prios), nonNil(t.ready),
		nonNil(t.handlers), nonNil(t.details)}
}

// nonNil makes a nil slice empty: pgx sends a nil slice as NULL, and
// unnest(NULL) as no rows would do, but the statements expect arrays.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// plan decides change i against the in-memory state. It returns the write
// to make, or nil and the change's (refused) result.
func (a *applier) plan(i int) (*op, store.ChangeResult) {
	c := &a.p.Changes[i]
	if c.Create != nil {
		return a.planCreate(i, c.Create, c.Fence)
	}
	return a.planUpdate(i, c)
}

// holds reports whether the lease l still holds, as far as this
// transaction knows: its task is locked with this token, and no earlier
// change deleted it.
func (a *applier) holds(l *store.Lease) bool {
	ft, ok := a.fenced[l.TaskID]
	return ok && !a.gone[l.TaskID] && ft.owned && ft.token == l.Token
}

func (a *applier) planCreate(i int, n *store.NewRun, fence *store.Lease) (*op, store.ChangeResult) {
	if n.ID == "" {
		return nil, refused(errors.New("create run: id is empty"))
	}
	if fence != nil && !a.holds(fence) {
		return nil, refused(fmt.Errorf("create run %s: task %d: %w", n.ID, fence.TaskID, store.ErrLeaseLost))
	}
	if n.VersionGen > 0 && a.gen != 0 && n.VersionGen != a.gen {
		return nil, refused(fmt.Errorf("create run %s: %w: its version was chosen from generation %d, the store is at %d",
			n.ID, store.ErrVersionPolicyChanged, n.VersionGen, a.gen))
	}
	r, err := store.RunOf(n, a.now)
	if err != nil {
		return nil, refused(err)
	}
	meta, err := metadataArg(r.Metadata)
	if err != nil {
		return nil, refused(fmt.Errorf("create run %s: metadata: %w", r.ID, err))
	}
	sattrs, err := store.EncodeAttrs(r.SearchAttributes)
	if err != nil {
		return nil, refused(fmt.Errorf("create run %s: %w", r.ID, err))
	}
	if st := a.runs[r.ID]; st != nil && st.run != nil {
		return nil, refused(fmt.Errorf("create run %s: %w", r.ID, errRunExists))
	}
	key := uniqueKey(r)
	entries, err := encodeEntries(r.ID, 0, n.History)
	if err != nil {
		return nil, refused(fmt.Errorf("create run %s: %w", r.ID, err))
	}
	o := &op{i: i, create: true, id: r.ID, run: r, key: key, meta: meta, sattrs: sattrs, entries: entries, n: len(n.History), prev: a.runs[r.ID],
		fence: fence, res: store.ChangeResult{Run: r, Tasks: newTasks(r, n.Tasks, a.now)}}
	if fence != nil {
		o.fenceRun = a.fenced[fence.TaskID].runID
	}
	o.effect = func() {
		a.runs[r.ID] = &runState{run: r, key: key, written: true}
		if fence != nil {
			a.gone[fence.TaskID] = true
		}
	}
	return o, store.ChangeResult{}
}

// uniqueKey is the value of the unique_key column of r: its workflow and
// business id while they must stay unique, else nil (NULL). Business ids
// are unique per workflow.
func uniqueKey(r *store.Run) *string {
	if r.BusinessID == "" {
		return nil
	}
	switch r.KeyScope {
	case businesskey.ScopeForever:
	case businesskey.ScopeActive:
		if r.Status.Terminal() {
			return nil
		}
	default:
		return nil
	}
	k := r.Workflow + "\x1f" + r.BusinessID
	return &k
}

func (a *applier) planUpdate(i int, c *store.Change) (*op, store.ChangeResult) {
	if c.Decide == nil {
		return nil, refused(fmt.Errorf("update run %s: no Decide function", c.RunID))
	}
	st := a.runs[c.RunID]
	if st == nil || st.run == nil {
		return nil, refused(fmt.Errorf("update run %s: %w", c.RunID, store.ErrRunNotFound))
	}
	run := st.run
	// The task that fences the change may be of any run (a child reporting
	// to its parent).
	if c.Fence != nil && !a.holds(c.Fence) {
		return nil, refused(fmt.Errorf("update run %s: task %d: %w", run.ID, c.Fence.TaskID, store.ErrLeaseLost))
	}
	if c.Key != "" {
		if err := store.CheckKey(c.Key); err != nil {
			return nil, refused(fmt.Errorf("update run %s: %w", run.ID, err))
		}
		if a.keys[run.ID][c.Key] || a.recorded[run.ID][c.Key] {
			return nil, refused(fmt.Errorf("update run %s: key %q: %w", run.ID, c.Key, store.ErrDuplicateChange))
		}
	}
	given := *run // Decide may scribble on its copy
	u, err := c.Decide(&given)
	if err != nil {
		return nil, refused(err)
	}
	if u == nil {
		u = &store.Update{}
	}
	if err := u.Check(); err != nil {
		return nil, refused(fmt.Errorf("update run %s: %w", run.ID, err))
	}

	next := u.Next(run, a.now)
	next.Condition.Since = truncate(next.Condition.Since)
	cond, err := conditionArg(next.Condition)
	if err != nil {
		return nil, refused(fmt.Errorf("update run %s: condition: %w", run.ID, err))
	}
	paused, err := store.EncodePause(next.Paused)
	if err != nil {
		return nil, refused(fmt.Errorf("update run %s: %w", run.ID, err))
	}
	sattrs, err := store.EncodeAttrs(next.SearchAttributes)
	if err != nil {
		return nil, refused(fmt.Errorf("update run %s: %w", run.ID, err))
	}
	newKey := st.key
	var frees, takes *string
	if newKey != nil && store.FreesKey(next.KeyScope, next) {
		frees, newKey = newKey, nil
	}
	if u.TakesKey(run) {
		// Another run may hold it: the update then fails on
		// runs_unique_key, and the change is refused in the slow mode.
		newKey = uniqueKey(&next)
		takes = newKey
	}
	entries, err := encodeEntries(run.ID, run.Seq, u.History)
	if err != nil {
		return nil, refused(fmt.Errorf("update run %s: %w", run.ID, err))
	}
	o := &op{i: i, id: run.ID, run: &next, key: newKey, frees: frees, takes: takes, seq: run.Seq, fence: c.Fence,
		cancel: u.Cancel, release: u.Release, entries: entries, n: len(u.History), cond: cond, paused: paused, sattrs: sattrs,
		res: store.ChangeResult{Run: &next, Tasks: newTasks(&next, u.Tasks, a.now)}}
	if len(u.History) > 0 {
		o.ckey = c.Key // a change that appends nothing records no key
	}
	o.effect = func() {
		a.runs[run.ID] = &runState{run: &next, key: newKey, written: true}
		if o.ckey != "" {
			addKey(a.recorded, run.ID, o.ckey)
		}
		if c.Fence != nil {
			a.gone[c.Fence.TaskID] = true
		}
		// Tasks this change cancels no longer fence later changes.
		for _, id := range a.fencedOf[run.ID] {
			ft := a.fenced[id]
			for _, m := range u.Cancel {
				if (m.Kind == "" || m.Kind == ft.kind) && (m.Step == "" || m.Step == ft.step) && (m.Index < 0 || m.Index == ft.index) {
					a.gone[id] = true
				}
			}
		}
	}
	return o, store.ChangeResult{}
}

// newTasks are the tasks a change enqueues, as stored (ids come later).
func newTasks(r *store.Run, ts []store.NewTask, now time.Time) []*store.Task {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*store.Task, len(ts))
	for i, n := range ts {
		out[i] = &store.Task{
			RunID: r.ID, Queue: n.Queue, Kind: n.Kind, Workflow: r.Workflow,
			Version: r.Version, Step: n.Step, Index: n.Index, Attempt: n.Attempt,
			Payload: orNil(n.Payload), Item: orNil(n.Item), Priority: n.Priority, ReadyAt: readyAt(n, now),
			Handler: n.Handler, Details: orNil(n.Details), CreatedAt: now, TraceContext: r.TraceContext,
			Tags: r.Tags, Metadata: r.Metadata,
		}
		if n.Kind.Controlled() {
			out[i].ConcurrencyKey = r.ConcurrencyKey
		}
	}
	return out
}

// orNil returns nil for an empty JSON value, as the database stores it.
func orNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// pipeline queues statements and sends them in one round trip.
type pipeline struct {
	b        pgx.Batch
	read     []func(pgx.BatchResults) error
	write    []bool // whether each statement writes changes
	commitAt int    // 1 + the index of COMMIT; 0 when none is queued
}

// opError is the failure of one statement of a pipeline.
type opError struct {
	write  bool // the statement writes changes
	commit bool // the statement is COMMIT
	err    error
}

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

func (p *pipeline) add(write bool, read func(pgx.BatchResults) error, sql string, args ...any) {
	p.b.Queue(sql, args...)
	p.read = append(p.read, read)
	p.write = append(p.write, write)
}

func (p *pipeline) exec(sql string, args ...any) {
	p.add(false, func(br pgx.BatchResults) error { _, err := br.Exec(); return err }, sql, args...)
}

// commit queues COMMIT; done is set when it succeeded.
func (p *pipeline) commit(done *bool) {
	p.add(false, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("%w (%s)", errRolledBack, tag)
		}
		*done = err == nil
		return err
	}, "COMMIT")
	p.commitAt = len(p.read)
}

// mark sets *done once the results of every statement queued so far have
// been read.
func (p *pipeline) mark(done *bool) {
	if len(p.read) == 0 {
		*done = true
		return
	}
	k := len(p.read) - 1
	last := p.read[k]
	p.read[k] = func(br pgx.BatchResults) error {
		err := last(br)
		*done = err == nil
		return err
	}
}

func (p *pipeline) queryRow(scan func(pgx.Row) error, sql string, args ...any) {
	p.add(false, func(br pgx.BatchResults) error { return scan(br.QueryRow()) }, sql, args...)
}

// writeRow queues a statement that writes changes and returns one row.
func (p *pipeline) writeRow(scan func(pgx.Row) error, sql string, args ...any) {
	p.add(true, func(br pgx.BatchResults) error { return scan(br.QueryRow()) }, sql, args...)
}

func (p *pipeline) query(each func(pgx.Rows) error, sql string, args ...any) {
	p.add(false, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		return each(rows)
	}, sql, args...)
}

// typed tells whether the applier's statements may take the array types
// of arrays.go: on the store's own connections when they describe their
// statements, never on a caller's transaction, whose mode the store does
// not choose.
func (a *applier) typed() bool { return a.s.typedArrays && !a.inTx }

// send runs the queued statements and empties the pipeline; typed: with
// the array arguments in the types of arrays.go. The error of
// a statement comes as an *opError that tells whether it writes changes.
func (p *pipeline) send(ctx context.Context, conn *pgx.Conn, typed bool) error {
	if len(p.read) == 0 {
		return nil
	}
	if typed {
		for _, q := range p.b.QueuedQueries {
			q.Arguments = arrayArgs(q.Arguments)
		}
	}
	br := conn.SendBatch(ctx, &p.b)
	var err error
	for i, read := range p.read {
		if err = read(br); err != nil {
			err = &opError{write: p.write[i], commit: i+1 == p.commitAt, err: err}
			break
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	*p = pipeline{}
	return err
}

// jitter spreads d over ±25%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.75 + 0.5*rand.Float64()))
}

// sleep waits for d, or returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
