// Package store is the storage seam of Hephaestus: one interface for runs,
// their history, the task queue (which also carries durable timers and,
// for code-first workflows, decision tasks), business-key uniqueness,
// listing and retention.
//
// Every state change of a run happens in one transaction through Apply:
// the backend loads the run, checks the lease of the task being completed
// (fencing), calls the runtime's Decide function with the current run, and
// writes what it returns — history entries, a new status and snapshot, new
// tasks, cancelled tasks — all or nothing. Apply takes many changes at once
// so a backend can commit them in one transaction (group commit).
//
// Backends live in sub-packages (store/sqlite, store/postgres) and all pass
// the conformance suite in store/storetest.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Sentinel errors that callers branch on. Backends wrap them with context.
var (
	// ErrRunNotFound: no run has the given id.
	ErrRunNotFound = errors.New("run not found")
	// ErrDuplicateRun: a run with the same business id exists within the
	// key's scope. The error is a *DuplicateRunError naming that run.
	ErrDuplicateRun = errors.New("duplicate run")
	// ErrRunExists: a create names a run id that is already stored.
	ErrRunExists = errors.New("a run with this id exists")
	// ErrLeaseLost: the task is gone or leased to someone else; the holder
	// must drop its result.
	ErrLeaseLost = errors.New("task lease lost")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
)

// DuplicateRunError reports a business-key conflict.
type DuplicateRunError struct {
	BusinessID string
	// ExistingRunID is the run that holds the id.
	ExistingRunID string
}

func (e *DuplicateRunError) Error() string {
	return "duplicate run: business id " + e.BusinessID + " is held by run " + e.ExistingRunID
}

// Is makes errors.Is(err, ErrDuplicateRun) true.
func (e *DuplicateRunError) Is(target error) bool { return target == ErrDuplicateRun }

// Store is implemented by every backend. Methods are safe for concurrent
// use. Times passed in params are the runtime's clock; backends compare
// and store them as given (UTC, microsecond precision).
type Store interface {
	// Apply performs changes, each in all-or-nothing fashion, ideally all
	// in one transaction, then the claims (which may lease tasks the
	// changes just created). It returns one result per change and one task
	// list per claim, in order; the error is for failures of the store
	// itself, after which nothing was applied.
	Apply(ctx context.Context, p *ApplyParams) (*ApplyResult, error)

	// GetRun returns a run by id, or ErrRunNotFound.
	GetRun(ctx context.Context, id string) (*Run, error)
	// FindRun returns the newest run with a business id (of a workflow,
	// when named), or ErrRunNotFound.
	FindRun(ctx context.Context, p *FindRunParams) (*Run, error)
	// ListRuns returns runs newest first, filtered, one page at a time.
	ListRuns(ctx context.Context, p *ListRunsParams) (*RunPage, error)
	// History returns a run's history in sequence order, or ErrRunNotFound.
	History(ctx context.Context, p *HistoryParams) ([]Event, error)

	// ClaimTasks leases up to Limit ready tasks of the given queues: tasks
	// whose ready time has come and that nobody holds a live lease on,
	// highest priority first, then oldest ready time. Each claim gets a
	// fresh token.
	ClaimTasks(ctx context.Context, p *ClaimParams) ([]*Task, error)
	// Heartbeat extends leases still held and returns the ids of those
	// that were lost (task gone, or claimed by someone else).
	Heartbeat(ctx context.Context, p *HeartbeatParams) (lost []int64, err error)
	// ReleaseTasks gives leased tasks back without completing them: they are
	// claimable at once. Leases no longer held are ignored.
	ReleaseTasks(ctx context.Context, leases []Lease) error
	// NextReady returns the earliest ready time among unleased tasks of the
	// queues (or the earliest lease expiry of leased ones), and false when
	// there are no tasks at all.
	NextReady(ctx context.Context, p *NextReadyParams) (time.Time, bool, error)

	// PruneRuns deletes finished runs (completed, failed, cancelled or
	// continued) that finished before a time, with their history and
	// tasks. It never deletes a run that is pending, running or waiting.
	PruneRuns(ctx context.Context, p *PruneParams) (int, error)

	// Close releases the store's resources.
	Close() error
}

