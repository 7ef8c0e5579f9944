package flow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"time"

	fuzzy "github.com/hephaestus-go/hephaestus/internal/suggest"
)

// Result is what an EventStep returns: an event with an output, or a
// request to wait.
type Result[Out any] struct {
	// Event is emitted when the step completes; empty means "ok".
	Event string
	// Output becomes the step's output in the run's context.
	Output Out
	wait   bool
}

// Emit completes a step with a named event and an output.
func Emit[Out any](event string, out Out) Result[Out] { return Result[Out]{Event: event, Output: out} }

// Ok completes a step with the default event "ok".
func Ok[Out any](out Out) Result[Out] { return Result[Out]{Event: EventOK, Output: out} }

// Wait leaves the step waiting: the run goes to status waiting until it is
// resumed from outside with an event and a payload (the payload becomes
// the step's output), or until the step's timeout delivers "timeout". Only
// steps declared with the Waits option may wait.
func Wait[Out any]() Result[Out] { return Result[Out]{wait: true} }

// StepRef is a typed handle on a step: it names the step in edges and reads
// its output, typed, from the context of the steps that follow it. Out is
// the type of the step's output: for a map step, the array of results.
type StepRef[In, Out any] struct {
	def *stepDef
}

// Name returns the step's name.
func (r *StepRef[In, Out]) Name() string { return r.def.name }

// Output returns this step's output from the context of the step now
// running, which it must precede: a path of edges leads from this step to
// the running one (see Output for the errors).
func (r *StepRef[In, Out]) Output(ctx context.Context) (Out, error) {
	return Output[Out](ctx, r.def.contextKey())
}

// Step adds a step whose code takes the run input, decoded as In, and
// returns an output; it emits the event "ok".
func Step[In, Out any](b *Builder, name string, fn func(ctx context.Context, in In) (Out, error), opts ...StepOption) *StepRef[In, Out] {
	def := b.addStep(name, KindTask, reflect.TypeFor[In](), reflect.TypeFor[Out](), opts)
	if fn == nil {
		b.declErr(def, "the step function is nil; pass the function that runs the step")
	}
	def.run = func(ctx context.Context, c *Call) (Outcome, error) {
		in, err := decode[In](c.input()["input"], name, "run input")
		if err != nil {
			return Outcome{}, err
		}
		out, err := fn(ctx, in)
		if err != nil {
			return Outcome{}, err
		}
		return encode(name, EventOK, out)
	}
	return &StepRef[In, Out]{def}
}

// EventStep adds a step whose code chooses the event it emits, or waits.
// Declare its events with the Events option.
func EventStep[In, Out any](b *Builder, name string, fn func(ctx context.Context, in In) (Result[Out], error), opts ...StepOption) *StepRef[In, Out] {
	def := b.addStep(name, KindTask, reflect.TypeFor[In](), reflect.TypeFor[Out](), opts)
	if fn == nil {
		b.declErr(def, "the step function is nil; pass the function that runs the step")
	}
	def.run = func(ctx context.Context, c *Call) (Outcome, error) {
		in, err := decode[In](c.input()["input"], name, "run input")
		if err != nil {
			return Outcome{}, err
		}
		res, err := fn(ctx, in)
		if err != nil {
			return Outcome{}, err
		}
		if res.wait {
			if !def.waits {
				return Outcome{}, NonRetryable(fmt.Errorf("step %q returned Wait but is not declared with the Waits option", name))
			}
			return Outcome{Wait: true}, nil
		}
		ev := res.Event
		if ev == "" {
			ev = EventOK
		}
		return encode(name, ev, res.Output)
	}
	return &StepRef[In, Out]{def}
}

// Map adds a map step: its code runs once per element of a JSON array, in
// parallel, each element with its own retries, and the step's output is the
// array of results in input order. An empty array completes at once. The
// handle's Output is therefore typed []Out.
//
// The array is the output of the step's single dependency, or the run input
// when it has none; the Over option names another source or a field.
func Map[Item, Out any](b *Builder, name string, fn func(ctx context.Context, item Item) (Out, error), opts ...StepOption) *StepRef[Item, []Out] {
	def := b.addStep(name, KindMap, reflect.TypeFor[Item](), reflect.TypeFor[[]Out](), opts)
	if fn == nil {
		b.declErr(def, "the step function is nil; pass the function that runs the step")
	}
	def.run = func(ctx context.Context, c *Call) (Outcome, error) {
		item, err := decode[Item](c.Item, name, fmt.Sprintf("element %d", c.Index))
		if err != nil {
			return Outcome{}, err
		}
		out, err := fn(ctx, item)
		if err != nil {
			return Outcome{}, err
		}
		return encode(name, EventOK, out)
	}
	return &StepRef[Item, []Out]{def}
}

