package engine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// The property test generates random valid DAGs directly as engine.Graph,
// random step behaviours and random delivery orders, drives the engine to a
// terminal state and checks the DAG semantics of design section 3 against a
// model kept by the test. The model learns what happened from the history
// the engine writes, and checks that history against what the test itself
// delivered; the scheduling, skipping, input and output rules are then
// computed by the test from the graph, never read from the engine's state.

// maxIterations bounds a run: far above what the generator can need
// (12 steps, 4 map elements, 3 attempts each, plus stale replays).
const maxIterations = 5000

type pred struct {
	from  int
	event string
}

type taskKey struct {
	step  string
	index int
}

type propRun struct {
	t *rapid.T
	g *engine.Graph

	preds      [][]pred   // incoming edges, computed from Out by the test
	codeEvents [][]string // events step code emits (no built-ins)
	waits      []bool
	failPct    int
	snoozePct  int
	input      json.RawMessage

	s *engine.State

	// The model.
	status   []hephtype.StepStatus
	event    []string
	output   []json.RawMessage
	mapItems [][]json.RawMessage // elements of each expanded map step
	itemOut  [][]json.RawMessage // what the test reported for each element
	itemDone [][]bool
	terminal hephtype.RunStatus // "" while the run is active
	failedBy int                // step named by run_failed

	// The driver.
	outstanding   []engine.ScheduleStep
	timers        map[int]bool
	everScheduled map[taskKey]bool
	lastAttempt   map[taskKey]int
	delivered     []engine.Event
	lastOut       map[taskKey]json.RawMessage // output just reported, to compare with history
	resumePayload json.RawMessage
	stats         *propStats
}

type propStats struct {
	cases, completed, failed, cancelled, skipped, maps, waits, retries, stale, scheduled, snoozes, selfCancels int
}

func TestPropertyDAG(t *testing.T) {
	st := &propStats{}
	start := time.Now()
	rapid.Check(t, func(t *rapid.T) { runProperty(t, st) })
	t.Logf("%d cases in %v: %d completed, %d failed, %d cancelled; %d steps scheduled, %d skipped, %d map expansions, %d waits, %d retries, %d snoozes, %d cancelled from inside, %d stale reports refused",
		st.cases, time.Since(start).Round(time.Millisecond), st.completed, st.failed, st.cancelled, st.scheduled, st.skipped, st.maps, st.waits, st.retries, st.snoozes, st.selfCancels, st.stale)
	if !t.Failed() && st.cases >= 100 && (st.completed == 0 || st.failed == 0 || st.skipped == 0 || st.maps == 0 || st.waits == 0 || st.retries == 0 || st.snoozes == 0 || st.selfCancels == 0) {
		t.Errorf("the generator did not cover every feature: %+v", *st)
	}
}

var eventPool = []string{"ok", "yes", "no", "alt"}

// genGraph draws a random valid DAG: steps in topological order, edges only
// from a step's events to later steps or Done, every declared event routed,
// roots = the steps without incoming edges (so every step is reachable).
func genGraph(t *rapid.T) (g *engine.Graph, codeEvents [][]string, waits []bool) {
	n := rapid.IntRange(1, 12).Draw(t, "steps")
	g = &engine.Graph{Steps: make([]engine.Step, n)}
	codeEvents = make([][]string, n)
	waits = make([]bool, n)
	for i := range n {
		s := engine.Step{
			Name:        fmt.Sprintf("s%d", i),
			Key:         fmt.Sprintf("k%d", i),
			MaxAttempts: rapid.IntRange(0, 3).Draw(t, "maxAttempts"),
			MapSource:   engine.InputSource,
		}
		s.Map = rapid.IntRange(0, 3).Draw(t, "isMap") == 0
		if s.Map {
			codeEvents[i] = []string{engine.EventOK}
		} else {
			codeEvents[i] = rapid.SliceOfNDistinct(rapid.SampledFrom(eventPool), 1, 3, rapid.ID[string]).Draw(t, "events")
			waits[i] = rapid.IntRange(0, 3).Draw(t, "waits") == 0
			if waits[i] && rapid.Bool().Draw(t, "timeout") {
				s.WaitTimeout = time.Duration(rapid.IntRange(1, 3600).Draw(t, "seconds")) * time.Second
			}
		}
		s.Events = slices.Clone(codeEvents[i])
		if s.WaitTimeout > 0 {
			s.Events = append(s.Events, engine.EventTimeout)
		}
		if rapid.IntRange(0, 4).Draw(t, "routesFailed") == 0 {
			s.Events = append(s.Events, engine.EventFailed)
		}
		cands := []int{engine.Done}
		for j := i + 1; j < n; j++ {
			cands = append(cands, j)
		}
		for _, ev := range s.Events {
			to := rapid.SliceOfNDistinct(rapid.SampledFrom(cands), 1, min(3, len(cands)), rapid.ID[int]).Draw(t, "targets")
			s.Out = append(s.Out, engine.EdgeSet{Event: ev, To: to})
		}
		g.Steps[i] = s
	}
	preds := predecessors(g)
	for j := range g.Steps {
		if len(preds[j]) == 0 {
			g.Roots = append(g.Roots, j)
		}
		if !g.Steps[j].Map || len(preds[j]) == 0 {
			continue
		}
		// Over the input, or over any step that leads to it (an ancestor).
		from := ancestorsOf(preds, j)
		k := rapid.IntRange(0, len(from)).Draw(t, "mapSource")
		if k < len(from) {
			src := from[k]
			g.Steps[j].MapSource = src
			if !g.Steps[src].Map {
				g.Steps[j].MapField = "items"
			}
		}
	}
	// Some steps declare what they read: any subset of their ancestors.
	for j := range g.Steps {
		if rapid.IntRange(0, 3).Draw(t, "declaresReads") != 0 {
			continue
		}
		anc := ancestorsOf(preds, j)
		g.Steps[j].ReadsDeclared = true
		for _, a := range anc {
			if rapid.Bool().Draw(t, "reads") {
				g.Steps[j].Reads = append(g.Steps[j].Reads, a)
			}
		}
	}
	g.Finish()
	for j := range g.Steps {
		for a := range g.Steps {
			if want := slices.Contains(ancestorsOf(preds, j), a); g.IsAncestor(a, j) != want {
				t.Fatalf("IsAncestor(%d, %d) = %v, want %v", a, j, !want, want)
			}
		}
	}
	return g, codeEvents, waits
}

