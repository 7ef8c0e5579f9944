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
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	// ErrDuplicateChange: the change's Key is in the run's history
	// already: the change was applied before (a retried commit, a request
	// sent twice) and is not applied again.
	ErrDuplicateChange = errors.New("change applied already")
	// ErrTaskNotFound: no task has the given id (it was completed or
	// cancelled, or never existed).
	ErrTaskNotFound = errors.New("task not found")
)

// RunNotFound returns the error of a run id that names no run: its
// message is "run ID not found" and it is ErrRunNotFound. Backends
// return it unwrapped, so that callers need not repeat the id.
func RunNotFound(id string) error { return &runNotFoundError{id: id} }

type runNotFoundError struct{ id string }

func (e *runNotFoundError) Error() string { return "run " + e.id + " not found" }

// Is makes errors.Is(err, ErrRunNotFound) true.
func (e *runNotFoundError) Is(target error) bool { return target == ErrRunNotFound }

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
	// itself, after which nothing was applied — unless the transaction's
	// COMMIT was sent, its answer lost with the connection, and the store
	// could not learn whether it happened (or it did, but the results were
	// lost with it). A backend learns the outcome when it can (PostgreSQL
	// asks the server). Callers may retry a failed Apply only with changes
	// that are idempotent: fenced (a retry finds the task gone), keyed
	// (Change.Key), creates (ErrRunExists), or decided from the stored
	// run so that a second application is refused.
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
	// GetTask returns a task by id, with its lease as stored (Owner,
	// Token, LeaseUntil), or ErrTaskNotFound. It takes no lock: a change
	// that acts on what it read is fenced by the lease it read.
	GetTask(ctx context.Context, id int64) (*Task, error)
	// NextReady returns the earliest ready time among unleased tasks of the
	// queues (or the earliest lease expiry of leased ones), and false when
	// there are no tasks at all.
	NextReady(ctx context.Context, p *NextReadyParams) (time.Time, bool, error)

	// PruneRuns deletes finished runs (completed, failed, cancelled or
	// continued) that finished before a time, with their history. It never
	// deletes a run that is pending, running or waiting, nor a finished
	// run that still has tasks: work the run left to do (starting the run
	// that continues it, reporting to its parent, cancelling its
	// children) keeps it until that work is done.
	PruneRuns(ctx context.Context, p *PruneParams) (int, error)
	// DeleteRun deletes one run with everything kept under its id (its
	// history, tasks, requests and step logs) in one transaction, and
	// returns what it deleted. ErrRunNotFound when there is no such run;
	// ErrRunActive, deleting nothing, when the run is active or has
	// tasks left and p.Force is not set. Its child runs are not deleted:
	// their parent id names a run that is gone, as after PruneRuns.
	DeleteRun(ctx context.Context, p *DeleteRunParams) (*DeletedRun, error)

	// StrandedTasks returns tasks of a queue that no worker of a given
	// set can run: claimable at p.Now (unleased, or their lease expired),
	// ready before p.ReadyBefore, with a Handler that is not empty and not
	// in p.Served. Oldest ready first (then by id), at most p.Limit.
	StrandedTasks(ctx context.Context, p *StrandedParams) ([]*Task, error)

	// RegisterWorker records a live worker, or refreshes its record: it
	// counts as live until w.ExpiresAt. The record's ID is the key.
	RegisterWorker(ctx context.Context, w *Worker) error
	// RemoveWorker deletes a worker's record (it stopped). Removing a
	// worker that has none is not an error.
	RemoveWorker(ctx context.Context, id string) error
	// ListWorkers returns the workers live at p.Now (ExpiresAt after it),
	// by ID. Expired records may be deleted on the way.
	ListWorkers(ctx context.Context, p *ListWorkersParams) ([]*Worker, error)

	// RunStats computes the figures of an overview (stats.go): the runs
	// started and finished in each bucket of a window, the latency of
	// those completed in it, and the active, blocked and stale runs.
	// Invalid parameters give an error that wraps
	// hephtype.ErrInvalidInput.
	RunStats(ctx context.Context, p *RunStatsParams) (*RunStats, error)

	// Requester records requests to runs and their answers (request.go).
	Requester

	// Documents keeps flow documents, by name, version and content hash
	// (document.go).
	Documents

	// Schedules keeps schedules and their tick logs (schedule.go).
	Schedules
	// Events keeps the events sent to the engine (event.go).
	Events
	// Triggers keeps the triggers that start runs on events, and their
	// firings (trigger.go).
	Triggers
	// EventWaits keeps the runs' waits for events (eventwait.go).
	EventWaits
	// TriggerGroups keeps the groups of events of the triggers that
	// debounce, throttle or batch them (triggergroup.go).
	TriggerGroups
	// Queues keeps the flow control of task queues (queue.go).
	Queues
	// Versions keeps version rules and version states (version.go).
	Versions
	// Principals, tokens, sessions, the audit log and bulk operations
	// are the server's concerns, not the engine's: they are behind the
	// separate Admin interface (admin.go), which both backends also
	// implement.
	// RemoteClaims keeps the facts of claims handed to remote workers
	// (remoteclaim.go).
	RemoteClaims
	// StepLogs keeps what step code logs (logs.go).
	StepLogs
	// Catalog keeps the definitions every process publishes
	// (catalog.go).
	Catalog
	// Builds counts the open runs of workflows per build and keeps the
	// retired builds (builds.go).
	Builds
	// Due tells when the tasks of runs are due (due.go).
	Due
	// Deadlines finds the runs whose execution deadline passed
	// (deadline.go).
	Deadlines
	// RunTasks lists the tasks of a run (runtasks.go).
	RunTasks

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
	// ConcurrencyKey groups the run's work for flow control (per-key
	// concurrency and rate limits, fairness); "" for none. Set when the
	// run is created; every task of the run carries it.
	ConcurrencyKey string
	// TraceContext is the W3C traceparent of the run's root span
	// ("00-<trace id>-<span id>-<flags>"), "" when the run is not traced.
	// Set when the run is created and never changed; every task of the run
	// carries it (Task.TraceContext), so a worker in any process parents
	// its spans in the run's trace without reading the run. At most
	// MaxTraceContext (256) bytes of printable ASCII (CheckTraceContext).
	TraceContext string
	// BuildID is the build (a worker process's Config.BuildID) that
	// started the run; for a code-first workflow run that auto-upgrades,
	// the build that last decided it. "" for a run started before builds
	// were recorded, and for flow runs. At most MaxBuildID bytes.
	BuildID string
	// Deadline, when not zero, is when the run times out if it has not
	// finished (its execution timeout, counted from its creation). Set
	// when the run is created and never changed.
	Deadline time.Time
	// State is the runtime's snapshot of the run's position (the engine
	// state for flows); a cache that can be rebuilt from the history.
	State json.RawMessage
	// Published is state a code-first workflow publishes for queries.
	Published json.RawMessage
	// Condition says why an active run does not progress, when the
	// runtime knows (zero otherwise).
	Condition Condition
	// Paused, when not nil, says that the run is paused: its tasks are
	// not claimed (those leased when it was paused finish) until it is
	// unpaused. A run that finishes is no longer paused.
	Paused *Pause
	// SearchAttributes are the run's typed search attributes
	// (docs/operations.md, Search attributes): set when it is created
	// (NewRun.SearchAttributes), upserted by its changes
	// (Update.SearchAttributes), filtered by ListRunsParams.Attrs.
	SearchAttributes map[string]Attr
	// Seq is the sequence number of the last history entry.
	Seq        int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt time.Time
}

