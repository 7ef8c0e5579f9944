package hephaestus

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/internal/flowrt"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
)

// ErrTxType: InsertJobTx was given a transaction of another kind than the
// store's (PostgreSQL takes a pgx.Tx, SQLite a *sql.Tx of the store's
// DB()), or the store cannot insert in a transaction at all.
var ErrTxType = store.ErrTxType

// uniqueKeyName is the business key name of unique jobs: their business
// id is "job::<value>", unique per kind.
const uniqueKeyName = "job"

// maxUniqueKey bounds an insert's UniqueKey, in bytes: it leaves room in
// the business value for the prefix and a period's suffix.
const maxUniqueKey = 160

// RegisterJobs registers kinds of jobs (package job): each is a one-step
// flow named after the kind, registered as Register would. Workers of the
// kinds' queues then run their jobs.
func (c *Client) RegisterJobs(kinds ...job.Registrable) error {
	for _, k := range kinds {
		if k == nil || k.Flow() == nil {
			return errors.New("hephaestus: RegisterJobs: nil job kind")
		}
		if err := c.flows.Register(k.Flow()); err != nil {
			return err
		}
		if u, ok := k.(interface{ Untyped() job.Untyped }); ok {
			c.kinds.Store(k.Name(), u.Untyped())
		}
		if err := c.declare(TargetJob, k.Name(), k.Flow().Schedules()); err != nil {
			return fmt.Errorf("hephaestus: RegisterJobs %q: %w", k.Name(), err)
		}
		if err := c.publishLater(func() ([]*store.Definition, error) {
			d, err := c.flowDefinition(k.Flow())
			return []*store.Definition{d}, err
		}); err != nil {
			return err
		}
	}
	return nil
}

// JobOptions are the optional parameters of one insert of a job. Zero
// fields take the kind's options.
type JobOptions struct {
	// RunAt makes the job ready at that time instead of now (a time in
	// the past means now). RunAfter, when positive, is the same as RunAt
	// now+RunAfter; set one of them.
	RunAt    time.Time
	RunAfter time.Duration
	// Priority, when not zero, replaces the kind's: higher runs first. It
	// holds for every attempt, retry and snooze of the job.
	Priority int
	// Queue, when set, replaces the kind's queue for every attempt.
	Queue string
	// UniqueKey, when set, makes the job unique by this key (1 to 160
	// bytes of letters, digits, '.', '_' and '-'), under the kind's
	// Unique policy, or while active when the kind has none.
	UniqueKey string
	// Unique, when set, replaces the kind's uniqueness policy.
	Unique *job.Unique
	// ConcurrencyKey, when set, replaces the key the kind computes from
	// the arguments.
	ConcurrencyKey string
	// Tags and Metadata are stored on the job's run (see StartOptions).
	Tags     []string
	Metadata map[string]any
	// RunID, when set, is the job's id instead of a random one: a UUID in
	// canonical form (ErrInvalidInput otherwise). An insert that finds a
	// job (a run) with this id inserts nothing and returns that job with
	// Duplicate set, as for a unique job.
	RunID string
	// ExecutionTimeout, when positive, bounds how long the job may take
	// over all its attempts and backoffs, counted from when it is due
	// (RunAt): a job not finished by then fails as timed out and is
	// not retried (docs/operations.md, Time limits). Zero takes the
	// kind's (job.Options.ExecutionTimeout); negative is ErrInvalidInput.
	ExecutionTimeout time.Duration
	// SearchAttributes are the job's first search attributes, which its
	// kind declares (job.Options.SearchAttributes; see StartOptions).
	SearchAttributes map[string]any
}

// Job is an inserted job, as stored.
type Job struct {
	// ID is the job's id (its run's).
	ID string
	// Kind is the kind's name.
	Kind string
	// Status is the job's run status: pending or running until it
	// finishes, then completed, failed or cancelled. It is empty for a
	// duplicate found by InsertJobTx, which reads nothing outside the
	// transaction.
	Status RunStatus
	// Duplicate is true when the insert found the job existing already
	// (a unique job, or JobOptions.RunID of a job that exists) and
	// inserted nothing: ID is the existing job's.
	Duplicate bool
	// Attempt is the attempt of the job's step as stored.
	Attempt int
	// Error is why the job failed or was cancelled.
	Error      string
	Tags       []string
	Metadata   map[string]json.RawMessage
	CreatedAt  time.Time
	FinishedAt time.Time
}

// JobInsert is one job of InsertJobs and InsertJobsTx.
type JobInsert[A any] struct {
	Args    A
	Options *JobOptions
}