func predecessors(g *engine.Graph) [][]pred {
	preds := make([][]pred, len(g.Steps))
	for from, s := range g.Steps {
		for _, es := range s.Out {
			for _, to := range es.To {
				if to != engine.Done {
					preds[to] = append(preds[to], pred{from, es.Event})
				}
			}
		}
	}
	return preds
}

func runProperty(t *rapid.T, stats *propStats) {
	g, codeEvents, waits := genGraph(t)
	t.Logf("graph: %v", lazy(func() string { return describe(g) }))
	items := rapid.SliceOfN(rapid.IntRange(0, 99), 0, 4).Draw(t, "input")
	input, _ := json.Marshal(items)
	r := &propRun{
		t: t, g: g, preds: predecessors(g), codeEvents: codeEvents, waits: waits,
		failPct:   rapid.SampledFrom([]int{0, 0, 0, 5, 10, 25}).Draw(t, "failPct"),
		snoozePct: rapid.SampledFrom([]int{0, 0, 10, 30}).Draw(t, "snoozePct"),
		input:     input,
		status:    make([]hephtype.StepStatus, len(g.Steps)), event: make([]string, len(g.Steps)),
		output: make([]json.RawMessage, len(g.Steps)), mapItems: make([][]json.RawMessage, len(g.Steps)),
		itemOut: make([][]json.RawMessage, len(g.Steps)), itemDone: make([][]bool, len(g.Steps)),
		failedBy: -1, timers: map[int]bool{}, everScheduled: map[taskKey]bool{}, lastAttempt: map[taskKey]int{},
		lastOut: map[taskKey]json.RawMessage{}, stats: stats,
	}
	for i := range r.status {
		r.status[i] = hephtype.StepPending
	}
	cancelAt := -1
	if rapid.IntRange(0, 7).Draw(t, "cancel") == 0 {
		cancelAt = rapid.IntRange(0, 20).Draw(t, "cancelAt")
	}

	d := engine.Start(g, input)
	r.s = d.State
	r.process(nil, d)

	for it := 0; r.terminal == ""; it++ {
		if it > maxIterations {
			t.Fatalf("the run did not end after %d events (status %s)", maxIterations, r.s.Status)
		}
		waiting := r.waitingSteps()
		if len(r.outstanding) == 0 && len(waiting) == 0 {
			t.Fatalf("run is %s with nothing scheduled or waiting", r.s.Status)
		}
		switch {
		case it == cancelAt:
			r.cancel()
		case len(r.delivered) > 0 && rapid.IntRange(0, 9).Draw(t, "replay") == 0:
			r.replay(rapid.IntRange(0, len(r.delivered)-1).Draw(t, "which"))
		case len(waiting) > 0 && (len(r.outstanding) == 0 || rapid.IntRange(0, 5).Draw(t, "resumeEarly") == 0):
			r.wakeUp(waiting[rapid.IntRange(0, len(waiting)-1).Draw(t, "waiting")])
		default:
			k := rapid.IntRange(0, len(r.outstanding)-1).Draw(t, "task")
			c := r.outstanding[k]
			r.outstanding = slices.Delete(r.outstanding, k, k+1)
			r.work(c)
		}
	}
	r.finalChecks()
}

// apply applies ev to the current state, from a JSON round trip of it one
// time in four, and checks that Apply left the state it was given alone.
func (r *propRun) apply(ev engine.Event) (*engine.Decision, error) {
	s := r.s
	if rapid.IntRange(0, 3).Draw(r.t, "roundTrip") == 0 {
		enc, err := json.Marshal(s)
		if err != nil {
			r.t.Fatalf("state does not encode: %v", err)
		}
		var dec engine.State
		if err := json.Unmarshal(enc, &dec); err != nil {
			r.t.Fatalf("state does not decode: %v", err)
		}
		if again, _ := json.Marshal(&dec); string(again) != string(enc) {
			r.t.Fatalf("state changed in a JSON round trip:\n%s\n%s", enc, again)
		}
		s = &dec
	}
	before := copyState(s)
	d, err := engine.Apply(r.g, s, ev)
	r.t.Logf("%v", lazy(func() string {
		if err != nil {
			return fmt.Sprintf("%s -> %v", showEvent(ev), err)
		}
		return fmt.Sprintf("%s\n\t-> %s\n\t   %s", showEvent(ev), strings.Join(showCommands(d.Commands), "\n\t   "), strings.Join(showHistory(d.History), "\n\t   "))
	}))
	if !reflect.DeepEqual(s, before) {
		r.t.Fatalf("Apply(%#v) modified its input state", ev)
	}
	if err != nil && d != nil {
		r.t.Fatalf("Apply(%#v) returned both a decision and %v", ev, err)
	}
	return d, err
}

