package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// ActivityOptions say how the runtime runs an activity. Zero fields take
// the runtime's defaults.
type ActivityOptions struct {
	// Queue is the task queue the activity runs from. Defaults to the
	// runtime's default queue.
	Queue string
	// StartToCloseTimeout bounds one attempt. Defaults to the runtime's
	// step timeout.
	StartToCloseTimeout time.Duration
	// HeartbeatTimeout fails an attempt that has not called
	// RecordHeartbeat for this long. Defaults to none.
	HeartbeatTimeout time.Duration
	// ScheduleToCloseTimeout bounds the activity as a whole, from when
	// it is scheduled to its final outcome, over all its attempts and
	// backoffs: once it has passed when an attempt fails (or the next
	// attempt could only start after it), no further attempt is
	// scheduled and the activity fails with an error for which
	// errors.Is(err, ErrTimeout) holds. Defaults to none.
	ScheduleToCloseTimeout time.Duration
	// RetryPolicy says how failed attempts are retried; its zero fields
	// inherit flow.DefaultRetryPolicy (3 attempts, exponential backoff).
	// Errors wrapped with flow.NonRetryable are never retried.
	RetryPolicy flow.RetryPolicy
}

// Activity is a unit of work a workflow delegates to the outside world:
// an ordinary Go function, run by workers at least once, retried on
// failure, whose outcome the history records.
type Activity[In, Out any] struct {
	name string
	fn   func(ctx context.Context, in In) (Out, error)
	opts ActivityOptions
}

// NewActivity defines an activity. The name identifies it in histories.
// NewActivity panics on an empty name or a nil function.
func NewActivity[In, Out any](name string, fn func(ctx context.Context, in In) (Out, error)) *Activity[In, Out] {
	if name == "" || fn == nil {
		panic("workflow.NewActivity: an activity needs a name and a function")
	}
	return &Activity[In, Out]{name: name, fn: fn}
}

// Name returns the activity's name.
func (a *Activity[In, Out]) Name() string { return a.name }

// Options returns the options calls of the activity use.
func (a *Activity[In, Out]) Options() ActivityOptions { return a.opts }

// WithOptions returns a copy of the activity whose calls use opts: set
// defaults where the activity is defined, or override them for one call:
//
//	out, err := charge.WithOptions(workflow.ActivityOptions{Queue: "payments"}).Execute(ctx, in)
func (a *Activity[In, Out]) WithOptions(opts ActivityOptions) *Activity[In, Out] {
	c := *a
	c.opts = opts
	return &c
}

// Execute runs the activity from workflow code and waits for its outcome.
// A failure (after the retries) is an *ActivityError.
func (a *Activity[In, Out]) Execute(ctx Context, in In) (Out, error) {
	u := unitOf(ctx)
	var zero Out
	raw, err := json.Marshal(in)
	if err != nil {
		return zero, fmt.Errorf("activity %q: input does not encode: %w", a.name, err)
	}
	o := a.opts
	out, err := u.ExecuteActivity(a.name, raw, replay.ActivityOptions{
		Queue: o.Queue, StartToCloseTimeout: o.StartToCloseTimeout, HeartbeatTimeout: o.HeartbeatTimeout, RetryPolicy: o.RetryPolicy,
		ScheduleToCloseTimeout: o.ScheduleToCloseTimeout,
	})
	if err != nil {
		return zero, userError(err)
	}
	v, err := decode[Out](out)
	if err != nil {
		return zero, fmt.Errorf("activity %q: output does not decode: %w", a.name, err)
	}
	return v, nil
}

