package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// The fuzz input is a little program of operations that declare a flow;
// each operation is an opcode byte and its argument bytes. Bytes past the
// end read as 0, so every input decodes to some flow.
const (
	opStep     = iota // name, kind, types, behavior, option count, options…
	opEdge            // from, event, target count, targets…
	opStart           // name
	opDefaults        // option
	opVersion         // version
	opKey             // key, scope
	opTag             // tag
	opMeta            // key, value
	opInput           // type
	opInputDoc        // run input
	numOps
)

// Step kinds.
const (
	kTask = iota
	kEvent
	kMap
	numKinds
)

// Options: each is three bytes, the kind and two arguments.
const (
	oDependsOn = iota
	oEvents
	oKey
	oRetry
	oTimeout
	oQueue
	oPriority
	oWaits
	oOver
	oNil
	numOpts
)

// Behaviors: bits 3-4 of the behavior byte pick a mode, bits 0-2 its
// argument.
const (
	bEmit  = 0 << 3 // emit event arg
	bFlaky = 1 << 3 // fail the first arg%3 attempts, then emit
	bWait  = 2 << 3 // wait (event steps), else emit
	bOdd   = 3 << 3 // arg: panic, undeclared event, always fail, permanent failure, read a missing output
)

var (
	fzNames   = []string{"a", "b", "c", "d", "e", "f", "", "done", "input", "9x", "A.b-c_d", "ok"}
	fzEvents  = []string{"ok", "yes", "no", "", "failed", "timeout", "zzz", "Bad Event"}
	fzKeys    = []string{"a", "k", "", "input", "Bad Key", "b"}
	fzDurs    = []time.Duration{0, -time.Second, time.Millisecond, time.Second, time.Hour, -1}
	fzQueues  = []string{"default", "q", "", "bad queue"}
	fzFields  = []string{"", "items", "name", "nope"}
	fzBKeys   = []string{"", "orderid", "Order", "a b"}
	fzScopes  = []flow.KeyScope{"", flow.ScopeActive, flow.ScopeForever, flow.ScopeNone, "weird"}
	fzTags    = []string{"t", "u", "", " ", "t"}
	fzMetaKey = []string{"k", "", "other"}
	fzMetaVal = []any{1, "s", nil, []any{1, "x"}, func() {}, make(chan int), math.NaN(), map[string]any{"n": true}}
	fzInputs  = []string{`[1,2,3]`, `[]`, `[{"items":[1]}]`, `{"items":[1,2]}`, `null`, `[1]`}
)

type fzStruct struct {
	Items []int  `json:"items"`
	Name  string `json:"name"`
}

type fzReader struct {
	data []byte
	i    int
}

func (r *fzReader) more() bool { return r.i < len(r.data) }

func (r *fzReader) byte() byte {
	if r.i >= len(r.data) {
		return 0
	}
	b := r.data[r.i]
	r.i++
	return b
}

func (r *fzReader) n(n int) int { return int(r.byte()) % n }

func pick[T any](r *fzReader, s []T) T { return s[r.n(len(s))] }

// fzRuntime is shared by the step functions of one fuzzed flow: it counts
// invocations and cancels the run after maxCalls, so that the test stays
// bounded without a clock.
type fzRuntime struct {
	calls  int
	cancel context.CancelFunc
}

const maxCalls = 10_000

// act runs a step's behavior: it returns the event to emit, or wait, or an
// error.
func (rt *fzRuntime) act(ctx context.Context, beh byte, evs []string) (string, bool, error) {
	rt.calls++
	if rt.calls >= maxCalls {
		rt.cancel()
	}
	info, _ := flow.CallInfo(ctx)
	arg := int(beh & 7)
	event := evs[arg%len(evs)]
	switch beh & (3 << 3) {
	case bFlaky:
		if info.Attempt <= arg%3 {
			return "", false, fmt.Errorf("transient failure %d", info.Attempt)
		}
	case bWait:
		return "", true, nil
	case bOdd:
		switch arg {
		case 0:
			panic("fuzzed step panics")
		case 1:
			return "undeclared-event", false, nil
		case 2:
			return "", false, errors.New("always fails")
		case 3:
			return "", false, flow.NonRetryable(errors.New("permanent failure"))
		case 4:
			_, err := flow.Output[any](ctx, "missing-key")
			return "", false, err
		}
	}
	return event, false, nil
}