// Run is a stored run.
type Run struct {
	ID       string
	Workflow string
	Version  int
	Kind     hephtype.RunKind
	Status   hephtype.RunStatus
	Input    json.RawMessage
	Output   json.RawMessage
	Error    string
	// BusinessID is "key::value" (with a suffix under ScopeNone), or "".
	BusinessID string
	KeyScope   businesskey.Scope
	ParentID   string
	Tags       []string
	Metadata   map[string]json.RawMessage
	// State is the runtime's snapshot of the run's position (the engine
	// state for flows); a cache that can be rebuilt from the history.
	State json.RawMessage
	// Published is state a code-first workflow publishes for queries.
	Published json.RawMessage
	// Seq is the sequence number of the last history entry.
	Seq        int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
}

// Event is a stored history entry.
type Event struct {
	RunID   string
	Seq     int64
	Kind    hephtype.EventKind
	Step    string
	Index   int
	Attempt int
	Name    string // the emitted event, signal name, marker id …
	Data    json.RawMessage
	Error   string
	At      time.Time
}

// NewEvent is a history entry to append; the store numbers it.
type NewEvent struct {
	Kind    hephtype.EventKind
	Step    string
	Index   int
	Attempt int
	Name    string
	Data    json.RawMessage
	Error   string
}

// TaskKind tells what a task asks a worker to do.
type TaskKind string

// The task kinds.
const (
	TaskStep     TaskKind = "step"     // run a step (or a map element, or an activity)
	TaskTimer    TaskKind = "timer"    // deliver a timer at its ready time
	TaskDecision TaskKind = "decision" // advance a code-first workflow
)

// Task is a unit of work in a queue.
type Task struct {
	ID       int64
	RunID    string
	Queue    string
	Kind     TaskKind
	Workflow string
	Version  int
	Step     string
	// Index is the element of a map step, or -1.
	Index    int
	Attempt  int
	Payload  json.RawMessage
	Item     json.RawMessage
	Priority int
	ReadyAt  time.Time
	// Lease, when claimed.
	Owner      string
	Token      int64
	LeaseUntil time.Time
	// Claims counts how often the task was claimed (one more than the
	// number of lost leases, when it runs).
	Claims    int
	CreatedAt time.Time
}

// Lease identifies a claim: the task and the token it was claimed with.
type Lease struct {
	TaskID int64
	Token  int64
}

// Lease returns the task's current lease.
func (t *Task) Lease() Lease { return Lease{TaskID: t.ID, Token: t.Token} }

// NewTask is a task to enqueue.
type NewTask struct {
	Queue    string
	Kind     TaskKind
	Step     string
	Index    int
	Attempt  int
	Payload  json.RawMessage
	Item     json.RawMessage
	Priority int
	ReadyAt  time.Time
}

// TaskMatch selects tasks of a run to cancel: every task of the kind (all
// kinds when empty) and step (all steps when empty), and, when Index >= 0,
// that element only.
type TaskMatch struct {
	Kind  TaskKind
	Step  string
	Index int
}

// ApplyParams carries the changes for Apply.
type ApplyParams struct {
	Changes []Change
	// Claims lease ready tasks after the changes, in the same transaction:
	// a step's successor is claimed by the commit that completes the step.
	// Their Now is the Apply's Now.
	Claims []ClaimParams
	// Now is the current time for every change and claim. Required.
	Now time.Time
}

// ApplyResult is what Apply did.
type ApplyResult struct {
	// Changes holds one result per change, in order.
	Changes []ChangeResult
	// Claimed holds the tasks leased by each claim, in order.
	Claimed [][]*Task
}

// Change is one atomic state change: the creation of a run, or an update
// of an existing run decided from its current state.
type Change struct {
	// Create inserts a new run (RunID and Decide are ignored).
	Create *NewRun

	// RunID names the run to update.
	RunID string
	// Fence, when set, is the lease of the task being completed: the change
	// is refused with ErrLeaseLost unless the task still exists with this
	// token, and the task is deleted with the change.
	Fence *Lease
	// Decide receives the run as stored and returns what to write. An error
	// refuses the change (it is returned in the result, nothing is
	// written). It may be called more than once and must have no effects
	// beyond its return value.
	Decide func(run *Run) (*Update, error)
}

