package hephaestus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	"github.com/hephaestus-go/hephaestus/store"
)

// Client starts, inspects and steers runs, and (after Start) runs the
// workers of its queues. It is safe for concurrent use.
type Client struct {
	cfg    Config
	flows  registry
	wf     *wfRuntime
	commit *committer
	hooks  hooks

	waitMu  sync.Mutex
	waiters map[string][]chan *store.Run

	leases *leaseKeeper
	// handlers are what this process can run (Task.Handler), for claims.
	handlers atomic.Pointer[[]string]

	wakeMu    sync.Mutex
	wakes     map[string]chan struct{}
	nextReady map[string]time.Time // earliest known future ready time by queue

	lifeMu  sync.Mutex
	started bool
	stopped bool
	workers *workers
}

// New returns a Client for cfg. It starts no goroutine: call Start to run
// workers; a Client without workers can still start and steer runs that
// other processes execute.
func New(cfg *Config) (*Client, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("hephaestus: %w", err)
	}
	cl := &Client{cfg: c, waiters: map[string][]chan *store.Run{}, wakes: map[string]chan struct{}{}, nextReady: map[string]time.Time{}}
	cl.commit = newCommitter(cl)
	cl.leases = newLeaseKeeper(cl)
	cl.wf = newWfRuntime(&c)
	cl.updateHandlers()
	for q := range c.Queues {
		cl.wakes[q] = make(chan struct{}, 1)
	}
	return cl, nil
}

// Register makes flows known to the client. Register every version that
// still has runs: a run stays on the version it started with, and new runs
// take the latest. Registering a flow again with the same version and the
// same shape is a no-op; with a different shape it is ErrFlowConflict.
func (c *Client) Register(flows ...*flow.Flow) error {
	for _, f := range flows {
		if f == nil {
			return errors.New("hephaestus: Register: nil flow")
		}
		if err := c.flows.add(f); err != nil {
			return err
		}
	}
	c.updateHandlers()
	return nil
}

// StartOptions are the optional parameters of StartRun.
type StartOptions struct {
	// BusinessValue is the value of the flow's business key; required
	// when the flow declares one (the run's business id is key::value).
	BusinessValue string
	// Version pins a registered version instead of the latest.
	Version int
	// Tags are added to the flow's tags on the run.
	Tags []string
	// Metadata is merged over the flow's metadata on the run.
	Metadata map[string]any
}

// StartRun starts a run of the named flow with input (encoded as JSON) and
// returns it as stored, without waiting for it to progress.
func (c *Client) StartRun(ctx context.Context, flowName string, input any, opts *StartOptions) (*Run, error) {
	nr, f, err := c.newRun(flowName, input, opts)
	if err != nil {
		return nil, err
	}
	r, err := c.commit.submit(ctx, store.Change{Create: nr})
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	c.emit(Event{Kind: RunStarted, RunID: nr.ID, Workflow: f.Name(), Version: f.Version()})
	return c.toRun(r.res.Run), nil
}

// StartRequest is one run for StartRuns.
type StartRequest struct {
	Input   any
	Options *StartOptions
}

// StartRuns starts many runs of a flow at once, committed together (in
// batches of Config.MaxCommitBatch): the way to enqueue jobs in bulk. Every
// request is checked first; if one is invalid, none is started. Runs that
// the store refuses (a business-key conflict) leave a nil in the result,
// and the error joins the reasons, each naming its request's index.
func (c *Client) StartRuns(ctx context.Context, flowName string, reqs []StartRequest) ([]*Run, error) {
	changes := make([]store.Change, len(reqs))
	var f *flow.Flow
	for i, rq := range reqs {
		nr, fl, err := c.newRun(flowName, rq.Input, rq.Options)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		f = fl
		changes[i] = store.Change{Create: nr}
	}
	results, err := c.commit.submitAll(ctx, changes)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	runs := make([]*Run, len(reqs))
	var errs []error
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("start %q, request %d: %w", flowName, i, r.err))
			continue
		}
		runs[i] = c.toRun(r.res.Run)
		c.emit(Event{Kind: RunStarted, RunID: runs[i].ID, Workflow: f.Name(), Version: f.Version()})
	}
	return runs, errors.Join(errs...)
}