type fzStep struct {
	name string
	kind int
	typ  int
	beh  byte
	evs  []string
	opts []flow.StepOption
}

// fzDecoder reads a flow from the fuzz input. Bytes below 0xC0 that name
// a step refer to one declared so far, and those naming an event to one
// the step may emit, so that most inputs make flows that can be valid;
// the other bytes pick arbitrary (often invalid) names.
type fzDecoder struct {
	r     *fzReader
	steps []*fzStep
}

var fzValid = []string{"a", "b", "c", "d", "e", "f"}

// newName names a new step.
func (d *fzDecoder) newName() string {
	b := d.r.byte()
	if b < 0xC0 {
		return fzValid[int(b)%len(fzValid)]
	}
	return fzNames[int(b)%len(fzNames)]
}

// ref names an existing step, usually.
func (d *fzDecoder) ref(b byte) string {
	if b < 0xC0 && len(d.steps) > 0 {
		return d.steps[int(b)%len(d.steps)].name
	}
	return fzNames[int(b)%len(fzNames)]
}

// event names an event of the step from, usually.
func (d *fzDecoder) event(from string, b byte) string {
	if b < 0xC0 {
		for _, s := range d.steps {
			if s.name == from {
				evs := append(append([]string(nil), s.evs...), flow.EventTimeout, flow.EventFailed)
				return evs[int(b)%len(evs)]
			}
		}
	}
	return fzEvents[int(b)%len(fzEvents)]
}

// decodeFlow turns the fuzz input into a builder and the run input.
func decodeFlow(data []byte, rt *fzRuntime) (*flow.Builder, json.RawMessage) {
	d := &fzDecoder{r: &fzReader{data: data}}
	r := d.r
	b := flow.New("fuzz")
	input := json.RawMessage(`[1,2,3]`)
	for ops := 0; r.more() && ops < 64; ops++ {
		switch r.n(numOps) {
		case opStep:
			s := &fzStep{name: d.newName(), kind: r.n(numKinds), typ: r.n(4), beh: r.byte(), evs: []string{flow.EventOK}}
			for range r.n(4) {
				o, explicit := d.option()
				if explicit != nil {
					s.evs = explicit
				}
				s.opts = append(s.opts, o)
			}
			addStep(b, s, rt)
			d.steps = append(d.steps, s)
		case opEdge:
			from := d.ref(r.byte())
			event := d.event(from, r.byte())
			var to []string
			for range r.n(4) {
				if r.n(4) == 0 {
					to = append(to, flow.Done)
				} else {
					to = append(to, d.ref(r.byte()))
				}
			}
			b.Edge(from, event, to...)
		case opStart:
			b.Start(d.ref(r.byte()))
		case opDefaults:
			o, _ := d.option()
			b.Defaults(o)
		case opVersion:
			b.Version(int(int8(r.byte())))
		case opKey:
			b.BusinessKey(pick(r, fzBKeys), pick(r, fzScopes))
		case opTag:
			b.Tags(pick(r, fzTags))
		case opMeta:
			b.Metadata(map[string]any{pick(r, fzMetaKey): pick(r, fzMetaVal)})
		case opInput:
			switch r.n(3) {
			case 0:
				flow.Input[[]int](b)
			case 1:
				flow.Input[fzStruct](b)
			case 2:
				flow.Input[any](b)
			}
		case opInputDoc:
			input = json.RawMessage(pick(r, fzInputs))
		}
	}
	return b, input
}