// NewRun is a run to create, with its first history and tasks.
type NewRun struct {
	ID         string
	Workflow   string
	Version    int
	Kind       hephtype.RunKind
	Status     hephtype.RunStatus
	Input      json.RawMessage
	BusinessID string
	// KeyScope decides uniqueness, per workflow: ScopeActive (also when
	// empty) allows one active run per business id, ScopeForever one run
	// ever, ScopeNone (or an empty BusinessID) no check.
	KeyScope businesskey.Scope
	ParentID string
	Tags     []string
	Metadata map[string]json.RawMessage
	State    json.RawMessage
	Output   json.RawMessage
	Error    string
	History  []NewEvent
	Tasks    []NewTask
}

// Update is what a Decide function returns: everything to write for one
// change of a run. Zero fields leave the run as it is.
type Update struct {
	Status    hephtype.RunStatus
	State     json.RawMessage
	Output    json.RawMessage
	Error     string
	Published json.RawMessage
	History   []NewEvent
	Tasks     []NewTask
	// Cancel deletes matching tasks of the run (queued or leased: a leased
	// task's holder then loses its lease).
	Cancel []TaskMatch
}

// ChangeResult is the outcome of one change.
type ChangeResult struct {
	// Run is the run after the change (nil when it was refused).
	Run *Run
	// Tasks are the tasks the change enqueued, with their ids.
	Tasks []*Task
	// Err is why the change was refused: ErrRunNotFound, ErrRunExists,
	// ErrLeaseLost, a *DuplicateRunError, or the error Decide returned.
	Err error
}

// ListRunsParams filters ListRuns. Zero fields do not filter.
type ListRunsParams struct {
	Workflow   string
	Statuses   []hephtype.RunStatus
	BusinessID string
	// Tags keeps runs that have every one of these tags.
	Tags          []string
	CreatedAfter  time.Time // inclusive
	CreatedBefore time.Time // exclusive
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor continues from RunPage.Next.
	Cursor string
}

// RunPage is one page of runs; Next is empty on the last page.
type RunPage struct {
	Runs []*Run
	Next string
}

// FindRunParams names a run by business id.
type FindRunParams struct {
	// Workflow restricts the search to one workflow; empty means any.
	Workflow   string
	BusinessID string
}

// HistoryParams selects history entries: those after AfterSeq, at most
// Limit of them (all when 0).
type HistoryParams struct {
	RunID    string
	AfterSeq int64
	Limit    int
}

// ClaimParams asks for tasks.
type ClaimParams struct {
	Queues   []string
	Owner    string
	Limit    int
	LeaseFor time.Duration
	Now      time.Time
}

// HeartbeatParams extends leases until Until.
type HeartbeatParams struct {
	Leases []Lease
	Until  time.Time
}

// NextReadyParams asks when a task of the queues is next claimable.
type NextReadyParams struct {
	Queues []string
}

// PruneParams selects finished runs to delete.
type PruneParams struct {
	FinishedBefore time.Time
	// Limit bounds the runs deleted in one call; defaults to 1000.
	Limit int
}

// Notifier is implemented by stores that tell other processes when tasks
// become ready (PostgreSQL: LISTEN/NOTIFY). Notifications are hints: one
// may be lost or late, so runtimes keep polling underneath, and a lost
// notification costs latency, never correctness.
type Notifier interface {
	// Listen calls fn with the name of a queue whenever a commit (of any
	// process) made tasks of that queue ready, until ctx ends. It
	// reconnects by itself after connection failures and returns only
	// when ctx ends.
	Listen(ctx context.Context, fn func(queue string)) error
}

// ConcurrentApplier is implemented by stores that apply several batches at
// once to advantage (PostgreSQL, over a pool of connections). Runtimes run
// that many commit loops; other stores get one.
type ConcurrentApplier interface {
	ApplyConcurrency() int
}