func (r *propRun) mustApply(ev engine.Event) {
	d, err := r.apply(ev)
	if err != nil {
		r.t.Fatalf("Apply(%#v): %v", ev, err)
	}
	r.delivered = append(r.delivered, ev)
	r.s = d.State
	r.process(ev, d)
}

// refused applies ev, expects it refused with target, and the run unchanged.
// (apply itself checks that the state it passed was left alone).
func (r *propRun) refused(ev engine.Event, target error) {
	d, err := r.apply(ev)
	if !errors.Is(err, target) {
		r.t.Fatalf("Apply(%#v) = %v, %v; want %v", ev, d, err, target)
	}
}

func (r *propRun) waitingSteps() []int {
	var w []int
	for i, st := range r.status {
		if st == hephtype.StepWaiting {
			w = append(w, i)
		}
	}
	return w
}

func (r *propRun) roll() int { return rapid.IntRange(0, 99).Draw(r.t, "roll") }

func (r *propRun) stepOutput(tag string, i, attempt int) json.RawMessage {
	m := map[string]any{"from": r.g.Steps[i].Name, tag: attempt}
	if rapid.IntRange(0, 9).Draw(r.t, "hasItems") > 0 {
		m["items"] = rapid.SliceOfN(rapid.IntRange(0, 9), 0, 3).Draw(r.t, "items")
	}
	b, _ := json.Marshal(m)
	return b
}

// work plays the code of one scheduled task and reports its outcome.
func (r *propRun) work(c engine.ScheduleStep) {
	i, ok := r.g.Lookup(c.Step)
	if !ok {
		r.t.Fatalf("scheduled unknown step %q", c.Step)
	}
	roll := r.roll()
	// A snooze runs the same attempt again later; a step may also cancel
	// its run from inside.
	switch s := r.roll(); {
	case s < r.snoozePct:
		r.stats.snoozes++
		r.mustApply(engine.StepSnoozed{Step: c.Step, Index: c.Index, Attempt: c.Attempt, After: time.Duration(1+s) * time.Second})
		return
	case s == 99 && rapid.IntRange(0, 3).Draw(r.t, "selfCancel") == 0:
		r.stats.selfCancels++
		r.mustApply(engine.StepCancelled{Step: c.Step, Index: c.Index, Attempt: c.Attempt, Reason: "from inside"})
		return
	}
	retryable, permanent, undeclared := r.failPct, r.failPct+r.failPct/4, r.failPct+r.failPct/4+r.failPct/8
	if c.Index >= 0 {
		switch {
		case roll < retryable:
			r.mustApply(engine.ItemFailed{Step: c.Step, Index: c.Index, Attempt: c.Attempt, Error: "flaky", Retryable: true})
		case roll < permanent:
			r.mustApply(engine.ItemFailed{Step: c.Step, Index: c.Index, Attempt: c.Attempt, Error: "broken"})
		default:
			out, _ := json.Marshal(map[string]any{"of": c.Step, "i": c.Index, "item": c.Item, "attempt": c.Attempt})
			r.lastOut[taskKey{c.Step, c.Index}] = out
			r.mustApply(engine.ItemCompleted{Step: c.Step, Index: c.Index, Attempt: c.Attempt, Output: out})
		}
		return
	}
	switch {
	case roll < retryable:
		r.mustApply(engine.StepFailed{Step: c.Step, Attempt: c.Attempt, Error: "flaky", Retryable: true})
	case roll < permanent:
		r.mustApply(engine.StepFailed{Step: c.Step, Attempt: c.Attempt, Error: "broken"})
	case roll < undeclared:
		r.mustApply(engine.StepCompleted{Step: c.Step, Attempt: c.Attempt, Event: "undeclared-event", Output: json.RawMessage(`1`)})
	case r.waits[i] && roll >= 50:
		r.stats.waits++
		r.mustApply(engine.StepWaiting{Step: c.Step, Attempt: c.Attempt})
	default:
		ev := rapid.SampledFrom(r.codeEvents[i]).Draw(r.t, "emit")
		if ev == engine.EventOK && rapid.Bool().Draw(r.t, "emptyEvent") {
			ev = ""
		}
		out := r.stepOutput("attempt", i, c.Attempt)
		r.lastOut[taskKey{c.Step, -1}] = out
		r.mustApply(engine.StepCompleted{Step: c.Step, Attempt: c.Attempt, Event: ev, Output: out})
	}
}

// wakeUp resumes a waiting step with a declared event, or fires its timer;
// first it checks that bad resumes are refused.
func (r *propRun) wakeUp(i int) {
	name := r.g.Steps[i].Name
	if rapid.IntRange(0, 4).Draw(r.t, "badResume") == 0 {
		r.refused(engine.Resume{Step: name, Event: "never-declared"}, engine.ErrUnknownEvent)
		for j := range r.status {
			if r.status[j] != hephtype.StepWaiting {
				r.refused(engine.Resume{Step: r.g.Steps[j].Name, Event: r.g.Steps[j].Events[0]}, engine.ErrNotWaiting)
				break
			}
		}
	}
	if r.timers[i] && rapid.Bool().Draw(r.t, "fireTimer") {
		r.mustApply(engine.TimerFired{Step: name})
		return
	}
	if !r.timers[i] {
		r.refused(engine.TimerFired{Step: name}, engine.ErrStale)
	}
	ev := rapid.SampledFrom(r.g.Steps[i].Events).Draw(r.t, "resumeWith")
	r.resumePayload = r.stepOutput("resumed", i, 1)
	r.mustApply(engine.Resume{Step: name, Event: ev, Payload: r.resumePayload})
}

