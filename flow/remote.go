package flow

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Remote steps are run by workers outside the process: programs in any
// language that claim them over the server's HTTP API (or the client's
// ClaimRemote) by their handler, the name they registered, and report the
// output back. Their tasks carry the handler "action:<handler>" instead
// of the flow's, so only such workers claim them; the flow's other steps
// and timers run in the processes that register the flow, as usual.
// Retries, timeouts, heartbeats and fencing are those of any step: a
// worker whose lease lapsed cannot complete the step, and a failure is
// retried per the step's policy.
//
// What the worker receives is the step's input document ({"input": <run
// input>, "<key>": <output of an ancestor>, …}; for a map step, the
// element), unless RemotePrepare says otherwise; what it reports becomes
// the step's output with the event "ok", unless RemoteFinish says
// otherwise. Both hooks run in the process that hands out or completes
// the task, in the step's call context: Output, RunInput, CallInfo and
// CreatedBy work there as in step code.

// RemoteInput is what RemotePrepare's function receives: the run input
// for a plain step, the element for a map step.
type RemoteInput = json.RawMessage

// Remote adds a step that workers outside the process run: those that
// claim the handler. Its output is what the worker reports (a JSON
// value), unless RemoteFinish turns it into something else. Every step
// option applies; declare Events when RemoteFinish emits others than "ok".
func Remote(b *Builder, name, handler string, opts ...StepOption) *StepRef[json.RawMessage, json.RawMessage] {
	def := b.addStep(name, KindTask, reflect.TypeFor[json.RawMessage](), reflect.TypeFor[json.RawMessage](), opts)
	def.remote, def.remoteSet = handler, true
	def.run = def.runRemote
	return &StepRef[json.RawMessage, json.RawMessage]{def}
}

// RemoteMap adds a map step whose elements workers outside the process
// run, each element a task of its own for the handler, with its own
// retries. The step's output is the array of the elements' outputs, in
// input order. Over names the array, as for Map.
func RemoteMap(b *Builder, name, handler string, opts ...StepOption) *StepRef[json.RawMessage, []json.RawMessage] {
	def := b.addStep(name, KindMap, reflect.TypeFor[json.RawMessage](), reflect.TypeFor[[]json.RawMessage](), opts)
	def.remote, def.remoteSet = handler, true
	def.run = def.runRemote
	return &StepRef[json.RawMessage, []json.RawMessage]{def}
}

// RemotePrepare sets what the worker of a remote step receives: fn's
// result for the step's run input (the element, for a map step), in the
// step's call context. The document compiler resolves an action's
// templated arguments here. Without it, the worker receives the step's
// input document (the element, for a map step). An error fails the
// attempt, as an error of step code does.
func RemotePrepare(fn func(ctx context.Context, in RemoteInput) (json.RawMessage, error)) StepOption {
	return func(d *stepDef) { d.prepare = fn }
}

// RemoteFinish sets how the output a remote worker reports becomes the
// step's outcome: fn's result (an event and an output, or Wait for a step
// declared with Waits) for the step's run input (the element, for a map
// step) and the worker's output, in the step's call context. The document
// compiler applies a step's branch conditions here. Without it, the
// output is the step's, with the event "ok". An error fails the attempt
// (NonRetryable ones for good), as an error of step code does. For a map
// step the event is ignored: elements emit none.
func RemoteFinish(fn func(ctx context.Context, in RemoteInput, out json.RawMessage) (Result[json.RawMessage], error)) StepOption {
	return func(d *stepDef) { d.finish = fn }
}

// runRemote is what a remote step does when a worker of the process is
// asked to run it: only a task enqueued without its handler gets there.
func (d *stepDef) runRemote(context.Context, *Call) (Outcome, error) {
	return Outcome{}, NonRetryable(fmt.Errorf("step %q is run by workers outside the process (handler %q), not by step code here", d.name, d.remote))
}

