package engine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// ---- building graphs by hand ----

type stepOpt func(*engine.Step, *graphBuilder)

// events declares the step's events (default: "ok").
func events(ev ...string) stepOpt {
	return func(s *engine.Step, _ *graphBuilder) { s.Events = ev }
}

func attempts(n int) stepOpt { return func(s *engine.Step, _ *graphBuilder) { s.MaxAttempts = n } }

func waitTimeout(d time.Duration) stepOpt {
	return func(s *engine.Step, _ *graphBuilder) { s.WaitTimeout = d }
}

func key(k string) stepOpt { return func(s *engine.Step, _ *graphBuilder) { s.Key = k } }

// mapOver makes a map step over the named step's output ("" for the run
// input), optionally over one field of it.
func mapOver(src, field string) stepOpt {
	return func(s *engine.Step, b *graphBuilder) {
		s.Map = true
		s.MapField = field
		s.MapSource = engine.InputSource
		if src != "" {
			b.mapSrc[s.Name] = src
		}
	}
}

// reads declares the steps whose outputs the step reads.
func reads(steps ...string) stepOpt {
	return func(s *engine.Step, b *graphBuilder) {
		s.ReadsDeclared = true
		b.reads[s.Name] = steps
	}
}

type graphBuilder struct {
	t      testing.TB
	g      engine.Graph
	mapSrc map[string]string
	reads  map[string][]string
	roots  []string
}

func newGraph(t testing.TB) *graphBuilder {
	return &graphBuilder{t: t, mapSrc: map[string]string{}, reads: map[string][]string{}}
}

func (b *graphBuilder) step(name string, opts ...stepOpt) *graphBuilder {
	s := engine.Step{Name: name, Key: name, Events: []string{engine.EventOK}, MapSource: engine.InputSource}
	for _, o := range opts {
		o(&s, b)
	}
	b.g.Steps = append(b.g.Steps, s)
	return b
}

func (b *graphBuilder) index(name string) int {
	b.t.Helper()
	if name == "done" {
		return engine.Done
	}
	for i := range b.g.Steps {
		if b.g.Steps[i].Name == name {
			return i
		}
	}
	b.t.Fatalf("graph: no step %q", name)
	return 0
}

// edge routes from's event to the targets ("done" is engine.Done).
func (b *graphBuilder) edge(from, event string, to ...string) *graphBuilder {
	b.t.Helper()
	s := &b.g.Steps[b.index(from)]
	k := slices.IndexFunc(s.Out, func(es engine.EdgeSet) bool { return es.Event == event })
	if k < 0 {
		s.Out = append(s.Out, engine.EdgeSet{Event: event})
		k = len(s.Out) - 1
	}
	for _, t := range to {
		s.Out[k].To = append(s.Out[k].To, b.index(t))
	}
	return b
}

func (b *graphBuilder) build() *engine.Graph {
	b.t.Helper()
	g := b.g
	for name, src := range b.mapSrc {
		g.Steps[b.index(name)].MapSource = b.index(src)
	}
	for name, steps := range b.reads {
		for _, r := range steps {
			g.Steps[b.index(name)].Reads = append(g.Steps[b.index(name)].Reads, b.index(r))
		}
	}
	if b.roots != nil {
		for _, r := range b.roots {
			g.Roots = append(g.Roots, b.index(r))
		}
	} else {
		hasIn := make([]bool, len(g.Steps))
		for _, s := range g.Steps {
			for _, es := range s.Out {
				for _, t := range es.To {
					if t != engine.Done {
						hasIn[t] = true
					}
				}
			}
		}
		for i := range g.Steps {
			if !hasIn[i] {
				g.Roots = append(g.Roots, i)
			}
		}
	}
	g.Finish()
	return &g
}

// ---- driving a run step by step ----

// runT holds a run's current state and checks, on every Apply, that Apply
// left the state it was given untouched.
type runT struct {
	t testing.TB
	g *engine.Graph
	s *engine.State
}

func startRun(t testing.TB, g *engine.Graph, input string) (*runT, *engine.Decision) {
	t.Helper()
	var in json.RawMessage
	if input != "" {
		in = json.RawMessage(input)
	}
	d := engine.Start(g, in)
	if d == nil || d.State == nil {
		t.Fatal("Start returned no state")
	}
	return &runT{t: t, g: g, s: d.State}, d
}

func snapshot(t testing.TB, s *engine.State) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("state does not encode: %v", err)
	}
	return string(b)
}

// apply applies ev and fails the test if the engine refuses it.
func (r *runT) apply(ev engine.Event) *engine.Decision {
	r.t.Helper()
	before := snapshot(r.t, r.s)
	d, err := engine.Apply(r.g, r.s, ev)
	if after := snapshot(r.t, r.s); after != before {
		r.t.Fatalf("Apply(%#v) modified its input state:\nbefore %s\nafter  %s", ev, before, after)
	}
	if err != nil {
		r.t.Fatalf("Apply(%#v): %v", ev, err)
	}
	if d == nil || d.State == nil {
		r.t.Fatalf("Apply(%#v) returned no state", ev)
	}
	r.s = d.State
	return d
}

// refuse applies ev, expects an error matching target (errors.Is) and checks
// that the state did not change. It returns the error.
func (r *runT) refuse(ev engine.Event, target error) {
	_ = r.refuseErr(ev, target)
}