func (r *propRun) cancel() {
	live := len(r.outstanding)
	timers := len(r.timers)
	d, err := r.apply(engine.Cancel{Reason: "stop"})
	if err != nil {
		r.t.Fatalf("Cancel: %v", err)
	}
	var cancels, timerCancels int
	for _, c := range d.Commands {
		switch c.(type) {
		case engine.CancelStep:
			cancels++
		case engine.CancelTimer:
			timerCancels++
		case engine.ScheduleStep, engine.StartTimer:
			r.t.Fatalf("Cancel issued %s", showCommand(c))
		}
	}
	if cancels != live || timerCancels != timers {
		r.t.Fatalf("Cancel with %d tasks and %d timers live issued %v", live, timers, showCommands(d.Commands))
	}
	r.s = d.State
	r.process(engine.Cancel{}, d)
	if r.terminal != hephtype.StatusCancelled {
		r.t.Fatalf("after Cancel the run is %q", r.terminal)
	}
}

// replay delivers an earlier report again: it must be refused and change
// nothing.
func (r *propRun) replay(k int) {
	ev := r.delivered[k]
	if sn, ok := ev.(engine.StepSnoozed); ok && slices.ContainsFunc(r.outstanding, func(o engine.ScheduleStep) bool {
		return o.Step == sn.Step && o.Index == sn.Index && o.Attempt == sn.Attempt
	}) {
		// The snoozed attempt is scheduled again, the same: only the
		// task's fence tells the duplicate from a new report.
		return
	}
	r.stats.stale++
	switch ev.(type) {
	case engine.Resume:
		r.refused(ev, engine.ErrNotWaiting)
	default:
		r.refused(ev, engine.ErrStale)
	}
}

// ---- the model ----

func (r *propRun) lookup(name string) int {
	i, ok := r.g.Lookup(name)
	if !ok {
		r.t.Fatalf("unknown step %q", name)
	}
	return i
}

func (r *propRun) edge(p pred) engine.EdgeState {
	switch r.status[p.from] {
	case hephtype.StepCompleted:
		if r.event[p.from] == p.event {
			return engine.EdgeFired
		}
		return engine.EdgeDead
	case hephtype.StepSkipped:
		return engine.EdgeDead
	}
	return engine.EdgeOpen
}

// ready reports whether step j may start: every incoming edge resolved and
// at least one fired (roots have none).
func (r *propRun) ready(j int) bool {
	if len(r.preds[j]) == 0 {
		return true
	}
	fired := false
	for _, p := range r.preds[j] {
		switch r.edge(p) {
		case engine.EdgeOpen:
			return false
		case engine.EdgeFired:
			fired = true
		}
	}
	return fired
}

func (r *propRun) allDead(j int) bool {
	for _, p := range r.preds[j] {
		if r.edge(p) != engine.EdgeDead {
			return false
		}
	}
	return len(r.preds[j]) > 0
}

// mapArray computes the elements a map step iterates over, from the model.
func (r *propRun) mapArray(j int) ([]json.RawMessage, bool) {
	s := &r.g.Steps[j]
	src := r.input
	if s.MapSource != engine.InputSource {
		if r.status[s.MapSource] != hephtype.StepCompleted {
			return nil, false
		}
		src = r.output[s.MapSource]
	}
	if s.MapField != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(orNull(src), &obj); err != nil || obj == nil {
			return nil, false
		}
		v, ok := obj[s.MapField]
		if !ok {
			return nil, false
		}
		src = v
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(orNull(src), &arr); err != nil || arr == nil {
		return nil, false
	}
	return arr, true
}

