// Package job defines background jobs: a kind of job has a name, a type
// of arguments and a worker function, and runs on the durable core of
// Hephaestus as a one-step flow named after the kind. Everything the core
// gives a flow step a job has: leases and fencing, retries with backoff,
// a timeout per attempt, cancellation, exactly-once state changes.
//
// Declare a kind once, register it on a client and insert jobs with the
// root package's InsertJob, InsertJobs and InsertJobTx (the last inside a
// database transaction of the application's own):
//
//	var sendEmail = job.MustNew("send_email", func(ctx context.Context, j *job.Job[Email]) error {
//		return mailer.Send(ctx, j.Args.To, j.Args.Body)
//	}, &job.Options[Email]{MaxAttempts: 5, Timeout: time.Minute})
//
//	c.RegisterJobs(sendEmail)
//	hephaestus.InsertJob(ctx, c, sendEmail, Email{To: "a@example.com"}, nil)
//
// From inside the worker function, return Snooze(d) to run again after d
// without counting an attempt, or Cancel(reason) to end the job cancelled
// with no retry. Any other error fails the attempt; the job is retried
// per its kind's retry policy (flow.NonRetryable marks an error that must
// not be).
//
// See docs/jobs.md.
package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Step is the name of a job's one step in its flow (and the key of its
// output, which is null).
const Step = "job"

// Job is a job as its worker function sees it.
type Job[A any] struct {
	// ID is the job's id: the id of its run.
	ID string
	// Kind is the kind's name.
	Kind string
	// Attempt counts the attempts, from 1; a snooze does not count one.
	Attempt int
	// IdempotencyKey is the same for every attempt of the job: pass it to
	// external services so that their effects happen once.
	IdempotencyKey string
	// Args are the job's arguments.
	Args A
}

// Options configure a kind of job. The zero value of each field takes
// its default.
type Options[A any] struct {
	// Queue is the task queue the kind's jobs run on (an insert may name
	// another). Defaults to "default".
	Queue string
	// Priority orders ready jobs of a queue: higher runs first (an insert
	// may give its own). Defaults to 0.
	Priority int
	// MaxAttempts bounds the attempts, the first included; it overrides
	// Retry.MaxAttempts. Defaults to 3 (flow.DefaultRetryPolicy).
	MaxAttempts int
	// Retry is the retry policy: backoff, jitter, errors that are
	// permanent. Unset fields take flow.DefaultRetryPolicy's.
	Retry flow.RetryPolicy
	// Timeout bounds each attempt: its context is cancelled after it and
	// the attempt fails (and is retried). Defaults to 60 seconds.
	Timeout time.Duration
	// ExecutionTimeout, when positive, bounds each job as a whole, over
	// all its attempts and backoffs, from when it is due: a job not
	// finished by then fails as timed out and is not retried
	// (docs/operations.md, Time limits). An insert's
	// JobOptions.ExecutionTimeout overrides it. Zero means none.
	ExecutionTimeout time.Duration
	// Unique, when set, makes the kind's jobs unique (see Unique); an
	// insert may give its own policy or key.
	Unique *Unique
	// ConcurrencyKey, when set, computes a job's concurrency key from its
	// arguments when it is inserted: the key flow control groups its work
	// by (per-key concurrency and rate limits, fair rotation). An insert
	// may give its own.
	ConcurrencyKey func(args A) string
	// SearchAttributes declares the search attributes of the kind's jobs,
	// name to type (flow.Builder.SearchAttribute): an insert sets them
	// (JobOptions.SearchAttributes), the job's code upserts them
	// (flow.SetSearchAttributes), lists filter by them.
	SearchAttributes map[string]flow.AttrType
	// Schedules insert jobs of the kind on a timing, each with its Input
	// as the job's arguments: RegisterJobs creates or updates them (see
	// docs/schedules.md).
	Schedules []Schedule
}

// Schedule is a schedule declared with a job kind (Options.Schedules).
type Schedule = hephtype.ScheduleDecl

// Unique says when two jobs of a kind are the same job: an insert of a
// job that exists already (within the policy) returns the existing job,
// marked as a duplicate, instead of inserting a second one. Jobs are the
// same when their unique keys are equal: the insert's UniqueKey, or else
// the hash of the canonical JSON of their arguments (ByArgs).
//
// Uniqueness is enforced by the store, across processes, in the
// transaction that inserts the job (it is the run's business id).
type Unique struct {
	// ByArgs makes jobs with equal arguments (as canonical JSON: object
	// keys sorted, insignificant space dropped) the same job, when the
	// insert names no UniqueKey. Without it only inserts that name a
	// UniqueKey are unique.
	ByArgs bool
	// Period, when positive, makes a key unique within each period of
	// that length (periods start at multiples of it since the Unix epoch,
	// UTC), whether the job is still active or long finished: at most one
	// job per key and period. Zero makes a key unique while a job with it
	// is active (pending, running or waiting): once it has finished, the
	// key may be inserted again.
	Period time.Duration
}

// Kind is a kind of job with arguments of type A.
type Kind[A any] struct {
	name string
	fn   func(ctx context.Context, j *Job[A]) error
	opts Options[A]
	flow *flow.Flow
}

// Registrable is what Client.RegisterJobs takes: any *Kind.
type Registrable interface {
	// Name returns the kind's name.
	Name() string
	// Flow returns the one-step flow the kind's jobs run as.
	Flow() *flow.Flow
}

// New returns a kind of job named name (a flow name: letters, digits,
// '_', '-', '.', at most 200 bytes) whose jobs run fn. opts may be nil.
// It fails when the name or an option is invalid, naming the field.
func New[A any](name string, fn func(ctx context.Context, j *Job[A]) error, opts *Options[A]) (*Kind[A], error) {
	if fn == nil {
		return nil, fmt.Errorf("job kind %q: the worker function is nil", name)
	}
	k := &Kind[A]{name: name, fn: fn}
	if opts != nil {
		k.opts = *opts
	}
	o := &k.opts
	var errs []error
	if o.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("Options.MaxAttempts is %d; it must be at least 1 (or 0 for the default)", o.MaxAttempts))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("Options.Timeout is %s; it must not be negative", o.Timeout))
	}
	if o.ExecutionTimeout < 0 {
		errs = append(errs, fmt.Errorf("Options.ExecutionTimeout is %s; it must not be negative", o.ExecutionTimeout))
	}
	if o.Unique != nil && o.Unique.Period < 0 {
		errs = append(errs, fmt.Errorf("Options.Unique.Period is %s; it must not be negative", o.Unique.Period))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("job kind %q: %w", name, err)
	}
	retry := o.Retry
	if o.MaxAttempts > 0 {
		retry.MaxAttempts = o.MaxAttempts
	}
	stepOpts := []flow.StepOption{flow.Retry(retry), flow.Priority(o.Priority)}
	if o.Queue != "" {
		stepOpts = append(stepOpts, flow.Queue(o.Queue))
	}
	if o.Timeout > 0 {
		stepOpts = append(stepOpts, flow.Timeout(o.Timeout))
	}
	b := flow.New(name).ExecutionTimeout(o.ExecutionTimeout)
	for a, t := range o.SearchAttributes {
		b.SearchAttribute(a, t)
	}
	for _, sc := range o.Schedules {
		b.Schedule(sc)
	}
	flow.Input[A](b)
	flow.Step(b, Step, func(ctx context.Context, args A) (json.RawMessage, error) {
		info, _ := flow.CallInfo(ctx)
		return nil, fn(ctx, &Job[A]{ID: info.RunID, Kind: name, Attempt: info.Attempt, IdempotencyKey: info.IdempotencyKey, Args: args})
	}, stepOpts...)
	f, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("job kind %q: %w", name, err)
	}
	k.flow = f
	return k, nil
}

// MustNew is New that panics on an error: for kinds declared at program
// start.
func MustNew[A any](name string, fn func(ctx context.Context, j *Job[A]) error, opts *Options[A]) *Kind[A] {
	k, err := New(name, fn, opts)
	if err != nil {
		panic("hephaestus: " + err.Error())
	}
	return k
}

// Name returns the kind's name, which is also its flow's.
func (k *Kind[A]) Name() string { return k.name }

// Flow returns the one-step flow the kind's jobs run as: a job is a run
// of it, so Client.StartRun(kind.Name(), args, …) inserts one too.
func (k *Kind[A]) Flow() *flow.Flow { return k.flow }

// Options returns the kind's options, with ConcurrencyKey and Unique as
// given.
func (k *Kind[A]) Options() Options[A] { return k.opts }

// Untyped is a kind of job seen without the type of its arguments: what a
// client needs to insert jobs of the kind by name with JSON arguments (the
// root package's InsertJobJSON, which the HTTP API uses).
type Untyped struct {
	Name string
	Flow *flow.Flow
	// Decode decodes JSON arguments into the kind's argument type, and
	// returns them (an A) as any.
	Decode func(args json.RawMessage) (any, error)
	// Unique is the kind's uniqueness policy (Options.Unique).
	Unique *Unique
	// ConcurrencyKey computes a job's concurrency key from its arguments
	// (an A, as Decode returns them); nil when the kind computes none.
	ConcurrencyKey func(args any) string
}

// Untyped returns the kind without the type of its arguments.
func (k *Kind[A]) Untyped() Untyped {
	u := Untyped{Name: k.name, Flow: k.flow, Unique: k.opts.Unique, Decode: func(raw json.RawMessage) (any, error) {
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("arguments of job kind %q do not decode into %T: %w", k.name, a, err)
		}
		return a, nil
	}}
	if ck := k.opts.ConcurrencyKey; ck != nil {
		u.ConcurrencyKey = func(args any) string {
			a, _ := args.(A) // the zero A for a nil interface
			return ck(a)
		}
	}
	return u
}

// Snooze returns the error a worker function returns to run the job again
// after d, without counting an attempt (see flow.Snooze). The job's
// priority and queue stay as they were.
func Snooze(d time.Duration) error { return flow.Snooze(d) }

// Cancel returns the error a worker function returns to end the job
// cancelled, with reason, and no retry (see flow.Cancel).
func Cancel(reason string) error { return flow.Cancel(reason) }