// newRun checks a start request and builds the run to create.
func (c *Client) newRun(flowName string, input any, opts *StartOptions) (*store.NewRun, *flow.Flow, error) {
	if opts == nil {
		opts = &StartOptions{}
	}
	f, err := c.flows.get(flowName, opts.Version)
	if err != nil {
		return nil, nil, err
	}
	raw, err := encodeInput(f, input)
	if err != nil {
		return nil, nil, err
	}
	if err := c.checkInput(raw, "the input"); err != nil {
		return nil, nil, fmt.Errorf("start %q: %w", flowName, err)
	}
	key, scope := f.BusinessKey()
	var bid string
	switch {
	case key != "":
		if bid, err = businesskey.New(key, opts.BusinessValue, scope, nil); err != nil {
			return nil, nil, fmt.Errorf("start %q: %w: %w", flowName, ErrInvalidInput, err)
		}
	case opts.BusinessValue != "":
		return nil, nil, fmt.Errorf("start %q: %w: the flow declares no business key, so BusinessValue must be empty", flowName, ErrInvalidInput)
	}
	meta := f.Metadata()
	for k, v := range opts.Metadata {
		b, err := json.Marshal(v)
		if err != nil || k == "" {
			return nil, nil, fmt.Errorf("start %q: %w: metadata %q is not a JSON value", flowName, ErrInvalidInput, k)
		}
		meta[k] = b
	}
	tags := f.Tags()
	for _, t := range opts.Tags {
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	d := engine.Start(f.Graph(), raw)
	u := translate(f, d, c.cfg.Clock.Now())
	nr := &store.NewRun{
		ID: newID(), Workflow: f.Name(), Version: f.Version(), Kind: hephtype.KindFlow,
		Status: u.Status, Input: raw, BusinessID: bid, KeyScope: scope, Tags: tags, Metadata: meta,
		State: u.State, Output: u.Output, Error: u.Error, History: u.History, Tasks: u.Tasks,
	}
	if bid == "" {
		nr.KeyScope = businesskey.ScopeNone
	}
	return nr, f, nil
}

func encodeInput(f *flow.Flow, input any) (json.RawMessage, error) {
	var raw json.RawMessage
	switch v := input.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(input)
		if err != nil {
			return nil, fmt.Errorf("start %q: %w: input does not encode as JSON: %w", f.Name(), ErrInvalidInput, err)
		}
		raw = b
	}
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("start %q: %w: input is not valid JSON", f.Name(), ErrInvalidInput)
	}
	if t := f.InputType(); t != nil {
		if err := json.Unmarshal(raw, reflect.New(t).Interface()); err != nil {
			return nil, fmt.Errorf("start %q: %w: input does not decode into %s: %w", f.Name(), ErrInvalidInput, t, err)
		}
	}
	return raw, nil
}

// Run starts a run and waits until it finishes (see WaitRun).
func (c *Client) Run(ctx context.Context, flowName string, input any, opts *StartOptions) (*Run, error) {
	r, err := c.StartRun(ctx, flowName, input, opts)
	if err != nil {
		return nil, err
	}
	return c.WaitRun(ctx, r.ID)
}