// option returns an option and, for Events, the declared events.
func (d *fzDecoder) option() (flow.StepOption, []string) {
	r := d.r
	kind, x, y := r.n(numOpts), r.byte(), r.byte()
	switch kind {
	case oDependsOn:
		names := []string{d.ref(x)}
		if y&1 == 1 {
			names = append(names, d.ref(y>>1))
		}
		return flow.DependsOn(names...), nil
	case oEvents:
		var evs []string
		for i := range int(y) % 4 {
			evs = append(evs, fzEvents[(int(x)+i)%len(fzEvents)])
		}
		if len(evs) == 0 {
			return flow.Events(), []string{flow.EventOK}
		}
		return flow.Events(evs...), evs
	case oKey:
		return flow.Key(fzKeys[int(x)%len(fzKeys)]), nil
	case oRetry:
		mults := []float64{0, 0.5, 1, 2, math.NaN(), math.Inf(1)}
		jitters := []float64{0, -1, 0.5, 2, math.NaN()}
		return flow.Retry(flow.RetryPolicy{
			MaxAttempts:    []int{0, 1, 3, -1, 1 << 20}[int(x)%5],
			InitialBackoff: fzDurs[int(x>>3)%len(fzDurs)],
			MaxBackoff:     fzDurs[int(y)%len(fzDurs)],
			Multiplier:     mults[int(y>>3)%len(mults)],
			Jitter:         jitters[int(x>>5)%len(jitters)],
		}), nil
	case oTimeout:
		return flow.Timeout(fzDurs[int(x)%len(fzDurs)]), nil
	case oQueue:
		return flow.Queue(fzQueues[int(x)%len(fzQueues)]), nil
	case oPriority:
		return flow.Priority(int(int8(x))), nil
	case oWaits:
		return flow.Waits(fzDurs[int(x)%len(fzDurs)]), nil
	case oOver:
		step := ""
		if x&1 == 1 {
			step = d.ref(x >> 1)
		}
		return flow.Over(step, fzFields[int(y)%len(fzFields)]), nil
	}
	return nil, nil
}

func addStep(b *flow.Builder, s *fzStep, rt *fzRuntime) {
	switch s.typ {
	case 0:
		addTyped[any, any](b, s, rt, func(ev string) any {
			switch ev {
			case "yes":
				return []int{1, 2}
			case "no":
				return map[string]any{"items": []int{3}, "name": "n"}
			}
			return "s"
		})
	case 1:
		addTyped[any, []int](b, s, rt, func(string) []int { return []int{1, 2, 3} })
	case 2:
		addTyped[any, fzStruct](b, s, rt, func(string) fzStruct { return fzStruct{Items: []int{1}, Name: "x"} })
	case 3:
		addTyped[fzStruct, string](b, s, rt, func(string) string { return "out" })
	}
}

func addTyped[In, Out any](b *flow.Builder, s *fzStep, rt *fzRuntime, out func(event string) Out) {
	switch s.kind {
	case kTask:
		flow.Step(b, s.name, func(ctx context.Context, in In) (Out, error) {
			ev, _, err := rt.act(ctx, s.beh, s.evs)
			return out(ev), err
		}, s.opts...)
	case kEvent:
		flow.EventStep(b, s.name, func(ctx context.Context, in In) (flow.Result[Out], error) {
			ev, wait, err := rt.act(ctx, s.beh, s.evs)
			if err != nil {
				return flow.Result[Out]{}, err
			}
			if wait {
				return flow.Wait[Out](), nil
			}
			return flow.Emit(ev, out(ev)), nil
		}, s.opts...)
	case kMap:
		flow.Map(b, s.name, func(ctx context.Context, item In) (Out, error) {
			ev, _, err := rt.act(ctx, s.beh, s.evs)
			return out(ev), err
		}, s.opts...)
	}
}

// Seed specs: a few byte programs in the format above.
func fzSeeds() [][]byte {
	// Steps are named by their index in fzValid and referred to by their
	// index in declaration order; events by their index in the step's
	// events followed by "timeout" and "failed".
	step := func(name, kind, typ int, beh byte, opts ...[3]byte) []byte {
		out := []byte{opStep, byte(name), byte(kind), byte(typ), beh, byte(len(opts))}
		for _, o := range opts {
			out = append(out, o[:]...)
		}
		return out
	}
	edge := func(from, event int, to ...int) []byte {
		out := []byte{opEdge, byte(from), byte(event), byte(len(to))}
		for _, t := range to {
			if t < 0 { // Done
				out = append(out, 0)
			} else {
				out = append(out, 1, byte(t))
			}
		}
		return out
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	const a, b, c, d = 0, 1, 2, 3
	const evYes = 1 // index of "yes" in fzEvents, for the Events option
	// Edge events: indices into the step's events, then timeout, failed.
	const ok, yes, no = 0, 0, 1
	const timeout, failed = 1, 2 // of a step that emits ok only
	dep := func(n int) [3]byte { return [3]byte{oDependsOn, byte(n), 0} }
	return [][]byte{
		// PgFlow style chain with a map over the output of a step.
		cat(step(a, kTask, 1, bEmit), step(b, kMap, 0, bEmit, dep(a)), step(c, kTask, 0, bFlaky|2, dep(b))),
		// Hephaestus style: events, fan-out and join, Done.
		cat(step(a, kEvent, 0, bEmit|1, [3]byte{oEvents, evYes, 2}), step(b, kTask, 0, bEmit), step(c, kTask, 0, bEmit), step(d, kTask, 0, bEmit),
			[]byte{opStart, a}, edge(a, yes, b, c), edge(a, no, -1), edge(b, ok, d), edge(c, ok, d), edge(d, ok, -1)),
		// A waiting step with a timeout and a failure route.
		cat(step(a, kEvent, 0, bWait, [3]byte{oWaits, 3, 0}), step(b, kTask, 0, bOdd|2, [3]byte{oRetry, 1, 0}), step(c, kTask, 0, bEmit),
			edge(a, ok, b), edge(a, timeout, -1), edge(b, ok, -1), edge(b, failed, c), edge(c, ok, -1)),
		// A map over the run input, failing for good.
		cat(step(a, kMap, 1, bOdd|3), []byte{opInput, 0, opInputDoc, 0}),
		// A huge retry budget that the invocation bound cuts short.
		cat(step(a, kTask, 0, bOdd|2, [3]byte{oRetry, 4, 0})),
		// A cycle, a duplicate and an unknown dependency.
		cat(step(a, kTask, 0, 0, dep(b)), step(b, kTask, 0, 0, dep(a)), step(b, kTask, 0, 0, dep(9))),
		// Flow options: version, key, tags, metadata, defaults.
		cat([]byte{opVersion, 2, opKey, 1, 3, opTag, 0, opTag, 1, opMeta, 0, 3, opDefaults, oTimeout, 3, 0}, step(a, kTask, 0, 0)),
		// Panicking and undeclared events.
		cat(step(a, kTask, 0, bOdd), step(b, kEvent, 0, bOdd|1), step(c, kTask, 0, bOdd|4)),
		{},
	}
}

// TestFuzzSeeds keeps the seeds meaningful: the valid ones build and run
// as intended, the broken one does not build.
func TestFuzzSeeds(t *testing.T) {
	want := []struct {
		builds bool
		status hephtype.RunStatus
	}{
		{true, hephtype.StatusCompleted},
		{true, hephtype.StatusCompleted},
		{true, hephtype.StatusWaiting},
		{true, hephtype.StatusFailed},
		{true, hephtype.StatusRunning}, // cut short by the invocation bound
		{false, ""},
		{true, hephtype.StatusCompleted},
		{true, hephtype.StatusFailed},
		{false, ""},
	}
	for i, seed := range fzSeeds() {
		ctx, cancel := context.WithCancel(context.Background())
		b, input := decodeFlow(seed, &fzRuntime{cancel: cancel})
		fl, err := b.Build()
		if (err == nil) != want[i].builds {
			t.Errorf("seed %d: Build error %v, want success %v", i, err, want[i].builds)
		}
		if err == nil {
			run, _ := hephtest.RunFlow(ctx, fl, input)
			if run.Status() != want[i].status {
				t.Errorf("seed %d: status %s (%s), want %s", i, run.Status(), run.Err(), want[i].status)
			}
		}
		cancel()
	}
}

func FuzzBuild(f *testing.F) {
	for _, s := range fzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rt := &fzRuntime{cancel: cancel}
		b, input := decodeFlow(data, rt)
		fl, err := b.Build()
		if err != nil {
			checkBuildError(t, err)
			return
		}
		// A second decoding of the same input is the same definition.
		b2, _ := decodeFlow(data, &fzRuntime{cancel: cancel})
		if fl2, err := b2.Build(); err != nil || fl2.Shape() != fl.Shape() {
			t.Fatalf("the same definition built twice: %v, shapes %s / %v", err, fl.Shape(), fl2)
		}
		checkRender(t, fl)
		checkSpec(t, fl)
		runFuzzed(t, ctx, fl, input)
	})
}

func checkBuildError(t *testing.T, err error) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	if len(errs) == 0 {
		t.Fatal("Build returned an empty joined error")
	}
	for _, e := range errs {
		ve, ok := e.(*flow.ValidationError)
		if !ok {
			t.Fatalf("Build returned a %T, not a *ValidationError: %v", e, e)
		}
		if ve.Rule == "" || ve.Message == "" || ve.Flow != "fuzz" {
			t.Fatalf("incomplete validation error %+v", ve)
		}
	}
}

func checkRender(t *testing.T, fl *flow.Flow) {
	t.Helper()
	mmd, dot := fl.Mermaid(), fl.DOT()
	for _, s := range fl.Steps() {
		if !strings.Contains(mmd, `"`+s.Name) || !strings.Contains(dot, `"`+s.Name+`"`) {
			t.Fatalf("step %q missing from a rendering:\n%s\n%s", s.Name, mmd, dot)
		}
	}
}

// runFuzzed drives a run to its end, resuming waiting steps and firing
// their timers, and checks the final state.
func runFuzzed(t *testing.T, ctx context.Context, fl *flow.Flow, input json.RawMessage) {
	t.Helper()
	run, err := hephtest.RunFlow(ctx, fl, input)
	for round := 0; err == nil && run.Status() == hephtype.StatusWaiting && round < 100; round++ {
		resumed := false
		for i, s := range fl.Steps() {
			st, _ := run.Step(s.Name)
			if st.Status != hephtype.StepWaiting {
				continue
			}
			if run.TimerArmed(s.Name) && (round+i)%2 == 0 {
				err = run.FireTimer(ctx, s.Name)
			} else {
				err = run.Resume(ctx, s.Name, s.Events[(round+i)%len(s.Events)], map[string]any{"items": []int{round}})
			}
			resumed = true
			break
		}
		if !resumed {
			t.Fatalf("run is waiting but no step is")
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return // the invocation bound was hit
		}
		t.Fatalf("run: %v\nhistory: %v", err, run.History())
	}
	switch run.Status() {
	case hephtype.StatusCompleted:
		var out map[string]json.RawMessage
		if err := json.Unmarshal(run.Output(), &out); err != nil {
			t.Fatalf("output %s is not a JSON object: %v", run.Output(), err)
		}
		for _, s := range fl.Steps() {
			st, _ := run.Step(s.Name)
			switch st.Status {
			case hephtype.StepCompleted, hephtype.StepSkipped:
			default:
				t.Fatalf("run completed but step %q is %s\nhistory: %v", s.Name, st.Status, run.History())
			}
		}
	case hephtype.StatusFailed:
		if run.Err() == "" {
			t.Fatal("failed run without an error")
		}
	case hephtype.StatusWaiting:
		// Resumed 100 times and still waiting: only possible with many
		// waiting steps in sequence, which the fuzz input cannot make.
		t.Fatalf("run still waiting after 100 resumes\nhistory: %v", run.History())
	default:
		t.Fatalf("run ended %s", run.Status())
	}
}