// Condition is what keeps an active run from progressing, as the runtime
// recorded it: the decision of a workflow keeps failing, no live worker can
// run one of its tasks … The zero Condition means nothing is known to be
// wrong.
type Condition struct {
	// Code names the condition: a short lower-case word, such as
	// "decision_failing" or "unserved".
	Code string `json:"code,omitempty"`
	// Message is the last error, for people.
	Message string `json:"message,omitempty"`
	// Since is when the condition was first recorded.
	Since time.Time `json:"since,omitzero"`
}

// IsZero reports whether c records nothing.
func (c Condition) IsZero() bool { return c.Code == "" && c.Message == "" }

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
	// Key is the idempotency key of the change that appended the entry
	// (Change.Key), on the first entry of that change only.
	Key string
	At  time.Time
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
	TaskStep     TaskKind = "step"     // run a step of a flow (or a map element)
	TaskTimer    TaskKind = "timer"    // deliver a flow's timer at its ready time
	TaskDecision TaskKind = "decision" // advance a code-first workflow
	// TaskActivity runs one attempt of a workflow's activity: Step is the
	// activity, Index the sequence number of its command.
	TaskActivity TaskKind = "activity"
	// TaskWorkflowTimer fires a workflow's timer, started as command Index.
	TaskWorkflowTimer TaskKind = "workflow_timer"
	// TaskWorkflowOp carries out an operation of a workflow on other runs
	// (Step says which): starting or cancelling a child, reporting to the
	// parent, starting the run that continues this one.
	TaskWorkflowOp TaskKind = "workflow_op"
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
	// Handler names what a worker must have to run the task (set by the
	// runtime, opaque to the store): claims that list Handlers skip tasks
	// whose Handler is not among them. Empty: any worker can run it.
	Handler string
	// Details are the heartbeat details last recorded for the task
	// (HeartbeatParams.Details), or those it was created with.
	Details json.RawMessage
	// Lease, when claimed.
	Owner      string
	Token      int64
	LeaseUntil time.Time
	// Claims counts how often the task was claimed (one more than the
	// number of lost leases, when it runs).
	Claims    int
	CreatedAt time.Time
	// ConcurrencyKey is the run's concurrency key on work tasks (kinds
	// step and activity, which flow control governs); "" on the others.
	ConcurrencyKey string
	// TraceContext is the run's (Run.TraceContext), copied into every task
	// of the run when the task is inserted.
	TraceContext string
	// Tags and Metadata are the run's (Run.Tags, Run.Metadata), copied
	// when the task is inserted (they never change after the run is
	// created), so that what a worker reports of the task names them
	// without reading the run. Nil when the run has none, as on Run.
	Tags     []string
	Metadata map[string]json.RawMessage
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
	// Handler: see Task.Handler.
	Handler string
	// Details: see Task.Details (a retry carries its predecessor's).
	Details json.RawMessage
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
	// Create inserts a new run (RunID, Decide and Key are ignored).
	Create *NewRun

	// RunID names the run to update.
	RunID string
	// Fence, when set, is the lease of the task being completed: the change
	// is refused with ErrLeaseLost unless the task still exists with this
	// token, and the task is deleted with the change. The task may belong
	// to another run than the one changed (a child reporting to its
	// parent). A Create may be fenced too: the run is created only while
	// the lease is held, and the task is deleted with the creation (a
	// create refused for another reason leaves the task as it is).
	Fence *Lease
	// Key, when set, makes the change idempotent within its run: the
	// change is refused with ErrDuplicateChange, writing nothing, if the
	// run's history holds an entry with this key; otherwise the key is
	// stored on the first history entry the change appends (a change that
	// appends none records no key). A lost lease is reported before a
	// duplicate key. At most 200 bytes.
	Key string
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
	// ConcurrencyKey: see Run.ConcurrencyKey.
	ConcurrencyKey string
	// TraceContext: see Run.TraceContext.
	TraceContext string
	// BuildID: see Run.BuildID.
	BuildID string
	// Deadline: see Run.Deadline.
	Deadline time.Time
	// SearchAttributes: see Run.SearchAttributes (CheckAttrs).
	SearchAttributes map[string]Attr
	State            json.RawMessage
	Output           json.RawMessage
	Error            string
	History          []NewEvent
	Tasks            []NewTask
	// VersionGen, when positive, is the version generation of the policy
	// the run's version was chosen from (VersionPolicy.Gen): the create is
	// refused with ErrVersionPolicyChanged, writing nothing, unless the
	// store's generation is still this one in the create's transaction.
	VersionGen int64
}

// Update is what a Decide function returns: everything to write for one
// change of a run. Zero fields leave the run as it is.
type Update struct {
	Status    hephtype.RunStatus
	State     json.RawMessage
	Output    json.RawMessage
	Error     string
	Published json.RawMessage
	// Condition, when not nil, replaces the run's condition (a zero
	// Condition clears it).
	Condition *Condition
	// BuildID, when not empty, replaces the run's build (Run.BuildID): a
	// run that auto-upgrades records the build that decided it last.
	BuildID string
	// Pause, when not nil, pauses the run (Run.Paused); Unpause clears
	// it. At most one of the two.
	Pause   *Pause
	Unpause bool
	// Release releases the leases of the run's leased tasks: their
	// holders lose them (commits are refused with ErrLeaseLost,
	// heartbeats fail, stores that notify tell their processes) and the
	// tasks are claimable again, at once, or after unpause when the run is
	// paused. A pause that cancels what runs sets it.
	Release bool
	History []NewEvent
	Tasks   []NewTask
	// Cancel deletes matching tasks of the run (queued or leased: a leased
	// task's holder then loses its lease; stores that notify tell the
	// holder's process, see Notifier).
	Cancel []TaskMatch
	// Reopen makes a finished run active again (a failed flow run that is
	// retried); Status must be set. The run's Error, Output and FinishedAt
	// are cleared (before Error and Output are set; a finished Status sets
	// FinishedAt anew), and when Status is active, a business id of
	// ScopeActive, which the run released when it finished, is taken
	// again: the change is refused with a *DuplicateRunError when another
	// active run holds it meanwhile.
	Reopen bool
	// SearchAttributes, when not empty, upserts the run's search
	// attributes (Run.SearchAttributes): each replaces the attribute of
	// its name or adds it. It is written with the rest of the change, so
	// the change's fence and key fence it too.
	SearchAttributes map[string]Attr
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
	// Kind keeps the runs of one kind (flow or workflow).
	Kind hephtype.RunKind
	// Queue keeps the runs that have a task (queued or leased) in this
	// queue, and, when QueueWorkflows is not empty, every run of those
	// workflows: a run that has finished has no task left, so a caller
	// that knows which workflows declare their work on the queue names
	// them.
	Queue          string
	QueueWorkflows []string
	// Metadata keeps the runs whose metadata has each key with a value
	// equal to the given one: a JSON string equals the string it holds; a
	// number, a boolean or null equals its JSON text as the store keeps
	// it ("42", "1.5", "true", "null"); an object or an array equals
	// nothing.
	Metadata map[string]string
	// Text keeps the runs in which it occurs, ignoring the case of ASCII
	// letters, in the id, the workflow name, the business id, a tag or the
	// error. It scans the runs that the other filters keep.
	Text string
	// Version keeps the runs of one definition version (0: any).
	Version int
	// ParentID keeps the runs whose parent is this run: the children a
	// workflow started.
	ParentID string
	// BuildID keeps the runs of one build (Run.BuildID).
	BuildID string
	// DueAfter, when not zero, keeps the pending and running runs that
	// have tasks and none of them ready at this time: every task is due
	// later (the runs shown as scheduled, see Due).
	DueAfter time.Time
	// IDs keeps only these runs (empty: any). At most MaxListIDs of them;
	// more is an error that wraps hephtype.ErrInvalidInput.
	IDs []string
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Cursor continues from RunPage.Next.
	Cursor string
	// ChangedAfter, when not zero, keeps the runs whose last change
	// (UpdatedAt, then ID) comes after (ChangedAfter, ChangedAfterID) and
	// orders the page by it, the oldest change first: the runs created or
	// changed since a point, in the order they changed (what follows the
	// list). RunPage.Next is then the EncodeRunCursor of the last run's
	// UpdatedAt and ID (read it with DecodeRunCursor); Cursor must be
	// empty.
	ChangedAfter   time.Time
	ChangedAfterID string
	// Attrs keeps the runs whose search attributes meet every condition
	// (AttrFilter.Check; see AttrFilter.Matches).
	Attrs AttrFilter
}

// MaxListIDs bounds ListRunsParams.IDs.
const MaxListIDs = 1000

// Check validates the parameters a backend cannot interpret: the errors
// wrap hephtype.ErrInvalidInput.
func (p *ListRunsParams) Check() error {
	if p.Limit < 0 {
		return fmt.Errorf("%w: Limit must not be negative, got %d", hephtype.ErrInvalidInput, p.Limit)
	}
	if p.Version < 0 {
		return fmt.Errorf("%w: Version must not be negative, got %d", hephtype.ErrInvalidInput, p.Version)
	}
	if err := p.Attrs.Check(); err != nil {
		return err
	}
	if len(p.IDs) > MaxListIDs {
		return fmt.Errorf("%w: IDs has %d run ids, more than %d", hephtype.ErrInvalidInput, len(p.IDs), MaxListIDs)
	}
	if p.Cursor != "" {
		if _, _, err := DecodeRunCursor(p.Cursor); err != nil {
			return err
		}
		if !p.ChangedAfter.IsZero() {
			return fmt.Errorf("%w: Cursor and ChangedAfter exclude each other: continue a list of changes with ChangedAfter", hephtype.ErrInvalidInput)
		}
	}
	return nil
}

// EncodeRunCursor returns the cursor of a page of runs that ends with the
// run id created at at: the next page starts after it. Both backends
// write and read this one form (Unix microseconds and the id, base64).
func EncodeRunCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "," + id))
}

// DecodeRunCursor returns the creation time and id a cursor of runs ends
// at; the error wraps hephtype.ErrInvalidInput, for text that is not
// base64 and for base64 that does not hold a cursor.
func DecodeRunCursor(c string) (at time.Time, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		us, rest, ok := strings.Cut(string(b), ",")
		n, err := strconv.ParseInt(us, 10, 64)
		if ok && err == nil && rest != "" && utf8.ValidString(rest) && !strings.ContainsRune(rest, 0) {
			return time.UnixMicro(n).UTC(), rest, nil
		}
	}
	return time.Time{}, "", fmt.Errorf("%w: %q is not a cursor of a list of runs", hephtype.ErrInvalidInput, c)
}

// PageSize returns the page size ListRuns uses for p.Limit.
func (p *ListRunsParams) PageSize() int {
	switch {
	case p.Limit <= 0:
		return 100
	case p.Limit > 1000:
		return 1000
	}
	return p.Limit
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
	Queues []string
	// Handlers, when not nil, restricts the claim to tasks whose Handler
	// is empty or one of these: a worker claims only what it can run.
	Handlers []string
	// Strict, with Handlers, leaves out the tasks whose Handler is empty
	// too (workflow timers and operations, which need a worker that has
	// the runtime): the claim gets only tasks of the listed handlers. A
	// worker outside the process claims strictly. Ignored when Handlers
	// is nil.
	Strict   bool
	Owner    string
	Limit    int
	LeaseFor time.Duration
	Now      time.Time
}