// PrepareRemote returns what the worker of a remote step receives for
// the call (see RemotePrepare), running the hook in the step's call
// context. A runtime calls it when it hands the task out.
func (f *Flow) PrepareRemote(ctx context.Context, c Call) (in json.RawMessage, err error) {
	def, err := f.remoteStep(&c)
	if err != nil {
		return nil, err
	}
	arg := c.input()["input"]
	if def.kind == KindMap {
		arg = c.Item
	}
	if def.prepare == nil {
		if def.kind == KindMap {
			return orNull(c.Item), nil
		}
		return orNull(c.Input), nil
	}
	defer func() {
		if p := recover(); p != nil {
			in, err = nil, fmt.Errorf("step %q: RemotePrepare panicked: %v", c.Step, p)
		}
	}()
	c.flow = f
	out, err := def.prepare(context.WithValue(ctx, callKey{}, &c), orNull(arg))
	if err != nil {
		return nil, err
	}
	if !json.Valid(out) {
		return nil, NonRetryable(fmt.Errorf("step %q: RemotePrepare returned no JSON value", c.Step))
	}
	return out, nil
}

// FinishRemote turns the output a remote worker reported for the call
// into the step's outcome (see RemoteFinish), running the hook in the
// step's call context. A runtime calls it when the worker completes the
// task. Output that is not JSON fails for good.
func (f *Flow) FinishRemote(ctx context.Context, c Call, output json.RawMessage) (out Outcome, err error) {
	def, err := f.remoteStep(&c)
	if err != nil {
		return Outcome{}, err
	}
	output = orNull(output)
	if !json.Valid(output) {
		return Outcome{}, NonRetryable(fmt.Errorf("step %q: the worker's output is not a JSON value", c.Step))
	}
	if def.finish == nil {
		return Outcome{Event: EventOK, Output: output}, nil
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = Outcome{}, fmt.Errorf("step %q: RemoteFinish panicked: %v", c.Step, p)
		}
	}()
	arg := c.input()["input"]
	if def.kind == KindMap {
		arg = c.Item
	}
	c.flow = f
	res, err := def.finish(context.WithValue(ctx, callKey{}, &c), orNull(arg), output)
	if err != nil {
		return Outcome{}, err
	}
	if res.wait {
		if !def.waits || def.kind == KindMap {
			return Outcome{}, NonRetryable(fmt.Errorf("step %q: RemoteFinish returned Wait but the step is not declared with the Waits option", c.Step))
		}
		return Outcome{Wait: true}, nil
	}
	ev := res.Event
	if ev == "" || def.kind == KindMap {
		ev = EventOK
	}
	return Outcome{Event: ev, Output: orNull(res.Output)}, nil
}

// remoteStep returns the remote step the call names, with its input
// document checked.
func (f *Flow) remoteStep(c *Call) (*stepDef, error) {
	def, ok := f.byName[c.Step]
	if !ok {
		return nil, NonRetryable(fmt.Errorf("flow %q version %d has no step %q", f.name, f.version, c.Step))
	}
	if !def.remoteSet {
		return nil, NonRetryable(fmt.Errorf("step %q of flow %q version %d is not a remote step", c.Step, f.name, f.version))
	}
	if c.input(); c.parseErr != nil {
		return nil, NonRetryable(&InputError{Step: c.Step, What: "the input document (a JSON object)", Err: c.parseErr})
	}
	return def, nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// checkRemote reports remote options that do not fit the step.
func (c *checker) checkRemote(d *stepDef) {
	if !d.remoteSet {
		if d.prepare != nil || d.finish != nil {
			c.add(RuleInvalidOption, d.at, []string{d.name}, "step %q: RemotePrepare and RemoteFinish apply only to remote steps; drop them or declare the step with flow.Remote or flow.RemoteMap", d.name)
		}
		return
	}
	if !validHandler(d.remote) {
		c.add(RuleInvalidName, d.at, []string{d.name}, "step %q: remote handler %q is not valid: 1 to 200 bytes of printable characters, without spaces", d.name, d.remote)
	}
}

// validHandler: a remote handler's name is 1 to hephtype.MaxNameLen bytes
// of printable ASCII without spaces (documents name actions freely).
func validHandler(s string) bool {
	if s == "" || len(s) > hephtype.MaxNameLen {
		return false
	}
	for i := range len(s) {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