// Call is one invocation of step code, as a runtime makes it.
type Call struct {
	RunID string
	Step  string
	// Index is the element of a map step, or -1.
	Index   int
	Attempt int
	// IdempotencyKey is the same for every attempt of the step (of the
	// element, for a map step) in a run: pass it to external services to
	// make their effects happen once.
	IdempotencyKey string
	// Input is the step's input document: {"input": <run input>,
	// "<key>": <output>, …}.
	Input json.RawMessage
	// Item is the element, for a map step.
	Item json.RawMessage
	// Details are the heartbeat details the previous attempt (or an
	// earlier execution of this one, whose worker lost its lease) recorded
	// last: step code reads them with HeartbeatDetails to resume work.
	Details json.RawMessage
	// Heartbeat, when set, receives what step code passes to
	// RecordHeartbeat; the runtime stores it with the task's lease.
	Heartbeat func(details any) error
	// CreatedBy, when set, returns the user who started the run
	// (StartOptions.CreatedBy), or "": step code asks for it with the
	// package's CreatedBy function, so a step that does not ask costs no
	// read of the run.
	CreatedBy func(ctx context.Context) (string, error)
	// OnBehalfOf, when set, returns the user the run was started on
	// behalf of (StartOptions.OnBehalfOf), or "", as CreatedBy.
	OnBehalfOf func(ctx context.Context) (string, error)
	// Logger, when set, is the attempt's logger (the package's Logger
	// function returns it): the runtime stores its records with the
	// attempt and passes them on to the process's logger.
	Logger *slog.Logger
	// Now, when set, is the runtime's clock (the package's Now function
	// reads it); nil is time.Now.
	Now func() time.Time

	parsed   map[string]json.RawMessage
	parseErr error
	flow     *Flow
	// attrs are the search attributes step code set (SetSearchAttributes).
	attrs map[string]any
}

func (c *Call) input() map[string]json.RawMessage {
	if c.parsed == nil {
		c.parsed = map[string]json.RawMessage{}
		if len(c.Input) > 0 {
			c.parseErr = json.Unmarshal(c.Input, &c.parsed)
		}
	}
	return c.parsed
}

// Outcome is what step code produced.
type Outcome struct {
	Event  string
	Output json.RawMessage
	Wait   bool
	// SearchAttributes are the search attributes step code set
	// (SetSearchAttributes): the runtime upserts them with the step's
	// result.
	SearchAttributes map[string]any
}

type callKey struct{}

// Info describes the step invocation that ctx belongs to.
type Info struct {
	RunID          string
	Step           string
	Index          int
	Attempt        int
	IdempotencyKey string
}

// CallInfo returns what ctx says of the running step; ok is false outside
// step code.
func CallInfo(ctx context.Context) (Info, bool) {
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok {
		return Info{}, false
	}
	return Info{RunID: c.RunID, Step: c.Step, Index: c.Index, Attempt: c.Attempt, IdempotencyKey: c.IdempotencyKey}, true
}

// CreatedBy returns the user who started the running step's run
// (hephaestus.StartOptions.CreatedBy), or "" when nobody was named or ctx
// is not a step's. The runtime reads it from the run when a step first
// asks (once per run and process), so steps that never ask cost nothing;
// an error means the run could not be read, and is worth a retry.
func CreatedBy(ctx context.Context) (string, error) {
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok || c.CreatedBy == nil {
		return "", nil
	}
	return c.CreatedBy(ctx)
}

// OnBehalfOf returns the user the running step's run was started on
// behalf of (hephaestus.StartOptions.OnBehalfOf: a caller allowed to act
// as others named them), or "" when none was named or ctx is not a
// step's. It is read as CreatedBy is.
func OnBehalfOf(ctx context.Context) (string, error) {
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok || c.OnBehalfOf == nil {
		return "", nil
	}
	return c.OnBehalfOf(ctx)
}

// discard is the logger outside step code, or of a runtime that gives
// none.
var discard = slog.New(slog.DiscardHandler)

// Logger returns the running step's logger (also of a job and of a
// document's action): its records at Info and above are stored with the
// attempt (run, step, element, attempt, worker), bounded and with secrets
// redacted, and read with heph logs, the API's /runs/{id}/logs and the
// dashboard's run page; every record also goes to the process's logger
// (hephaestus.Config.Logger), with the run, step and attempt. Outside
// step code it returns a logger that discards everything.
func Logger(ctx context.Context) *slog.Logger {
	if c, ok := ctx.Value(callKey{}).(*Call); ok && c.Logger != nil {
		return c.Logger
	}
	return discard
}

// RecordHeartbeat records progress of a long step: the details (any
// JSON-encodable value; the last call wins) are stored with the task at its
// next heartbeat and when the attempt ends, and the next attempt of the
// step (of the element, for a map step) reads them with HeartbeatDetails,
// so that it can resume where this one stopped, even after a crash of this
// worker. hephtest.RunFlow passes them to the next attempt in memory. It
// returns an error when the details do not encode or exceed the payload
// limit, or outside step code. Leases are extended by the runtime whether
// or not step code calls it.
func RecordHeartbeat(ctx context.Context, details any) error {
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok {
		return errors.New("flow.RecordHeartbeat: not called from step code")
	}
	if c.Heartbeat == nil {
		return nil
	}
	return c.Heartbeat(details)
}

// HeartbeatDetails decodes the heartbeat details that an earlier attempt
// of the running step recorded last (RecordHeartbeat). ok is false when
// there are none.
func HeartbeatDetails[T any](ctx context.Context) (v T, ok bool, err error) {
	c, found := ctx.Value(callKey{}).(*Call)
	if !found {
		return v, false, errors.New("flow.HeartbeatDetails: not called from step code")
	}
	if len(c.Details) == 0 {
		return v, false, nil
	}
	if err := json.Unmarshal(c.Details, &v); err != nil {
		return v, false, fmt.Errorf("step %q: heartbeat details do not decode into %T: %w", c.Step, v, err)
	}
	return v, true, nil
}

// Output decodes the output of the step with the given context key (its
// name, or Key) from the running step's context. Prefer StepRef.Output,
// which is typed by the step.
//
// The context holds the run input and the output of every ancestor of the
// running step that completed: every step from which a path of edges leads
// to it, however many hops back (only the steps it names, when it declares
// Reads). Reading any other step fails with a *ReadError that names both
// steps and is NonRetryable, since no retry can change it: ErrNotAncestor
// for a step that does not lead to the running one, ErrNotDeclared for a
// step missing from its Reads, ErrUnknownKey for a key no step has, and
// ErrSkipped for an ancestor that did not run because its path was not
// taken (test for it with errors.Is to handle an optional branch).
func Output[T any](ctx context.Context, key string) (T, error) {
	var zero T
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok {
		return zero, errors.New("flow.Output: not called from step code")
	}
	if key == "input" {
		return zero, NonRetryable(fmt.Errorf("step %q: the key %q is the run input, not a step's output; read it with flow.RunInput", c.Step, key))
	}
	raw, ok := c.input()[key]
	if !ok {
		return zero, NonRetryable(c.readError(key))
	}
	if err := c.flow.canRead(c.Step, key); err != nil {
		// The document holds it (a task scheduled before a redeploy that
		// changed the flow's shape under one version): still refuse.
		return zero, NonRetryable(err)
	}
	return decode[T](raw, c.Step, fmt.Sprintf("output of %q", key))
}

// Errors of reading a step's output from the context; a *ReadError wraps
// one of them.
var (
	// ErrNotAncestor: no path of edges leads from the step read to the
	// reading step, so its output is never in the reader's context.
	ErrNotAncestor = errors.New("not an ancestor of the reading step")
	// ErrNotDeclared: the reading step declares Reads without the step
	// read.
	ErrNotDeclared = errors.New("not among the steps the reading step declares with Reads")
	// ErrUnknownKey: no step of the flow has the context key read.
	ErrUnknownKey = errors.New("no step of the flow has that context key")
	// ErrSkipped: the step read is an ancestor that did not run in this
	// run, because its path was not taken.
	ErrSkipped = errors.New("skipped in this run: its path was not taken")
)

// ReadError reports a read of a step's output that cannot succeed. Step is
// the reading step, Read the step read ("" when no step has Key), and Err
// one of ErrNotAncestor, ErrNotDeclared, ErrUnknownKey and ErrSkipped.
type ReadError struct {
	Step string
	Read string
	Key  string
	Err  error
}

func (e *ReadError) Error() string {
	switch {
	case e.Read == "":
		return fmt.Sprintf("step %q reads the output of %q: %v", e.Step, e.Key, e.Err)
	case errors.Is(e.Err, ErrNotAncestor):
		return fmt.Sprintf("step %q reads the output of step %q, which is not an ancestor of %q: no path of edges leads from %q to %q, so its output is never in the context of %q; add an edge or DependsOn on the way from %q to %q, or read another step",
			e.Step, e.Read, e.Step, e.Read, e.Step, e.Step, e.Read, e.Step)
	case errors.Is(e.Err, ErrNotDeclared):
		return fmt.Sprintf("step %q reads the output of step %q, which is not among the steps it declares with flow.Reads; add %q to them", e.Step, e.Read, e.Read)
	case errors.Is(e.Err, ErrSkipped):
		return fmt.Sprintf("step %q reads the output of step %q, which was skipped in this run (its path was not taken); check errors.Is(err, flow.ErrSkipped) to handle a branch that may not run", e.Step, e.Read)
	}
	return fmt.Sprintf("step %q reads the output of step %q: %v", e.Step, e.Read, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// readError explains why the context of the running step has no output
// under key.
func (c *Call) readError(key string) error {
	if err := c.flow.canRead(c.Step, key); err != nil {
		return err
	}
	if c.flow == nil {
		return &ReadError{Step: c.Step, Key: key, Err: ErrUnknownKey}
	}
	return &ReadError{Step: c.Step, Read: c.flow.byKey[key].name, Key: key, Err: ErrSkipped}
}

// canRead returns the *ReadError that forbids step from reading the output
// under key in every run, or nil.
func (f *Flow) canRead(step, key string) error {
	if f == nil {
		return nil
	}
	read, ok := f.byKey[key]
	if !ok {
		return &ReadError{Step: step, Key: key, Err: ErrUnknownKey}
	}
	reader := f.byName[step]
	if reader != nil && reader.readsSet {
		if !slices.Contains(reader.reads, read.name) {
			return &ReadError{Step: step, Read: read.name, Key: key, Err: ErrNotDeclared}
		}
		return nil
	}
	i, _ := f.graph.Lookup(step)
	a, _ := f.graph.Lookup(read.name)
	if !f.graph.IsAncestor(a, i) {
		return &ReadError{Step: step, Read: read.name, Key: key, Err: ErrNotAncestor}
	}
	return nil
}

// RunInput decodes the run input from step code: useful in map steps, whose
// argument is the element.
func RunInput[T any](ctx context.Context) (T, error) {
	var zero T
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok {
		return zero, errors.New("flow.RunInput: not called from step code")
	}
	return decode[T](c.input()["input"], c.Step, "run input")
}

// InputError reports input that does not decode into a step's typed
// argument. It is permanent: retrying cannot fix it.
type InputError struct {
	Step string
	What string
	Err  error
}

func (e *InputError) Error() string {
	return fmt.Sprintf("step %q: %s does not decode: %v", e.Step, e.What, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

func decode[T any](raw json.RawMessage, step, what string) (T, error) {
	var v T
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, NonRetryable(&InputError{Step: step, What: what, Err: err})
	}
	return v, nil
}

func encode[Out any](step, event string, out Out) (Outcome, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return Outcome{}, NonRetryable(fmt.Errorf("step %q: output does not encode as JSON: %w", step, err))
	}
	return Outcome{Event: event, Output: b}, nil
}

// Invoke runs the code of one step for a runtime: it decodes the input,
// calls the step function with a context carrying the call's Info, and
// encodes the output. Errors that retrying cannot fix are marked
// NonRetryable (see RetryPolicy.Retryable).
func (f *Flow) Invoke(ctx context.Context, c Call) (out Outcome, err error) {
	def, ok := f.byName[c.Step]
	if !ok {
		return Outcome{}, NonRetryable(fmt.Errorf("flow %q version %d has no step %q", f.name, f.version, c.Step))
	}
	if c.input(); c.parseErr != nil {
		return Outcome{}, NonRetryable(&InputError{Step: c.Step, What: "the input document (a JSON object)", Err: c.parseErr})
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("step %q panicked: %v", c.Step, p)
		}
	}()
	c.flow = f
	out, err = def.run(context.WithValue(ctx, callKey{}, &c), &c)
	if err == nil && len(c.attrs) > 0 {
		out.SearchAttributes = c.attrs
	}
	return out, err
}

// SetSearchAttributes upserts search attributes of the running step's
// run (docs/operations.md, Search attributes): they are written with the
// step's result, in the commit that records it, so an attempt that fails,
// or whose result is refused (its lease lost), sets none, and a retried
// commit sets them once. A later call replaces the value of a name an
// earlier one set. A name the flow does not declare
// (Builder.SearchAttribute) is an error; a value not of the declared type
// fails the attempt, naming the attribute. Outside step code it is an
// error.
func SetSearchAttributes(ctx context.Context, attrs map[string]any) error {
	c, ok := ctx.Value(callKey{}).(*Call)
	if !ok || c.flow == nil {
		return errors.New("flow: SetSearchAttributes outside step code")
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		if _, ok := c.flow.attrs[name]; !ok {
			names := slices.Sorted(maps.Keys(c.flow.attrs))
			return fmt.Errorf("step %q: search attribute %q is not declared by flow %q%s", c.Step, name, c.flow.name,
				fuzzy.DidYouMean(name, names, true))
		}
	}
	if c.attrs == nil {
		c.attrs = map[string]any{}
	}
	maps.Copy(c.attrs, attrs)
	return nil
}

// StepOption configures a step, or (through Builder.Defaults) every step of
// a flow.
type StepOption func(*stepDef)

// DependsOn makes the step follow the named steps on their default event
// "ok" (PgFlow style); a step with several dependencies joins them.
func DependsOn(steps ...string) StepOption {
	return func(d *stepDef) { d.deps = append(d.deps, steps...); d.depsSet = true }
}

// Events declares the events the step may emit. A step that declares none
// emits "ok".
func Events(events ...string) StepOption {
	return func(d *stepDef) { d.events = append(d.events, events...); d.eventsSet = true }
}

// Key sets the name of the step's output in the context. Defaults to the
// step's name.
func Key(key string) StepOption { return func(d *stepDef) { d.key = key; d.keySet = true } }

// Retry sets the step's retry policy; unset fields inherit.
func Retry(p RetryPolicy) StepOption { return func(d *stepDef) { d.retry = &p } }

// Timeout bounds each attempt: the step's context is cancelled after d and
// the attempt counts as failed (and is retried per the policy). Defaults to
// 60 seconds.
func Timeout(d time.Duration) StepOption { return func(s *stepDef) { s.timeout = &d } }

// Queue names the task queue the step runs on. Defaults to "default".
func Queue(name string) StepOption { return func(s *stepDef) { s.queue = &name } }

// Priority orders ready tasks in a queue: higher runs first. Defaults to 0.
func Priority(p int) StepOption { return func(s *stepDef) { s.priority = &p } }

// Waits declares that the step may return Wait. A positive timeout delivers
// the event "timeout" when the step has waited that long: "timeout" is then
// one of the step's events without being declared (do not list it in
// Events; Build reports it if you do), and the flow must route it with an
// Edge on EventTimeout.
func Waits(timeout time.Duration) StepOption {
	return func(s *stepDef) { s.waits = true; s.waitTimeout = timeout; s.waitsSet = true }
}

// Reads declares the steps whose outputs the step reads, each an ancestor
// of it. Build reports a step named here that does not lead to this one,
// and the step's context then holds only these outputs (and the run
// input): cheaper than every ancestor's in a long flow, and a read of
// another step fails with ErrNotDeclared. Reads() with no step leaves only
// the run input. Without Reads, the context holds every completed
// ancestor's output.
func Reads(steps ...string) StepOption {
	return func(d *stepDef) { d.reads = append(d.reads, steps...); d.readsSet = true }
}

// Over sets a map step's source: the output of the named step (one of its
// ancestors: a step from which a path of edges leads to it), or the run
// input when step is empty; field, when set,
// selects that field of the source object.
func Over(step, field string) StepOption {
	return func(s *stepDef) { s.overSet = true; s.overStep = step; s.overField = field }
}