// refuseErr is refuse that returns the error, for tests of its message.
func (r *runT) refuseErr(ev engine.Event, target error) error {
	r.t.Helper()
	before := snapshot(r.t, r.s)
	d, err := engine.Apply(r.g, r.s, ev)
	if after := snapshot(r.t, r.s); after != before {
		r.t.Fatalf("refused Apply(%#v) modified the state:\nbefore %s\nafter  %s", ev, before, after)
	}
	if !errors.Is(err, target) {
		r.t.Fatalf("Apply(%#v) = %v, %v; want error %v", ev, d, err, target)
	}
	if d != nil {
		r.t.Fatalf("refused Apply(%#v) returned a decision %+v", ev, d)
	}
	return err
}

func (r *runT) step(name string) engine.StepState {
	r.t.Helper()
	i, ok := r.g.Lookup(name)
	if !ok {
		r.t.Fatalf("no step %q", name)
	}
	return r.s.Steps[i]
}

// ---- rendering decisions for exact comparison ----

func showCommand(c engine.Command) string {
	switch c := c.(type) {
	case engine.ScheduleStep:
		var b strings.Builder
		b.WriteString("schedule " + c.Step)
		if c.Index >= 0 {
			fmt.Fprintf(&b, "[%d]", c.Index)
		} else if c.Index != -1 {
			fmt.Fprintf(&b, "[BAD INDEX %d]", c.Index)
		}
		fmt.Fprintf(&b, " #%d", c.Attempt)
		if c.Retry {
			b.WriteString(" retry")
		}
		b.WriteString(" in=" + string(c.Input))
		if c.Item != nil || c.Index >= 0 {
			b.WriteString(" item=" + string(c.Item))
		}
		return b.String()
	case engine.StartTimer:
		return "start-timer " + c.Step + " " + c.After.String()
	case engine.CancelTimer:
		return "cancel-timer " + c.Step
	case engine.CancelStep:
		if c.Index >= 0 {
			return fmt.Sprintf("cancel %s[%d]", c.Step, c.Index)
		}
		if c.Index != -1 {
			return fmt.Sprintf("cancel %s[BAD INDEX %d]", c.Step, c.Index)
		}
		return "cancel " + c.Step
	case engine.CompleteRun:
		return "complete-run " + string(c.Output)
	case engine.FailRun:
		return "fail-run " + c.Error
	case engine.CancelRun:
		return "cancel-run " + c.Reason
	}
	return fmt.Sprintf("unknown command %T", c)
}

func showCommands(cs []engine.Command) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, showCommand(c))
	}
	return out
}

func showHistory(hs []engine.History) []string {
	out := []string{}
	for _, h := range hs {
		parts := []string{string(h.Kind)}
		if h.Step != "" {
			parts = append(parts, h.Step)
		}
		if h.Index != 0 {
			parts = append(parts, fmt.Sprintf("i=%d", h.Index))
		}
		if h.Attempt != 0 {
			parts = append(parts, fmt.Sprintf("a=%d", h.Attempt))
		}
		if h.Event != "" {
			parts = append(parts, "ev="+h.Event)
		}
		if h.Data != nil {
			parts = append(parts, "data="+string(h.Data))
		}
		if h.Error != "" {
			parts = append(parts, "err="+h.Error)
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func sameLines(t testing.TB, what string, got, want []string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\ngot:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// expect checks a decision's commands and history exactly.
func expect(t testing.TB, d *engine.Decision, cmds, hist []string) {
	t.Helper()
	sameLines(t, "commands", showCommands(d.Commands), cmds)
	sameLines(t, "history", showHistory(d.History), hist)
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if err := json.Unmarshal(orNull(a), &x); err != nil {
		return false
	}
	if err := json.Unmarshal(orNull(b), &y); err != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// showEvent renders an event with its JSON as text, for logs.
func showEvent(ev engine.Event) string {
	switch ev := ev.(type) {
	case engine.StepCompleted:
		return fmt.Sprintf("StepCompleted %s #%d event=%q output=%s", ev.Step, ev.Attempt, ev.Event, ev.Output)
	case engine.StepWaiting:
		return fmt.Sprintf("StepWaiting %s #%d", ev.Step, ev.Attempt)
	case engine.StepFailed:
		return fmt.Sprintf("StepFailed %s #%d %q retryable=%v", ev.Step, ev.Attempt, ev.Error, ev.Retryable)
	case engine.ItemCompleted:
		return fmt.Sprintf("ItemCompleted %s[%d] #%d output=%s", ev.Step, ev.Index, ev.Attempt, ev.Output)
	case engine.ItemFailed:
		return fmt.Sprintf("ItemFailed %s[%d] #%d %q retryable=%v", ev.Step, ev.Index, ev.Attempt, ev.Error, ev.Retryable)
	case engine.Resume:
		return fmt.Sprintf("Resume %s event=%q payload=%s", ev.Step, ev.Event, ev.Payload)
	case engine.TimerFired:
		return "TimerFired " + ev.Step
	case engine.Cancel:
		return fmt.Sprintf("Cancel %q", ev.Reason)
	case engine.StepSnoozed:
		return fmt.Sprintf("StepSnoozed %s[%d] #%d after %s", ev.Step, ev.Index, ev.Attempt, ev.After)
	case engine.StepCancelled:
		return fmt.Sprintf("StepCancelled %s[%d] #%d %q", ev.Step, ev.Index, ev.Attempt, ev.Reason)
	case nil:
		return "Start"
	}
	return fmt.Sprintf("%#v", ev)
}
