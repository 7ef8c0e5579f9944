package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Bulk operations: cancel, retry or delete every run a filter selects, tracked
// in the store (store.Admin) so that any server sharing the database
// carries them out, and picks up the one a dead server left. A server's
// processor claims an operation (a lease), counts the runs the filter
// selects, then acts on them newest first, page by page, saving its
// progress after each run, fenced by the lease: a server that lost the
// lease stops at its next save.
//
// The filter selects the runs created before the operation was (so that
// runs started meanwhile are left alone). The progress (Operation.Cursor)
// is the page being worked on — the cursor of its start and the runs of
// it done — so that a server that resumes the operation re-reads that
// page and skips those: each run is counted once. A run that ended before
// its turn (the action finds it finished) counts as done.

const (
	// operationLease is how long a claim of an operation lasts; every
	// save extends it.
	operationLease = 30 * time.Second
	// operationPoll is how often an idle processor looks for operations
	// that no wake-up announced (created by another server, or left by a
	// dead one).
	operationPoll = 5 * time.Second
	// operationPage is how many runs the processor reads at a time.
	operationPage = 100
)

// RunFilter selects runs: the filter of GET /runs as JSON.
type RunFilter struct {
	Kind          string            `json:"kind,omitempty"`
	Statuses      []string          `json:"statuses,omitempty"`
	Workflow      string            `json:"workflow,omitempty"`
	Queue         string            `json:"queue,omitempty"`
	Tags          []string          `json:"tags,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	CreatedAfter  *time.Time        `json:"created_after,omitempty"`
	CreatedBefore *time.Time        `json:"created_before,omitempty"`
	Q             string            `json:"q,omitempty"`
	Version       int               `json:"version,omitempty"`
	Parent        string            `json:"parent,omitempty"`
	Build         string            `json:"build,omitempty"`
	IDs           []string          `json:"ids,omitempty"`
	// Where filters by search attributes (ListOptions.Where).
	Where string `json:"where,omitempty"`
}

// maxFilterIDs bounds the run ids of a filter.
const maxFilterIDs = 1000

// empty reports whether the filter selects every run.
func (f *RunFilter) empty() bool {
	return f.Kind == "" && len(f.Statuses) == 0 && f.Workflow == "" && f.Queue == "" && len(f.Tags) == 0 && len(f.Metadata) == 0 &&
		f.CreatedAfter == nil && f.CreatedBefore == nil && f.Q == "" && f.Version == 0 && f.Parent == "" && f.Build == "" && len(f.IDs) == 0 && f.Where == ""
}

// check validates the filter.
func (f *RunFilter) check() error {
	for _, st := range f.Statuses {
		if !hephtype.RunStatus(st).Valid() {
			return fieldProblem("filter.statuses", fmt.Sprintf("%q is not a run status", st))
		}
	}
	switch f.Kind {
	case "", string(hephaestus.KindFlow), string(hephaestus.KindWorkflow):
	default:
		return fieldProblem("filter.kind", fmt.Sprintf(`%q is not a kind of run: use "flow" or "workflow"`, f.Kind))
	}
	if f.Version < 0 {
		return fieldProblem("filter.version", fmt.Sprintf("%d is negative", f.Version))
	}
	if len(f.IDs) > maxFilterIDs {
		return fieldProblem("filter.ids", fmt.Sprintf("%d run ids, more than %d", len(f.IDs), maxFilterIDs))
	}
	for i, id := range f.IDs {
		if id == "" {
			return fieldProblem(fmt.Sprintf("filter.ids[%d]", i), "is empty")
		}
	}
	return nil
}

// listOptions returns the ListRuns options of the filter, bounded to the
// runs created before at.
func (f *RunFilter) listOptions(before time.Time) *hephaestus.ListOptions {
	o := &hephaestus.ListOptions{
		Flow: f.Workflow, Kind: hephaestus.RunKind(f.Kind), Tags: f.Tags, Queue: f.Queue, Metadata: f.Metadata, Text: f.Q,
		Version: f.Version, Parent: f.Parent, Build: f.Build, IDs: f.IDs, CreatedBefore: before, Limit: operationPage,
		Where: f.Where,
	}
	for _, st := range f.Statuses {
		o.Statuses = append(o.Statuses, hephtype.RunStatus(st))
	}
	if f.CreatedAfter != nil {
		o.CreatedAfter = *f.CreatedAfter
	}
	if f.CreatedBefore != nil && f.CreatedBefore.Before(before) {
		o.CreatedBefore = *f.CreatedBefore
	}
	return o
}

// Operation is a bulk operation as the API shows it.
type Operation struct {
	ID        string    `json:"id"`
	Action    string    `json:"action"`
	Filter    RunFilter `json:"filter"`
	Reason    string    `json:"reason,omitempty"`
	Status    string    `json:"status"`
	Total     int       `json:"total"`
	Done      int       `json:"done"`
	Failed    int       `json:"failed"`
	Errors    []string  `json:"errors"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func operationJSON(op *store.Operation) *Operation {
	out := &Operation{ID: op.ID, Action: op.Action, Reason: op.Reason, Status: op.Status, Total: op.Total, Done: op.Done,
		Failed: op.Failed, Errors: nonNil(op.Errors), CreatedBy: op.CreatedBy, CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC()}
	_ = json.Unmarshal(op.Filter, &out.Filter) // written by createOperation: it decodes
	return out
}

func (s *Server) createOperation(c *call) error {
	var b struct {
		Action string    `json:"action"`
		Filter RunFilter `json:"filter"`
		Reason string    `json:"reason"`
	}
	if err := c.decode(&b, false); err != nil {
		return err
	}
	switch b.Action {
	case store.OperationCancel, store.OperationRetry, store.OperationDelete, store.OperationPause, store.OperationUnpause:
	case store.OperationReset:
		// The reason names the step to reset to.
	default:
		return fieldProblem("action", fmt.Sprintf(`%q is not an action: use "cancel", "retry", "delete", "pause", "unpause" or "reset"`, b.Action))
	}
	if b.Action == store.OperationPause && b.Reason != "" && b.Reason != pauseCancelRunning {
		return fieldProblem("reason", fmt.Sprintf(`a pause takes no reason but %q (stop the running tasks too), got %q`, pauseCancelRunning, b.Reason))
	}
	if b.Filter.empty() {
		return fieldProblem("filter", "an empty filter selects every run: give at least one field")
	}
	if err := b.Filter.check(); err != nil {
		return err
	}
	if b.Filter.Where != "" {
		// The filter is read now, so that a typo is refused here rather
		// than failing the operation later.
		_, err := s.cfg.Client.ListRuns(c.ctx(), &hephaestus.ListOptions{Flow: b.Filter.Workflow, Where: b.Filter.Where, Limit: 1})
		if errors.Is(err, hephaestus.ErrInvalidInput) {
			_, msg, _ := strings.Cut(err.Error(), "where: ")
			return fieldProblem("filter.where", msg)
		}
	}
	filter, err := json.Marshal(&b.Filter)
	if err != nil {
		return err
	}
	op := &store.Operation{ID: uuid.Must(uuid.NewV7()).String(), Action: b.Action, Filter: filter, Reason: b.Reason,
		CreatedBy: c.actor, CreatedAt: s.cfg.Clock.Now().UTC()}
	if err := s.cfg.Admin.CreateOperation(c.ctx(), op); err != nil {
		return err
	}
	c.target = op.ID
	s.ops.wake()
	c.w.Header().Set("Location", "/api/v1/operations/"+op.ID)
	return c.json(http.StatusAccepted, operationJSON(op))
}

func (s *Server) getOperation(c *call) error {
	op, err := s.cfg.Admin.GetOperation(c.ctx(), c.r.PathValue("id"))
	if err != nil {
		return err
	}
	return c.json(http.StatusOK, operationJSON(op))
}

// OperationList is a page of operations, newest first.
type OperationList struct {
	Operations []*Operation `json:"operations"`
	Next       string       `json:"next"`
}

func (s *Server) listOperations(c *call) error {
	q := c.query()
	limit := q.integer("limit", 100, 1, 1000)
	p := &store.ListOperationsParams{Limit: limit}
	if cur := q.str("cursor"); cur != "" {
		at, id, ok := strings.Cut(cur, ".")
		us, err := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil || id == "" {
			q.fail("cursor", "%q is not a cursor of this list", cur)
		}
		p.BeforeCreatedAt, p.BeforeID = time.UnixMicro(us).UTC(), id
	}
	if err := q.err(); err != nil {
		return err
	}
	ops, err := s.cfg.Admin.ListOperations(c.ctx(), p)
	if err != nil {
		return err
	}
	out := &OperationList{Operations: make([]*Operation, 0, len(ops))}
	for _, op := range ops {
		out.Operations = append(out.Operations, operationJSON(op))
	}
	if len(ops) == limit {
		last := ops[len(ops)-1]
		out.Next = strconv.FormatInt(last.CreatedAt.UnixMicro(), 10) + "." + last.ID
	}
	return c.json(http.StatusOK, out)
}

// processor carries out bulk operations.
type processor struct {
	s     *Server
	owner string
	wakeC chan struct{}

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func newProcessor(s *Server) *processor {
	return &processor{s: s, owner: "server-" + uuid.Must(uuid.NewV7()).String(), wakeC: make(chan struct{}, 1)}
}

// wake tells the processor that an operation was created.
func (p *processor) wake() {
	select {
	case p.wakeC <- struct{}{}:
	default:
	}
}

func (p *processor) start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.done = make(chan struct{})
	go p.loop(ctx)
}

func (p *processor) stop() {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (p *processor) loop(ctx context.Context) {
	defer close(p.done)
	log := p.s.cfg.Logger
	for {
		op, err := p.s.cfg.Admin.ClaimOperation(ctx, &store.ClaimOperationParams{Owner: p.owner, LeaseFor: operationLease, Now: p.s.cfg.Clock.Now()})
		if err != nil && ctx.Err() == nil {
			log.Error("server: claim a bulk operation", "err", err)
		}
		if op != nil {
			err := p.run(ctx, op)
			if errors.Is(err, hephaestus.ErrInvalidInput) {
				// The filter cannot select runs: no retry will.
				op.Errors = store.KeptErrors(append(op.Errors, err.Error()))
				err = p.save(ctx, op, progress{}, store.OperationFailed)
			}
			if err != nil && ctx.Err() == nil {
				log.Warn("server: bulk operation stopped", "operation", op.ID, "err", err)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wakeC:
		case <-p.s.cfg.Clock.After(operationPoll):
		}
	}
}

// progress is an operation's Cursor: the page being worked on.
type progress struct {
	// Counted: the total was counted.
	Counted bool `json:"counted"`
	// Page is the ListRuns cursor of the page's start ("" for the first).
	Page string `json:"page"`
	// Done are the runs of the page acted on.
	Done []string `json:"done,omitempty"`
}

// run carries out a claimed operation until it is complete, the lease is
// lost, or ctx ends.
func (p *processor) run(ctx context.Context, op *store.Operation) error {
	var f RunFilter
	var pr progress
	if err := json.Unmarshal(op.Filter, &f); err != nil {
		op.Errors = append(op.Errors, "the filter does not decode: "+err.Error())
		return p.save(ctx, op, pr, store.OperationFailed)
	}
	if op.Cursor != "" {
		if err := json.Unmarshal([]byte(op.Cursor), &pr); err != nil {
			op.Errors = append(op.Errors, "the progress does not decode: "+err.Error())
			return p.save(ctx, op, pr, store.OperationFailed)
		}
	}
	cl := p.s.cfg.Client
	if !pr.Counted {
		total, err := p.count(ctx, &f, op.CreatedAt)
		if err != nil {
			return err
		}
		op.Total, pr.Counted = total, true
		if err := p.save(ctx, op, pr, store.OperationRunning); err != nil {
			return err
		}
	}
	for {
		o := f.listOptions(op.CreatedAt)
		o.Cursor = pr.Page
		page, err := cl.ListRuns(ctx, o)
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if slices.Contains(pr.Done, r.ID) {
				continue
			}
			if err := p.act(ctx, op, r); err != nil {
				op.Failed++
				op.Errors = store.KeptErrors(append(op.Errors, fmt.Sprintf("run %s: %v", r.ID, err)))
			} else {
				op.Done++
			}
			pr.Done = append(pr.Done, r.ID)
			if err := p.save(ctx, op, pr, store.OperationRunning); err != nil {
				return err
			}
		}
		if page.Next == "" {
			// The count was an estimate: runs may have left the filter
			// before their turn.
			op.Total = op.Done + op.Failed
			return p.save(ctx, op, pr, store.OperationCompleted)
		}
		pr.Page, pr.Done = page.Next, nil
		if err := p.save(ctx, op, pr, store.OperationRunning); err != nil {
			return err
		}
	}
}

// count counts the runs the filter selects.
func (p *processor) count(ctx context.Context, f *RunFilter, before time.Time) (int, error) {
	n := 0
	o := f.listOptions(before)
	for {
		page, err := p.s.cfg.Client.ListRuns(ctx, o)
		if err != nil {
			return 0, err
		}
		n += len(page.Runs)
		if page.Next == "" {
			return n, nil
		}
		o.Cursor = page.Next
	}
}

// pauseCancelRunning is the reason of a bulk pause that stops the
// running tasks of the runs too (PauseOptions.CancelRunning).
const pauseCancelRunning = "cancel_running"

// act carries out the operation's action on one run. A run that ended
// (cancel), was retried (retry) or is gone (delete) before its turn is
// done. A bulk delete never forces: an active run, or one with work left,
// fails the run (it is kept) with the reason.
func (p *processor) act(ctx context.Context, op *store.Operation, r *hephaestus.Run) error {
	cl := p.s.cfg.Client
	switch op.Action {
	case store.OperationCancel:
		reason := op.Reason
		if reason == "" {
			reason = "cancelled by operation " + op.ID
		}
		err := cl.CancelRun(ctx, r.ID, reason)
		if errors.Is(err, hephaestus.ErrRunFinished) {
			return nil
		}
		return err
	case store.OperationRetry:
		if r.Kind == hephaestus.KindWorkflow {
			return retryWorkflowRun(ctx, cl, op, r)
		}
		_, err := cl.RetryRun(ctx, r.ID)
		if errors.Is(err, hephaestus.ErrNotRetryable) {
			return nil
		}
		return err
	case store.OperationDelete:
		_, err := cl.DeleteRun(ctx, r.ID, nil)
		if errors.Is(err, hephaestus.ErrRunNotFound) {
			return nil
		}
		if errors.Is(err, hephaestus.ErrRunActive) {
			return fmt.Errorf("kept: %w (a bulk delete never forces: cancel it, or delete it alone with force)", err)
		}
		return err
	case store.OperationPause, store.OperationUnpause:
		// A run that ended before its turn is done: nothing to pause.
		var err error
		if op.Action == store.OperationPause {
			err = cl.PauseRun(ctx, r.ID, &hephaestus.PauseOptions{CancelRunning: op.Reason == pauseCancelRunning, By: op.CreatedBy})
		} else {
			err = cl.UnpauseRun(ctx, r.ID, &hephaestus.UnpauseOptions{By: op.CreatedBy})
		}
		if errors.Is(err, hephaestus.ErrRunFinished) || errors.Is(err, hephaestus.ErrRunNotFound) {
			return nil
		}
		return err
	case store.OperationReset:
		return p.reset(ctx, op, r)
	}
	return fmt.Errorf("the action %q is not one of cancel, retry, delete, pause, unpause, reset", op.Action)
}

// reset resets one run of a bulk reset to the step the operation's
// Reason names, as the operation's creator. Its key is the operation's:
// a server that resumes the operation after acting on the run before it
// saved its progress resets nothing more. A workflow run, a cancelled run
// or one whose step has not run fails the run (it is left as it is); a
// run that is gone is done.
func (p *processor) reset(ctx context.Context, op *store.Operation, r *hephaestus.Run) error {
	_, err := p.s.cfg.Client.ResetRun(ctx, r.ID, op.Reason, &hephaestus.ResetOptions{By: op.CreatedBy, Key: "op:" + op.ID})
	if errors.Is(err, hephaestus.ErrRunNotFound) {
		return nil
	}
	return err
}

// save records the operation's progress, fenced by its lease, and extends
// the lease.
func (p *processor) save(ctx context.Context, op *store.Operation, pr progress, status string) error {
	cur, err := json.Marshal(pr)
	if err != nil {
		return err
	}
	now := p.s.cfg.Clock.Now()
	op.Status, op.Cursor = status, string(cur)
	return p.s.cfg.Admin.SaveOperation(ctx, &store.SaveOperationParams{
		ID: op.ID, Owner: op.Owner, Token: op.Token, LeaseUntil: now.Add(operationLease), Status: status,
		Total: op.Total, Done: op.Done, Failed: op.Failed, Errors: op.Errors, Cursor: op.Cursor, Now: now,
	})
}