// WaitRun waits until the run is completed, failed or cancelled, and
// returns it. A run that waits for a resume keeps WaitRun waiting; bound
// it with ctx.
func (c *Client) WaitRun(ctx context.Context, runID string) (*Run, error) {
	ch := make(chan *store.Run, 1)
	c.waitMu.Lock()
	c.waiters[runID] = append(c.waiters[runID], ch)
	c.waitMu.Unlock()
	defer c.unwait(runID, ch)
	poll := 10 * time.Millisecond
	for {
		r, err := c.cfg.Store.GetRun(ctx, runID)
		if err != nil {
			return nil, err
		}
		if r.Status.Terminal() {
			return c.toRun(r), nil
		}
		// Local completions arrive on ch at once; the poll catches runs
		// finished by other processes.
		select {
		case r := <-ch:
			return c.toRun(r), nil
		case <-c.cfg.Clock.After(poll):
			poll = min(poll*2, c.cfg.PollInterval)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *Client) unwait(runID string, ch chan *store.Run) {
	c.waitMu.Lock()
	defer c.waitMu.Unlock()
	ws := c.waiters[runID]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(c.waiters, runID)
	} else {
		c.waiters[runID] = ws
	}
}

// GetRun returns a run by id.
func (c *Client) GetRun(ctx context.Context, runID string) (*Run, error) {
	r, err := c.cfg.Store.GetRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("get run %s: %w", runID, err)
	}
	return c.toRun(r), nil
}

// ListOptions filters ListRuns; zero fields do not filter.
type ListOptions struct {
	Flow          string
	Statuses      []hephtype.RunStatus
	BusinessID    string
	Tags          []string
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Limit defaults to 100.
	Limit int
	// Cursor continues from RunList.Next.
	Cursor string
}

// RunList is one page of runs, newest first.
type RunList struct {
	Runs []*Run
	// Next is the cursor of the next page, empty on the last.
	Next string
}

// ListRuns lists runs, newest first.
func (c *Client) ListRuns(ctx context.Context, opts *ListOptions) (*RunList, error) {
	if opts == nil {
		opts = &ListOptions{}
	}
	p, err := c.cfg.Store.ListRuns(ctx, &store.ListRunsParams{
		Workflow: opts.Flow, Statuses: opts.Statuses, BusinessID: opts.BusinessID, Tags: opts.Tags,
		CreatedAfter: opts.CreatedAfter, CreatedBefore: opts.CreatedBefore, Limit: opts.Limit, Cursor: opts.Cursor,
	})
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := &RunList{Next: p.Next}
	for _, r := range p.Runs {
		out.Runs = append(out.Runs, c.toRun(r))
	}
	return out, nil
}

// ResumeOptions are the optional parameters of ResumeRun.
type ResumeOptions struct {
	// Step names the waiting step; it may be empty when exactly one step
	// of the run is waiting.
	Step string
	// Payload becomes the step's output (encoded as JSON).
	Payload any
}

// ResumeRun completes a waiting step of a run with an event the step
// declares. It fails with ErrNotWaiting when the step (or the run) is not
// waiting, ErrUnknownEvent for an undeclared event, and ErrRunFinished for
// a finished run; nothing changes then.
func (c *Client) ResumeRun(ctx context.Context, runID, event string, opts *ResumeOptions) error {
	if opts == nil {
		opts = &ResumeOptions{}
	}
	payload, err := json.Marshal(opts.Payload)
	if err != nil {
		return fmt.Errorf("resume run %s: %w: payload does not encode as JSON: %w", runID, ErrInvalidInput, err)
	}
	if err := c.checkInput(payload, "the resume payload"); err != nil {
		return fmt.Errorf("resume run %s: %w", runID, err)
	}
	now := c.cfg.Clock.Now()
	decide := func(run *store.Run) (*store.Update, error) {
		step := opts.Step
		if step == "" {
			s, err := loadState(run)
			if err != nil {
				return nil, err
			}
			f, err := c.flows.get(run.Workflow, run.Version)
			if err != nil {
				return nil, err
			}
			if step, err = waitingStep(f, s); err != nil {
				return nil, err
			}
		}
		return c.decideWith(engine.Resume{Step: step, Event: event, Payload: payload}, now, true)(run)
	}
	_, err = c.commit.submit(ctx, store.Change{RunID: runID, Key: "resume:" + newID(), Decide: decide})
	if errors.Is(err, store.ErrDuplicateChange) {
		err = nil // applied by an earlier attempt of this call's commit
	}
	if err != nil {
		return fmt.Errorf("resume run %s: %w", runID, err)
	}
	return nil
}