// Invoke runs the activity's code for the runtime: it decodes the input,
// calls the function and encodes its output. Input that does not decode
// is a permanent failure (flow.NonRetryable); a panic is an error.
func (a *Activity[In, Out]) Invoke(ctx context.Context, input json.RawMessage) (out json.RawMessage, err error) {
	in, err := decode[In](input)
	if err != nil {
		return nil, flow.NonRetryable(fmt.Errorf("activity %q: input does not decode: %w", a.name, err))
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("activity %q panicked: %v", a.name, p)
		}
	}()
	v, err := a.fn(ctx, in)
	if err != nil {
		if app := ApplicationErrorOf(err, nil); app != nil && app.NonRetryable {
			return nil, flow.NonRetryable(err)
		}
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, flow.NonRetryable(fmt.Errorf("activity %q: output does not encode: %w", a.name, err))
	}
	return raw, nil
}

// ActivityError is the failure of an activity, as recorded in history:
// the message of the error its last attempt returned. Error values do not
// survive the trip through history (errors.Is on the original error does
// not hold), except an *ApplicationError: Cause holds it, with its type
// and details, and errors.As finds it.
type ActivityError struct {
	Activity string
	Attempt  int
	Message  string
	// Cause is the *ApplicationError the activity failed with, or nil.
	Cause error
}

// Unwrap returns Cause.
func (e *ActivityError) Unwrap() error { return e.Cause }

func (e *ActivityError) Error() string {
	return fmt.Sprintf("activity %q failed after %d attempt(s): %s", e.Activity, e.Attempt, e.Message)
}

// ActivityInfo describes the running attempt of an activity.
type ActivityInfo struct {
	RunID    string
	Workflow string
	Activity string
	Attempt  int
	// IdempotencyKey is the same for every attempt of this call of the
	// activity: pass it to external services so their effects happen once.
	IdempotencyKey string
}

// GetActivityInfo returns what ctx says of the running activity; ok is
// false outside activity code.
func GetActivityInfo(ctx context.Context) (info ActivityInfo, ok bool) {
	i, ok := replay.ActivityInfoFrom(ctx)
	if !ok {
		return ActivityInfo{}, false
	}
	return ActivityInfo{RunID: i.RunID, Workflow: i.Workflow, Activity: i.Name, Attempt: i.Attempt, IdempotencyKey: i.IdempotencyKey}, true
}

// ActivityLogger returns the running activity's logger: its records at
// Info and above are stored with the attempt (run, activity and its
// sequence number, attempt, worker), bounded and with secrets redacted,
// and read as a step's are (heph logs, the API, the dashboard); every
// record also goes to the process's logger. Outside activity code it
// returns a logger that discards everything. (Workflow code logs with
// Logger, which is quiet in replay and not stored.)
func ActivityLogger(ctx context.Context) *slog.Logger {
	if i, ok := replay.ActivityInfoFrom(ctx); ok && i.Logger != nil {
		return i.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// RecordHeartbeat tells the runtime, from activity code, that the attempt
// is alive (resetting its heartbeat timeout) and what progress it made:
// the details (any JSON-encodable value) are stored with the task at its
// next heartbeat, and the next attempt reads them with HeartbeatDetails.
// Outside activity code it does nothing. (The runtime extends the lease of
// a running attempt whether or not it heartbeats.)
func RecordHeartbeat(ctx context.Context, details any) {
	if i, ok := replay.ActivityInfoFrom(ctx); ok && i.Heartbeat != nil {
		i.Heartbeat(details)
	}
}

// HeartbeatDetails decodes the heartbeat details that an earlier attempt of
// the running activity (or an earlier execution of this attempt, whose
// worker lost its lease) recorded last. ok is false when there are none.
func HeartbeatDetails[T any](ctx context.Context) (v T, ok bool, err error) {
	i, found := replay.ActivityInfoFrom(ctx)
	if !found {
		return v, false, errors.New("workflow.HeartbeatDetails: not called from activity code")
	}
	if len(i.Details) == 0 {
		return v, false, nil
	}
	if err := json.Unmarshal(i.Details, &v); err != nil {
		return v, false, fmt.Errorf("activity %q: heartbeat details do not decode into %T: %w", i.Name, v, err)
	}
	return v, true, nil
}