// ClaimOrder orders tasks as claims take them: priority first (highest
// first), then ready time, then id.
func ClaimOrder(a, b *Task) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.ReadyAt.Compare(b.ReadyAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// HandlerSet is the set of handlers the claim's tasks may have, as
// backends filter them: nil for any task; otherwise Handlers, and the
// empty handler (tasks any worker runs) unless the claim is Strict.
func (p *ClaimParams) HandlerSet() []string {
	if p.Handlers == nil {
		return nil
	}
	out := make([]string, 0, len(p.Handlers)+1)
	out = append(out, p.Handlers...)
	if !p.Strict {
		out = append(out, "")
	}
	return out
}

// HeartbeatParams extends leases until Until.
type HeartbeatParams struct {
	Leases []Lease
	Until  time.Time
	// Details, by task id, are recorded on the tasks of leases still held
	// (Task.Details); tasks not named keep theirs.
	Details map[int64]json.RawMessage
}

// NextReadyParams asks when a task of the queues is next claimable.
type NextReadyParams struct {
	Queues []string
	// Handlers restricts the tasks considered, as ClaimParams.Handlers.
	Handlers []string
}

// StrandedParams selects the tasks StrandedTasks returns.
type StrandedParams struct {
	Queue string
	// Served are the handlers some live worker of the queue has.
	Served      []string
	ReadyBefore time.Time
	Now         time.Time
	// PerRun returns only the oldest stranded task of each run, so that
	// Limit counts runs: one run with many stranded tasks (a map step)
	// does not hide the others.
	PerRun bool
	// Limit defaults to 100.
	Limit int
}

// Worker is the record of a live worker process (a Client with workers).
type Worker struct {
	ID string
	// Queues it claims from, and the Handlers it has (see Task.Handler).
	Queues   []string
	Handlers []string
	// BuildID is the build of the worker's process (its Config.BuildID).
	BuildID string
	// Host and PID tell people where it runs.
	Host      string
	PID       int
	StartedAt time.Time
	// SeenAt is when it last refreshed its record; it counts as live
	// until ExpiresAt.
	SeenAt    time.Time
	ExpiresAt time.Time
}

// ListWorkersParams selects the live workers.
type ListWorkersParams struct {
	Now time.Time
}

// PruneParams selects finished runs to delete.
type PruneParams struct {
	FinishedBefore time.Time
	// Limit bounds the runs deleted in one call; defaults to 1000.
	Limit int
	// Workflows, when not nil, deletes only runs of these workflows (flow,
	// workflow, document or job kind names).
	Workflows []string
	// ExceptWorkflows keeps runs of these workflows.
	ExceptWorkflows []string
	// Statuses, when not empty, deletes only runs in these finished
	// statuses (completed, failed, cancelled, continued); others are
	// refused.
	Statuses []hephtype.RunStatus
}

// Check reports what is wrong with p, naming the field.
func (p *PruneParams) Check() error {
	switch {
	case p.FinishedBefore.IsZero():
		return errors.New("FinishedBefore is zero")
	case p.Limit < 0:
		return fmt.Errorf("Limit must not be negative, got %d", p.Limit)
	}
	for _, st := range p.Statuses {
		if !st.Terminal() {
			return fmt.Errorf("Statuses: %q is not a finished status (completed, failed, cancelled or continued)", st)
		}
	}
	return nil
}

// PruneStatuses is p.Statuses, or every finished status when it is empty.
func (p *PruneParams) PruneStatuses() []string {
	if len(p.Statuses) == 0 {
		return []string{"completed", "failed", "cancelled", "continued"}
	}
	out := make([]string, len(p.Statuses))
	for i, st := range p.Statuses {
		out[i] = string(st)
	}
	return out
}

// Notifier is implemented by stores that tell other processes when tasks
// become ready, and when leased tasks were cancelled (PostgreSQL:
// LISTEN/NOTIFY). Notifications are hints: one may be lost or late, so
// runtimes keep polling and heartbeating underneath, and a lost
// notification costs latency, never correctness.
type Notifier interface {
	// Listen calls fn with a Notification whenever a commit (of any
	// process) made tasks of a queue ready, or cancelled leased tasks of
	// a run, until ctx ends. It reconnects by itself after connection
	// failures and returns only when ctx ends.
	Listen(ctx context.Context, fn func(Notification)) error
}

// Notification is one hint from a Notifier: exactly one field is set.
type Notification struct {
	// Queue: tasks of this queue became ready.
	Queue string
	// RunID: a commit deleted leased tasks of this run (Update.Cancel):
	// the processes running them should check their leases now.
	RunID string
	// Resync: the store (re)started listening. What other processes
	// notified before is lost: check every lease held and claim now.
	Resync bool
}

// ConcurrentApplier is implemented by stores that apply several batches at
// once to advantage (PostgreSQL, over a pool of connections). Runtimes run
// that many commit loops; other stores get one.
type ConcurrentApplier interface {
	ApplyConcurrency() int
}