// InsertJob inserts a job of kind with args and returns it. A unique job
// that exists already is returned with Duplicate set, and nothing is
// inserted. The kind need not be registered in this client (another
// process may run it), but it must be when the client has workers for its
// queue.
func InsertJob[A any](ctx context.Context, c *Client, kind *job.Kind[A], args A, opts *JobOptions) (*Job, error) {
	jobs, err := InsertJobs(ctx, c, kind, []JobInsert[A]{{Args: args, Options: opts}})
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// InsertJobs inserts many jobs of a kind, committed together (in batches
// of Config.MaxCommitBatch). Every insert is checked first; if one is
// invalid, none is inserted. Unique jobs that exist already come back with
// Duplicate set.
func InsertJobs[A any](ctx context.Context, c *Client, kind *job.Kind[A], inserts []JobInsert[A]) ([]*Job, error) {
	runs, err := prepareJobs(ctx, c, kind, inserts)
	if err != nil {
		return nil, err
	}
	return c.insertJobs(ctx, kind.Name(), runs)
}

// InsertJobJSON inserts a job of the kind named kind, with arguments
// given as JSON, and returns it: InsertJob for callers that know the kind
// by name only (the HTTP API). The kind must be registered in this client
// (RegisterJobs; ErrFlowNotFound otherwise): its options apply as for
// InsertJob — queue, priority, retries, uniqueness (by arguments: the
// decoded arguments, so a JSON insert and a typed insert of the same
// arguments are the same job), and the concurrency key it computes from
// the arguments. Arguments that do not decode into the kind's argument
// type fail with ErrInvalidInput.
func (c *Client) InsertJobJSON(ctx context.Context, kind string, args json.RawMessage, opts *JobOptions) (*Job, error) {
	var k job.Untyped
	if v, ok := c.kinds.Load(kind); ok {
		k = v.(job.Untyped)
	} else {
		ck, err := c.catalogJobKind(ctx, kind, opts)
		if err != nil {
			return nil, err
		}
		k = *ck
	}
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	a, err := k.Decode(args)
	if err != nil {
		return nil, fmt.Errorf("insert job of %q: %w: %w", kind, ErrInvalidInput, err)
	}
	runs, err := c.prepareJobs(ctx, &k, []untypedInsert{{args: a, opts: opts}})
	if err != nil {
		return nil, err
	}
	jobs, err := c.insertJobs(ctx, kind, runs)
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// insertJobs commits the runs of prepared inserts of a kind.
func (c *Client) insertJobs(ctx context.Context, kind string, runs []*store.NewRun) ([]*Job, error) {
	changes := make([]store.Change, len(runs))
	for i, nr := range runs {
		changes[i] = store.Change{Create: nr}
	}
	results, err := c.commit.SubmitAll(ctx, changes)
	if err != nil {
		return nil, fmt.Errorf("insert jobs of %q: %w", kind, err)
	}
	out := make([]*Job, len(runs))
	var errs []error
	for i, res := range results {
		var de *store.DuplicateRunError
		switch {
		case res.Err == nil:
			out[i] = jobOf(res.Res.Run)
		case errors.As(res.Err, &de):
			r, err := c.cfg.Store.GetRun(ctx, de.ExistingRunID)
			if err != nil {
				errs = append(errs, fmt.Errorf("insert job %d of %q: read the existing job %s: %w", i, kind, de.ExistingRunID, err))
				continue
			}
			out[i] = jobOf(r)
			out[i].Duplicate = true
		case errors.Is(res.Err, store.ErrRunExists):
			// A job inserted with that RunID before (a commit retried
			// after its outcome was lost finds its own run as inserted).
			r, err := c.cfg.Store.GetRun(ctx, runs[i].ID)
			if err != nil {
				errs = append(errs, fmt.Errorf("insert job %d of %q: %w", i, kind, err))
				continue
			}
			out[i] = jobOf(r)
			out[i].Duplicate = true
		default:
			errs = append(errs, fmt.Errorf("insert job %d of %q: %w", i, kind, res.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// InsertJobTx inserts a job inside tx, a database transaction of the
// application's own, and commits nothing: the job exists if, and only if,
// the application commits tx, atomically with what else tx wrote. On
// PostgreSQL tx is a pgx.Tx on the store's database; on SQLite a *sql.Tx of
// the store's DB() (see sqlite.Store.DB: its one connection is held until
// tx ends, so use tx, not the client, until then). Another kind of tx
// fails with ErrTxType.
//
// A unique job that exists already (committed, or inserted earlier in
// tx) comes back with Duplicate set and an empty Status. Workers find the
// job once tx commits: at once on PostgreSQL (a notification sent in tx),
// at their next poll on SQLite.
func InsertJobTx[A any](ctx context.Context, c *Client, tx any, kind *job.Kind[A], args A, opts *JobOptions) (*Job, error) {
	jobs, err := InsertJobsTx(ctx, c, tx, kind, []JobInsert[A]{{Args: args, Options: opts}})
	if err != nil {
		return nil, err
	}
	return jobs[0], nil
}

// InsertJobsTx is InsertJobTx for many jobs of a kind.
func InsertJobsTx[A any](ctx context.Context, c *Client, tx any, kind *job.Kind[A], inserts []JobInsert[A]) ([]*Job, error) {
	ti, ok := c.cfg.Store.(store.TxInserter)
	if !ok {
		return nil, fmt.Errorf("insert jobs of %q: %w: the store (%T) cannot insert in a transaction", kind.Name(), ErrTxType, c.cfg.Store)
	}
	runs, err := prepareJobs(ctx, c, kind, inserts)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Clock.Now()
	// The root spans end when the rows are inserted: whether the caller's
	// transaction commits is not known here (a rolled-back job leaves a
	// trace of its root span alone).
	spans := make([]trace.Span, len(runs))
	for i := range runs {
		spans[i] = c.tracer.StartRun(ctx, runs[i], now)
	}
	results, err := ti.InsertInTx(ctx, tx, &store.InsertParams{Runs: runs, Now: now})
	if err != nil {
		return nil, fmt.Errorf("insert jobs of %q: %w", kind.Name(), err)
	}
	for i, res := range results {
		if res.Err == nil && spans[i] != nil {
			spans[i].End(trace.WithTimestamp(c.cfg.Clock.Now()))
		}
	}
	out := make([]*Job, len(runs))
	var errs []error
	for i, res := range results {
		var de *store.DuplicateRunError
		switch {
		case res.Err == nil:
			out[i] = jobOf(res.Run)
		case errors.As(res.Err, &de):
			out[i] = &Job{ID: de.ExistingRunID, Kind: kind.Name(), Duplicate: true}
		case errors.Is(res.Err, store.ErrRunExists):
			out[i] = &Job{ID: runs[i].ID, Kind: kind.Name(), Duplicate: true}
		default:
			errs = append(errs, fmt.Errorf("insert job %d of %q: %w", i, kind.Name(), res.Err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// GetJob returns a job by id.
func (c *Client) GetJob(ctx context.Context, id string) (*Job, error) {
	r, err := c.cfg.Store.GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get job %s: %w", id, err)
	}
	return jobOf(r), nil
}

// untypedInsert is one insert of a kind seen without its argument type:
// args is an A.
type untypedInsert struct {
	args any
	opts *JobOptions
}

// prepareJobs checks typed inserts and builds their runs.
func prepareJobs[A any](ctx context.Context, c *Client, kind *job.Kind[A], inserts []JobInsert[A]) ([]*store.NewRun, error) {
	if kind == nil {
		return nil, errors.New("insert jobs: nil job kind")
	}
	k := kind.Untyped()
	ins := make([]untypedInsert, len(inserts))
	for i, in := range inserts {
		ins[i] = untypedInsert{args: in.Args, opts: in.Options}
	}
	return c.prepareJobs(ctx, &k, ins)
}

// prepareJobs checks the inserts of a kind and builds their runs. A kind
// with several versions registered chooses each insert's version by its
// version rule (versions.go).
func (c *Client) prepareJobs(ctx context.Context, kind *job.Untyped, inserts []untypedInsert) ([]*store.NewRun, error) {
	if _, err := c.flows.Flow(kind.Name, kind.Flow.Version()); err != nil && !kind.Flow.Stub() {
		// Not registered here: register it, so that its flow is known
		// (a client without workers for its queue only inserts).
		if err := c.flows.Register(kind.Flow); err != nil {
			return nil, err
		}
	}
	pick, err := c.jobPicker(ctx, kind.Name)
	if err != nil {
		return nil, err
	}
	now := c.cfg.Clock.Now()
	runs := make([]*store.NewRun, len(inserts))
	for i, in := range inserts {
		o := in.opts
		if o == nil {
			o = &JobOptions{}
		}
		if err := checkRunID("JobOptions.RunID", o.RunID); err != nil {
			return nil, fmt.Errorf("insert job %d of %q: %w", i, kind.Name, err)
		}
		so := &flowrt.StartOptions{Version: kind.Flow.Version(), Tags: o.Tags, Metadata: o.Metadata, Queue: o.Queue, RunAt: o.RunAt,
			RunID: o.RunID, Job: true, ExecutionTimeout: o.ExecutionTimeout, SearchAttributes: o.SearchAttributes}
		if o.RunAfter > 0 {
			if !o.RunAt.IsZero() {
				return nil, fmt.Errorf("insert job %d of %q: %w: set RunAt or RunAfter, not both", i, kind.Name, ErrInvalidInput)
			}
			so.RunAt = now.Add(o.RunAfter)
		}
		if o.RunAfter < 0 {
			return nil, fmt.Errorf("insert job %d of %q: %w: RunAfter is %s; it must not be negative", i, kind.Name, ErrInvalidInput, o.RunAfter)
		}
		if o.Priority != 0 {
			p := o.Priority
			so.Priority = &p
		}
		so.ConcurrencyKey = o.ConcurrencyKey
		if so.ConcurrencyKey == "" && kind.ConcurrencyKey != nil {
			so.ConcurrencyKey = kind.ConcurrencyKey(in.args)
		}
		bid, scope, err := uniqueID(in.args, o, kind.Unique, now)
		if err != nil {
			return nil, fmt.Errorf("insert job %d of %q: %w: %w", i, kind.Name, ErrInvalidInput, err)
		}
		so.BusinessID, so.KeyScope = bid, scope
		if pick != nil {
			so.Version = 0
			if so, err = pick.apply(in.args, so); err != nil {
				return nil, fmt.Errorf("insert job %d of %q: %w", i, kind.Name, err)
			}
		}
		nr, err := c.flows.Prepare(kind.Name, in.args, so)
		if err != nil {
			return nil, fmt.Errorf("insert job %d of %q: %w", i, kind.Name, err)
		}
		runs[i] = nr
	}
	return runs, nil
}

// uniqueID is the business id and scope of a job under its uniqueness
// policy, or "" when it is not unique: "job::k-<key>" for a key,
// "job::a-<hash>" for arguments, with ".<period start, Unix seconds>"
// within a period (unique forever), else unique while active.
func uniqueID(args any, o *JobOptions, kind *job.Unique, now time.Time) (string, businesskey.Scope, error) {
	u := kind
	if o.Unique != nil {
		u = o.Unique
	}
	if u != nil && u.Period < 0 {
		return "", "", fmt.Errorf("Unique.Period is %s; it must not be negative", u.Period)
	}
	var value string
	switch {
	case o.UniqueKey != "":
		if len(o.UniqueKey) > maxUniqueKey {
			return "", "", fmt.Errorf("UniqueKey %.20q… is %d bytes long; the limit is %d", o.UniqueKey, len(o.UniqueKey), maxUniqueKey)
		}
		if err := businesskey.ValidateValue(o.UniqueKey); err != nil {
			return "", "", fmt.Errorf("UniqueKey: %w", err)
		}
		value = "k-" + o.UniqueKey
	case u != nil && u.ByArgs:
		h, err := argsHash(args)
		if err != nil {
			return "", "", err
		}
		value = "a-" + h
	default:
		return "", "", nil
	}
	scope := businesskey.ScopeActive
	if u != nil && u.Period > 0 {
		start := now.UTC().Truncate(u.Period)
		value += "." + strconv.FormatInt(start.Unix(), 10)
		scope = businesskey.ScopeForever
	}
	return uniqueKeyName + businesskey.Separator + value, scope, nil
}

// argsHash is the hex SHA-256 (first 128 bits) of the canonical JSON of
// args: object keys sorted, numbers as written, no insignificant space.
func argsHash(args any) (string, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return "", fmt.Errorf("the arguments do not encode as JSON: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("the arguments do not decode as JSON: %w", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("the arguments do not encode as JSON: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:16]), nil
}

// jobOf converts a stored run to a Job.
func jobOf(r *store.Run) *Job {
	j := &Job{ID: r.ID, Kind: r.Workflow, Status: r.Status, Error: r.Error, Tags: r.Tags, Metadata: r.Metadata,
		CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt}
	var s struct {
		Steps []struct {
			Attempt int `json:"attempt"`
		} `json:"steps"`
	}
	if json.Unmarshal(r.State, &s) == nil && len(s.Steps) > 0 {
		j.Attempt = s.Steps[0].Attempt
	}
	return j
}