func waitingStep(f *flow.Flow, s *engine.State) (string, error) {
	if s.Status.Terminal() {
		return "", fmt.Errorf("%w (status %s)", ErrRunFinished, s.Status)
	}
	var waiting []string
	for i, st := range s.Steps {
		if st.Status == hephtype.StepWaiting {
			waiting = append(waiting, f.Graph().Steps[i].Name)
		}
	}
	switch len(waiting) {
	case 0:
		return "", fmt.Errorf("%w: no step of the run is waiting (run is %s)", ErrNotWaiting, s.Status)
	case 1:
		return waiting[0], nil
	}
	return "", fmt.Errorf("%w: several steps are waiting (%v); name one in ResumeOptions.Step", ErrNotWaiting, waiting)
}

// CancelRun cancels a run: running step code sees its context cancelled,
// and nothing more of the run executes. A finished run gives
// ErrRunFinished.
func (c *Client) CancelRun(ctx context.Context, runID, reason string) error {
	if reason == "" {
		reason = "cancelled"
	}
	decide := c.decideWith(engine.Cancel{Reason: reason}, c.cfg.Clock.Now(), true)
	// Keyed: a commit retried after its outcome was lost cancels once,
	// and reports success.
	r, err := c.commit.submit(ctx, store.Change{RunID: runID, Key: "cancel:" + newID(), Decide: func(run *store.Run) (*store.Update, error) {
		if run.Kind == hephtype.KindWorkflow {
			return cancelWorkflowUpdate(run, reason)
		}
		return decide(run)
	}})
	if errors.Is(err, store.ErrDuplicateChange) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("cancel run %s: %w", runID, err)
	}
	if run := r.res.Run; run != nil && run.Kind == hephtype.KindWorkflow {
		c.wf.sticky.evict(runID)
		c.wf.updates.notifyRun(runID, updateOutcome{ended: run.Status})
	}
	return nil
}

// HistoryEvent is one entry of a run's history.
type HistoryEvent = store.Event

// History returns a run's history in order.
func (c *Client) History(ctx context.Context, runID string) ([]HistoryEvent, error) {
	h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("history of run %s: %w", runID, err)
	}
	return h, nil
}

// afterCommit runs after a batch commits: it wakes local workers for new
// tasks, cancels local step code whose task was cancelled, wakes waiters of
// finished runs and emits telemetry.
func (c *Client) afterCommit(batch []*commitReq, claimed map[int64]bool, now time.Time) {
	for _, r := range batch {
		if r.err != nil || r.res.Run == nil {
			continue
		}
		for _, t := range r.res.Tasks {
			switch {
			case claimed[t.ID]:
				// Leased by this very commit: nobody needs waking.
			case t.ReadyAt.After(now):
				c.noteReady(t.Queue, t.ReadyAt)
			default:
				c.wake(t.Queue)
			}
		}
		run := r.res.Run
		if r.update != nil {
			for _, m := range r.update.Cancel {
				c.cancelLocal(run.ID, m)
			}
		}
		if run.Status.Terminal() && (r.change.Create != nil || (r.update != nil && r.update.Status.Terminal())) {
			c.waitMu.Lock()
			for _, ch := range c.waiters[run.ID] {
				select {
				case ch <- run:
				default:
				}
			}
			c.waitMu.Unlock()
			kind := map[hephtype.RunStatus]EventKind{
				hephtype.StatusCompleted: RunCompleted, hephtype.StatusFailed: RunFailed, hephtype.StatusCancelled: RunCancelled,
				hephtype.StatusContinued: RunContinued,
			}[run.Status]
			var err error
			if run.Error != "" {
				err = errors.New(run.Error)
			}
			c.emit(Event{Kind: kind, RunID: run.ID, Workflow: run.Workflow, Version: run.Version, Duration: run.UpdatedAt.Sub(run.CreatedAt), Err: err})
		}
	}
}

func (c *Client) wake(queue string) {
	c.wakeMu.Lock()
	ch := c.wakes[queue]
	c.wakeMu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }
