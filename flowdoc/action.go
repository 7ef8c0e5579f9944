package flowdoc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/hephaestus-go/hephaestus/flow"
)

// ErrUnknownAction is wrapped by Registry.Lookup for a name no action has.
var ErrUnknownAction = errors.New("unknown action")

// ActionCall describes one invocation of an action by a document step.
type ActionCall struct {
	RunID string
	Step  string
	// Index is the element of a map step, or -1.
	Index int
	// CreatedBy is the user who started the run (the client's
	// StartOptions.CreatedBy; for a run started without one, its input's
	// "created_by" field), so actions run with that user's permissions.
	CreatedBy string
	// OnBehalfOf is the user the run was started on behalf of (the
	// client's StartOptions.OnBehalfOf: an API caller with the act-as
	// permission named them), or "". An action that acts for the end user
	// uses it, falling back to CreatedBy.
	OnBehalfOf string
	// IdempotencyKey is the same for every attempt of the step (of the
	// element) in a run: pass it on to make external effects happen once.
	IdempotencyKey string

	// secrets are the secrets the step's arguments read, for the action
	// to redact from what it returns (redact).
	secrets []secretUse
}

// Action is a named operation a document step calls with its resolved
// arguments (a JSON object). RegisterAction builds one from a typed Go
// function; other kinds (HTTP, remote workers) fill the fields themselves.
type Action struct {
	Name string
	// Params, when set, lists the argument names the action accepts, with
	// a check of a literal argument value (nil accepts any value). A
	// document passing another name fails validation. Nil accepts any
	// arguments.
	Params map[string]func(json.RawMessage) error
	// Invoke runs the action. Unused (and may be nil) for a remote
	// action.
	Invoke func(ctx context.Context, call ActionCall, args json.RawMessage) (json.RawMessage, error)
	// Remote: workers outside the process run the action (RemoteAction).
	Remote bool

	// secretArgs are the arguments (and their fields) in which the
	// action accepts {{secret.NAME}}; set by RegisterHTTP.
	secretArgs []string
}

// RemoteAction returns an action that workers outside the process run:
// those that claim the action's name (the server's HTTP workers, in any
// language). A step that calls it becomes a remote step
// (flow.Remote; flow.RemoteMap for a map step) whose task carries the
// handler "action:<name>": the worker receives the step's resolved
// arguments (each element's, for a map step) and reports the output,
// which the step's branch conditions then read, as they read a Go
// action's. Retries, timeouts and routing are those of any step. It
// accepts any arguments (Params is nil).
func RemoteAction(name string) *Action { return &Action{Name: name, Remote: true} }

// Registry holds the actions documents may call. The zero value is not
// usable; use NewRegistry. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	actions  map[string]*Action
	fallback func(name string) *Action
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{actions: map[string]*Action{}} }

// Register adds an action; a second action of one name is an error.
func (r *Registry) Register(a *Action) error {
	if a == nil || a.Name == "" || (a.Invoke == nil && !a.Remote) {
		return errors.New("flowdoc: register action: an action needs a name and an Invoke function (or Remote)")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.actions[a.Name]; dup {
		return fmt.Errorf("flowdoc: register action %q: an action of that name is already registered", a.Name)
	}
	r.actions[a.Name] = a
	return nil
}

// SetFallback makes fn answer Lookup for the names no registered action
// has: a non-nil result is the action, nil leaves the name unknown. A
// server that runs documents for workers outside the process passes
// RemoteAction, so that every action a document names that the server
// has no Go function for is remote, and submitted documents validate and
// run. nil removes the fallback.
func (r *Registry) SetFallback(fn func(name string) *Action) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fallback = fn
}

// Lookup returns the named action: the registered one, or else the
// fallback's (SetFallback).
func (r *Registry) Lookup(name string) (*Action, error) {
	r.mu.RLock()
	a, ok := r.actions[name]
	fallback := r.fallback
	r.mu.RUnlock()
	if ok {
		return a, nil
	}
	if fallback != nil && name != "" {
		if a := fallback(name); a != nil && (a.Invoke != nil || a.Remote) {
			return a, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownAction, name)
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.actions))
	for n := range r.actions {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// RegisterAction registers a typed Go function as the action name. The
// step's arguments decode into In; when In is a struct, its JSON field
// names are the arguments a document may pass, and literal values are
// checked against the field types when the document is compiled. The
// output encodes as JSON and becomes the step's output.
func RegisterAction[In, Out any](r *Registry, name string, fn func(ctx context.Context, call ActionCall, in In) (Out, error)) error {
	if fn == nil {
		return fmt.Errorf("flowdoc: register action %q: the function is nil", name)
	}
	a := &Action{Name: name, Params: paramsOf(reflect.TypeFor[In]())}
	a.Invoke = func(ctx context.Context, call ActionCall, args json.RawMessage) (json.RawMessage, error) {
		var in In
		if len(args) > 0 {
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, &ArgsError{Action: name, Step: call.Step, Err: err}
			}
		}
		out, err := fn(ctx, call, in)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, fmt.Errorf("action %q: output does not encode as JSON: %w", name, err)
		}
		return b, nil
	}
	return r.Register(a)
}

// ArgsError reports arguments that do not decode into an action's input.
// Steps fail on it at once: retrying cannot change it.
type ArgsError struct {
	Action, Step string
	Err          error
}

func (e *ArgsError) Error() string {
	return fmt.Sprintf("step %q: the arguments do not fit action %q: %v", e.Step, e.Action, e.Err)
}

func (e *ArgsError) Unwrap() error { return e.Err }

// paramsOf lists the JSON fields of a struct type, or nil for any other
// type (a map accepts any argument).
func paramsOf(t reflect.Type) map[string]func(json.RawMessage) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]func(json.RawMessage) error{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		ft := f.Type
		out[name] = func(v json.RawMessage) error {
			return json.Unmarshal(v, reflect.New(ft).Interface())
		}
	}
	return out
}

func reflectTypeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// LoadStored parses a stored document and compiles it with the actions of
// reg as flow name, version version: the store's name and version, not
// the document's own name and version fields, identify the flow that
// runs of it are pinned to. src names the document in errors.
func LoadStored(name string, version int, src string, data []byte, reg *Registry) (*flow.Flow, error) {
	d, c := parse(src, data)
	if d == nil {
		return nil, c.err()
	}
	d.name, d.version = name, version
	if len(c.list) == 0 {
		return Compile(d, reg)
	}
	f, err := compile(d, reg, c)
	if err == nil && f != nil {
		err = c.err()
	}
	return nil, err
}