// checkInput checks a task's input document: the run input under "input"
// plus, by key, the output of each step of the step's context that
// completed, and nothing else. The context is every ancestor (computed
// here from the edges), or the steps the step declares it reads.
func (r *propRun) checkInput(j int, doc json.RawMessage) {
	var got map[string]json.RawMessage
	if err := json.Unmarshal(doc, &got); err != nil {
		r.t.Fatalf("step %s: input %s is not a JSON object: %v", r.g.Steps[j].Name, doc, err)
	}
	// Every ancestor has finished when a step is scheduled, so its input
	// document is final: it is the same for every attempt.
	for _, a := range ancestorsOf(r.preds, j) {
		if st := r.status[a]; st != hephtype.StepCompleted && st != hephtype.StepSkipped {
			r.t.Fatalf("step %s scheduled while its ancestor %s is %s", r.g.Steps[j].Name, r.g.Steps[a].Name, st)
		}
	}
	want := map[string]json.RawMessage{"input": r.input}
	for _, a := range r.context(j) {
		if r.status[a] == hephtype.StepCompleted {
			want[r.g.Steps[a].Key] = orNull(r.output[a])
		}
	}
	if len(got) != len(want) {
		r.t.Fatalf("step %s: input %s, want the keys of %v", r.g.Steps[j].Name, doc, keys(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !jsonEqual(g, v) {
			r.t.Fatalf("step %s: input[%q] = %s, want %s (input %s)", r.g.Steps[j].Name, k, g, v, doc)
		}
	}
}

// context returns the steps whose outputs step j's input document holds
// when they completed: the steps it reads, when declared, or else every
// ancestor.
func (r *propRun) context(j int) []int {
	if r.g.Steps[j].ReadsDeclared {
		return r.g.Steps[j].Reads
	}
	return ancestorsOf(r.preds, j)
}

// ancestorsOf returns the steps from which a path of edges leads to j.
func ancestorsOf(preds [][]pred, j int) []int {
	seen := map[int]bool{}
	var walk func(int)
	walk = func(i int) {
		for _, p := range preds[i] {
			if !seen[p.from] {
				seen[p.from] = true
				walk(p.from)
			}
		}
	}
	walk(j)
	var out []int
	for a := range seen {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

func keys(m map[string]json.RawMessage) []string {
	var k []string
	for key := range m {
		k = append(k, key)
	}
	slices.Sort(k)
	return k
}

// process checks one decision against the model and updates both.
func (r *propRun) process(ev engine.Event, d *engine.Decision) {
	t := r.t
	if r.terminal != "" {
		t.Fatalf("a decision after the run ended: %v", showCommands(d.Commands))
	}
	scheduled := map[int]bool{} // non-map steps scheduled in this decision
	expanded := map[int]int{}   // map steps expanded, with their counts
	retrying := map[taskKey]int{}

	// Check the report's own history entry against what the test sent.
	if len(d.History) == 0 && ev != nil {
		t.Fatalf("Apply(%#v) wrote no history", ev)
	}
	switch ev := ev.(type) {
	case engine.StepCompleted:
		h := d.History[0]
		j := r.lookup(ev.Step)
		e := ev.Event
		if e == "" {
			e = engine.EventOK
		}
		if r.g.Steps[j].Declares(e) {
			if h.Kind != hephtype.EventStepCompleted || h.Event != e || !jsonEqual(h.Data, r.lastOut[taskKey{ev.Step, -1}]) {
				t.Fatalf("StepCompleted %+v recorded as %v", ev, showHistory(d.History[:1]))
			}
		} else if h.Kind != hephtype.EventStepFailed || !strings.Contains(h.Error, fmt.Sprintf("%q", e)) {
			t.Fatalf("undeclared event %q recorded as %v", e, showHistory(d.History[:1]))
		}
	case engine.StepSnoozed:
		h := d.History[0]
		if len(d.History) != 1 || h.Kind != hephtype.EventStepSnoozed || h.Step != ev.Step || h.Attempt != ev.Attempt || (ev.Index >= 0 && h.Index != ev.Index) {
			t.Fatalf("StepSnoozed %+v recorded as %v", ev, showHistory(d.History))
		}
		if len(d.Commands) != 1 {
			t.Fatalf("StepSnoozed %+v issued %v", ev, showCommands(d.Commands))
		}
	case engine.StepCancelled:
		last := d.History[len(d.History)-1]
		if last.Kind != hephtype.EventRunCancelled || last.Error != ev.Reason {
			t.Fatalf("StepCancelled %+v recorded as %v", ev, showHistory(d.History))
		}
	case engine.Resume:
		k := slices.IndexFunc(d.History, func(h engine.History) bool { return h.Kind == hephtype.EventStepResumed })
		if k < 0 || !jsonEqual(d.History[k].Data, ev.Payload) || d.History[k].Event != ev.Event {
			t.Fatalf("Resume %+v recorded as %v", ev, showHistory(d.History))
		}
	}

	for _, h := range d.History {
		if r.terminal != "" {
			t.Fatalf("history after the run ended: %v", showHistory(d.History))
		}
		j := -1
		if h.Step != "" {
			j = r.lookup(h.Step)
		}
		switch h.Kind {
		case hephtype.EventRunStarted:
			if ev != nil || !jsonEqual(h.Data, r.input) {
				t.Fatalf("unexpected %v", showHistory([]engine.History{h}))
			}
		case hephtype.EventStepScheduled:
			// A plain step starts, or a map step is about to fail expanding.
			if r.status[j] != hephtype.StepPending || !r.ready(j) {
				t.Fatalf("step %s scheduled while %s, incoming edges %v", h.Step, r.status[j], r.edges(j))
			}
			if r.g.Steps[j].Map {
				if _, ok := r.mapArray(j); ok {
					t.Fatalf("map step %s failed to expand over a valid array", h.Step)
				}
			} else {
				scheduled[j] = true
			}
			r.status[j] = hephtype.StepScheduled
		case hephtype.EventMapExpanded:
			if !r.g.Steps[j].Map || r.status[j] != hephtype.StepPending || !r.ready(j) {
				t.Fatalf("map step %s expanded while %s, incoming edges %v", h.Step, r.status[j], r.edges(j))
			}
			arr, ok := r.mapArray(j)
			if !ok || len(arr) != h.Index {
				t.Fatalf("map step %s expanded to %d elements; the test computes %d (valid %v)", h.Step, h.Index, len(arr), ok)
			}
			r.mapItems[j] = arr
			r.itemOut[j] = make([]json.RawMessage, len(arr))
			r.itemDone[j] = make([]bool, len(arr))
			expanded[j] = len(arr)
			r.status[j] = hephtype.StepScheduled
			r.stats.maps++
		case hephtype.EventStepWaiting:
			if _, ok := ev.(engine.StepWaiting); !ok || r.status[j] != hephtype.StepScheduled {
				t.Fatalf("step %s waits, after %#v", h.Step, ev)
			}
			r.status[j] = hephtype.StepWaiting
		case hephtype.EventStepRetrying:
			retrying[taskKey{h.Step, itemIndex(r.g, j, h)}] = h.Attempt
			r.stats.retries++
		case hephtype.EventItemCompleted:
			k := h.Index
			if !jsonEqual(h.Data, r.lastOut[taskKey{h.Step, k}]) {
				t.Fatalf("element %d of %s recorded with %s", k, h.Step, h.Data)
			}
			r.itemOut[j][k] = h.Data
			r.itemDone[j][k] = true
		case hephtype.EventStepCompleted:
			if r.status[j] != hephtype.StepScheduled && r.status[j] != hephtype.StepWaiting {
				t.Fatalf("step %s completed while %s", h.Step, r.status[j])
			}
			switch {
			case h.Event == engine.EventFailed && h.Error != "":
				want, _ := json.Marshal(map[string]string{"error": h.Error})
				if !jsonEqual(h.Data, want) {
					t.Fatalf("step %s failed over to %s", h.Step, h.Data)
				}
			case r.g.Steps[j].Map:
				var want []json.RawMessage
				for k, out := range r.itemOut[j] {
					if !r.itemDone[j][k] {
						t.Fatalf("map step %s completed before element %d", h.Step, k)
					}
					want = append(want, orNull(out))
				}
				wantJSON, _ := json.Marshal(want)
				if len(want) == 0 {
					wantJSON = []byte("[]")
				}
				if h.Event != engine.EventOK || !jsonEqual(h.Data, wantJSON) {
					t.Fatalf("map step %s completed with %s %s, want ok %s", h.Step, h.Event, h.Data, wantJSON)
				}
			case h.Event == engine.EventTimeout:
				if _, ok := ev.(engine.TimerFired); !ok || h.Data != nil {
					t.Fatalf("step %s timed out after %#v with %s", h.Step, ev, h.Data)
				}
			}
			if !r.g.Steps[j].Declares(h.Event) {
				t.Fatalf("step %s completed with undeclared event %q", h.Step, h.Event)
			}
			r.status[j], r.event[j], r.output[j] = hephtype.StepCompleted, h.Event, h.Data
		case hephtype.EventStepResumed:
			if r.status[j] != hephtype.StepWaiting || !r.g.Steps[j].Declares(h.Event) {
				t.Fatalf("step %s resumed while %s with %q", h.Step, r.status[j], h.Event)
			}
			r.status[j], r.event[j], r.output[j] = hephtype.StepCompleted, h.Event, h.Data
		case hephtype.EventStepSkipped:
			if r.status[j] != hephtype.StepPending || !r.allDead(j) {
				t.Fatalf("step %s skipped while %s, incoming edges %v", h.Step, r.status[j], r.edges(j))
			}
			r.status[j] = hephtype.StepSkipped
			r.stats.skipped++
		case hephtype.EventStepCancelled:
			if r.status[j] != hephtype.StepScheduled && r.status[j] != hephtype.StepWaiting {
				t.Fatalf("step %s cancelled while %s", h.Step, r.status[j])
			}
			r.status[j] = hephtype.StepCancelled
		case hephtype.EventRunCompleted:
			r.terminal = hephtype.StatusCompleted
		case hephtype.EventRunFailed:
			r.terminal = hephtype.StatusFailed
			if j < 0 || !strings.HasPrefix(h.Error, fmt.Sprintf("step %q failed: ", h.Step)) {
				t.Fatalf("run failed with %v", showHistory([]engine.History{h}))
			}
			r.failedBy = j
			r.status[j] = hephtype.StepFailed
		case hephtype.EventRunCancelled:
			r.terminal = hephtype.StatusCancelled
		case hephtype.EventTimerFired:
			// The timer is spent: no CancelTimer will follow.
			if _, ok := ev.(engine.TimerFired); !ok || !r.timers[j] || r.status[j] != hephtype.StepWaiting {
				t.Fatalf("timer of %s fired after %#v", h.Step, ev)
			}
			delete(r.timers, j)
		case hephtype.EventStepSnoozed:
			if _, ok := ev.(engine.StepSnoozed); !ok || r.status[j] != hephtype.StepScheduled {
				t.Fatalf("step %s snoozed while %s, after %#v", h.Step, r.status[j], ev)
			}
		case hephtype.EventStepFailed, hephtype.EventItemFailed,
			hephtype.EventTimerStarted, hephtype.EventTimerCancelled:
		default:
			t.Fatalf("unexpected history entry %v", showHistory([]engine.History{h}))
		}
	}

	ended := false
	for _, c := range d.Commands {
		if ended {
			t.Fatalf("command after the run ended: %v", showCommands(d.Commands))
		}
		switch c := c.(type) {
		case engine.ScheduleStep:
			j := r.lookup(c.Step)
			k := taskKey{c.Step, c.Index}
			isMap := r.g.Steps[j].Map
			if (c.Index >= 0) != isMap {
				t.Fatalf("%s: index does not match the step kind", showCommand(c))
			}
			if sn, ok := ev.(engine.StepSnoozed); ok {
				// The same attempt again, after the delay.
				if c.Retry || c.Delay != sn.After || c.Step != sn.Step || c.Index != sn.Index || c.Attempt != sn.Attempt ||
					c.Attempt != r.lastAttempt[k] || !r.everScheduled[k] {
					t.Fatalf("%s in reply to %#v", showCommand(c), ev)
				}
				if isMap && !jsonEqual(c.Item, r.mapItems[j][c.Index]) {
					t.Fatalf("%s: element should be %s", showCommand(c), r.mapItems[j][c.Index])
				}
				r.checkInput(j, c.Input)
				r.outstanding = append(r.outstanding, c)
				continue
			}
			if c.Delay != 0 {
				t.Fatalf("%s: a delay, in reply to %#v", showCommand(c), ev)
			}
			if c.Attempt == 1 {
				if c.Retry || r.everScheduled[k] {
					t.Fatalf("%s: first attempt scheduled twice or marked retry", showCommand(c))
				}
				if isMap {
					if _, ok := expanded[j]; !ok || c.Index >= expanded[j] {
						t.Fatalf("%s without map_expanded", showCommand(c))
					}
					if !jsonEqual(c.Item, r.mapItems[j][c.Index]) {
						t.Fatalf("%s: element should be %s", showCommand(c), r.mapItems[j][c.Index])
					}
				} else if !scheduled[j] {
					t.Fatalf("%s without step_scheduled", showCommand(c))
				}
			} else {
				if !c.Retry || c.Attempt != r.lastAttempt[k]+1 || retrying[k] != c.Attempt || !r.isRetryOf(ev, k, c.Attempt-1) {
					t.Fatalf("%s after attempt %d, in reply to %#v", showCommand(c), r.lastAttempt[k], ev)
				}
				if isMap && !jsonEqual(c.Item, r.mapItems[j][c.Index]) {
					t.Fatalf("%s: element should be %s", showCommand(c), r.mapItems[j][c.Index])
				}
			}
			// Cancelled: the run failed later in the same decision (a map
			// step further on could not expand); a CancelStep must follow,
			// which the check of outstanding tasks at the end enforces.
			if (r.status[j] != hephtype.StepScheduled && (r.status[j] != hephtype.StepCancelled || r.terminal == "")) || !r.ready(j) {
				t.Fatalf("%s while the step is %s, incoming edges %v", showCommand(c), r.status[j], r.edges(j))
			}
			r.checkInput(j, c.Input)
			r.everScheduled[k] = true
			r.lastAttempt[k] = c.Attempt
			r.outstanding = append(r.outstanding, c)
			if c.Attempt == 1 && c.Index <= 0 {
				r.stats.scheduled++
			}
		case engine.StartTimer:
			j := r.lookup(c.Step)
			if r.status[j] != hephtype.StepWaiting || r.timers[j] || c.After != r.g.Steps[j].WaitTimeout || c.After <= 0 {
				t.Fatalf("%s for a step that is %s", showCommand(c), r.status[j])
			}
			r.timers[j] = true
		case engine.CancelTimer:
			j := r.lookup(c.Step)
			if !r.timers[j] {
				t.Fatalf("%s: no timer armed", showCommand(c))
			}
			delete(r.timers, j)
		case engine.CancelStep:
			k := slices.IndexFunc(r.outstanding, func(o engine.ScheduleStep) bool { return o.Step == c.Step && o.Index == c.Index })
			if sc, ok := ev.(engine.StepCancelled); ok && k < 0 && sc.Step == c.Step && sc.Index == c.Index {
				continue // the reporting task itself, which its fence deletes
			}
			if k < 0 {
				t.Fatalf("%s: no such task outstanding", showCommand(c))
			}
			r.outstanding = slices.Delete(r.outstanding, k, k+1)
		case engine.CompleteRun:
			ended = true
			if r.terminal != hephtype.StatusCompleted || !jsonEqual(c.Output, r.wantOutput()) {
				t.Fatalf("%s, want output %s", showCommand(c), r.wantOutput())
			}
		case engine.FailRun:
			ended = true
			if r.terminal != hephtype.StatusFailed || c.Error != r.s.Error {
				t.Fatalf("%s while the model says %q", showCommand(c), r.terminal)
			}
		case engine.CancelRun:
			ended = true
			if r.terminal != hephtype.StatusCancelled {
				t.Fatalf("%s while the model says %q", showCommand(c), r.terminal)
			}
		}
	}
	if ended != (r.terminal != "") {
		t.Fatalf("run ended in the history (%q) but not in the commands, or the reverse: %v", r.terminal, showCommands(d.Commands))
	}

	// The engine's state agrees with the model.
	for j := range r.status {
		if r.s.Steps[j].Status != r.status[j] {
			t.Fatalf("step %s: state says %s, model says %s", r.g.Steps[j].Name, r.s.Steps[j].Status, r.status[j])
		}
	}
	switch {
	case r.terminal != "":
		if r.s.Status != r.terminal {
			t.Fatalf("run status %s, model %s", r.s.Status, r.terminal)
		}
		if len(r.outstanding) > 0 || len(r.timers) > 0 {
			t.Fatalf("the run ended with tasks %v and timers %v left", r.outstanding, r.timers)
		}
	case len(r.outstanding) > 0:
		if r.s.Status != hephtype.StatusRunning {
			t.Fatalf("run is %s with tasks outstanding", r.s.Status)
		}
	default:
		if r.s.Status != hephtype.StatusWaiting || len(r.waitingSteps()) == 0 {
			t.Fatalf("run is %s with no task outstanding", r.s.Status)
		}
	}
	if r.terminal == "" {
		// Liveness: no step is left pending once it can be decided.
		for j := range r.status {
			if r.status[j] == hephtype.StepPending && (r.ready(j) || r.allDead(j)) {
				t.Fatalf("step %s is still pending with incoming edges %v", r.g.Steps[j].Name, r.edges(j))
			}
		}
	}
}

func itemIndex(g *engine.Graph, j int, h engine.History) int {
	if g.Steps[j].Map {
		return h.Index
	}
	return -1
}

// isRetryOf reports whether ev is the retryable failure of attempt of task k.
func (r *propRun) isRetryOf(ev engine.Event, k taskKey, attempt int) bool {
	switch ev := ev.(type) {
	case engine.StepFailed:
		return k.index == -1 && ev.Step == k.step && ev.Attempt == attempt && ev.Retryable
	case engine.ItemFailed:
		return ev.Step == k.step && ev.Index == k.index && ev.Attempt == attempt && ev.Retryable
	}
	return false
}

func (r *propRun) edges(j int) []string {
	var s []string
	for _, p := range r.preds[j] {
		s = append(s, fmt.Sprintf("%s/%s=%d", r.g.Steps[p.from].Name, p.event, r.edge(p)))
	}
	return s
}

// wantOutput is the run output computed by the test: the output of each
// completed step whose event leads to no further step, by key.
func (r *propRun) wantOutput() json.RawMessage {
	out := map[string]json.RawMessage{}
	for j, s := range r.g.Steps {
		if r.status[j] != hephtype.StepCompleted {
			continue
		}
		continues := false
		for _, es := range s.Out {
			if es.Event == r.event[j] && slices.ContainsFunc(es.To, func(to int) bool { return to != engine.Done }) {
				continues = true
			}
		}
		if !continues {
			out[s.Key] = orNull(r.output[j])
		}
	}
	b, _ := json.Marshal(out)
	return b
}

func (r *propRun) finalChecks() {
	t := r.t
	r.stats.cases++
	switch r.terminal {
	case hephtype.StatusCompleted:
		r.stats.completed++
		for j, st := range r.status {
			if st != hephtype.StepCompleted && st != hephtype.StepSkipped {
				t.Fatalf("completed run with step %s %s", r.g.Steps[j].Name, st)
			}
		}
		if !jsonEqual(r.s.Output, r.wantOutput()) {
			t.Fatalf("run output %s, want %s", r.s.Output, r.wantOutput())
		}
	case hephtype.StatusFailed:
		r.stats.failed++
		if r.failedBy < 0 || r.status[r.failedBy] != hephtype.StepFailed {
			t.Fatalf("failed run names no failed step")
		}
	case hephtype.StatusCancelled:
		r.stats.cancelled++
	default:
		t.Fatalf("run ended as %q", r.terminal)
	}
	// Nothing moves a finished run.
	for j, s := range r.g.Steps {
		r.refused(engine.StepCompleted{Step: s.Name, Attempt: max(1, r.s.Steps[j].Attempt)}, engine.ErrStale)
		r.refused(engine.Resume{Step: s.Name, Event: s.Events[0]}, engine.ErrRunFinished)
	}
	r.refused(engine.Cancel{Reason: "late"}, engine.ErrRunFinished)
	for _, ev := range r.delivered[max(0, len(r.delivered)-4):] {
		if _, ok := ev.(engine.Resume); !ok {
			r.refused(ev, engine.ErrStale)
		}
	}
}

// TestPropertyGraphsAreValid checks the generator itself: acyclic by
// construction, every declared event routed, every step reachable.
func TestPropertyGraphsAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		g, _, _ := genGraph(t)
		seen := make([]bool, len(g.Steps))
		var visit func(i int)
		visit = func(i int) {
			if seen[i] {
				return
			}
			seen[i] = true
			for _, es := range g.Steps[i].Out {
				for _, to := range es.To {
					if to != engine.Done {
						if to <= i {
							t.Fatalf("edge %d -> %d goes backwards", i, to)
						}
						visit(to)
					}
				}
			}
		}
		for _, r := range g.Roots {
			visit(r)
		}
		for i, s := range g.Steps {
			if !seen[i] {
				t.Fatalf("step %s unreachable", s.Name)
			}
			for _, ev := range s.Events {
				if !slices.ContainsFunc(s.Out, func(es engine.EdgeSet) bool { return es.Event == ev && len(es.To) > 0 }) {
					t.Fatalf("step %s: event %s not routed", s.Name, ev)
				}
			}
		}
	})
}

func describe(g *engine.Graph) string {
	var b strings.Builder
	for i, s := range g.Steps {
		fmt.Fprintf(&b, "\n\t%d %s key=%s events=%v attempts=%d", i, s.Name, s.Key, s.Events, s.MaxAttempts)
		if s.WaitTimeout > 0 {
			fmt.Fprintf(&b, " timeout=%s", s.WaitTimeout)
		}
		if s.Map {
			fmt.Fprintf(&b, " map(source=%d field=%q)", s.MapSource, s.MapField)
		}
		if s.ReadsDeclared {
			fmt.Fprintf(&b, " reads=%v", s.Reads)
		}
		for _, es := range s.Out {
			fmt.Fprintf(&b, " %s->%v", es.Event, es.To)
		}
	}
	fmt.Fprintf(&b, "\n\troots %v", g.Roots)
	return b.String()
}

// lazy defers building a log line until rapid prints it (on failure only).
type lazy func() string

func (l lazy) String() string { return l() }

// copyState is a deep copy written by the test (not State.Clone, which is
// what is being checked).
func copyState(s *engine.State) *engine.State {
	c := *s
	c.Input = bytes.Clone(s.Input)
	c.Output = bytes.Clone(s.Output)
	c.Steps = nil
	if s.Steps != nil {
		c.Steps = make([]engine.StepState, len(s.Steps))
	}
	for i, st := range s.Steps {
		st.Output = bytes.Clone(st.Output)
		st.In = slices.Clone(st.In)
		if st.Items != nil {
			items := make([]engine.ItemState, len(st.Items))
			for k, it := range st.Items {
				it.Input = bytes.Clone(it.Input)
				it.Output = bytes.Clone(it.Output)
				items[k] = it
			}
			st.Items = items
		}
		c.Steps[i] = st
	}
	return &c
}
