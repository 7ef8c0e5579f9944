package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Start begins a run of g with the given input: it schedules the roots.
func Start(g *Graph, input json.RawMessage) *Decision {
	s := &State{Status: hephtype.StatusRunning, Input: input, Steps: make([]StepState, len(g.Steps))}
	for i := range g.Steps {
		s.Steps[i] = StepState{Status: hephtype.StepPending, In: make([]EdgeState, len(g.Steps[i].In))}
	}
	d := &decider{g: g, s: s}
	d.history(History{Kind: hephtype.EventRunStarted, Data: input})
	for _, r := range g.Roots {
		if s.Status.Terminal() {
			break // a root failed as it started (a map step over bad input)
		}
		d.ready(r)
	}
	d.settle()
	return d.decision()
}

// Apply returns the decision that follows from ev in state s. It never
// modifies s. An error means the event was refused and nothing changed.
func Apply(g *Graph, s *State, ev Event) (*Decision, error) {
	if _, ok := ev.(RunRetried); ok {
		return retry(g, s)
	}
	if ev, ok := ev.(RunReset); ok {
		return reset(g, s, ev)
	}
	if s.Status.Terminal() {
		if _, ok := ev.(Cancel); ok {
			return nil, fmt.Errorf("cancel: %w (status %s)", ErrRunFinished, s.Status)
		}
		if _, ok := ev.(TimedOut); ok {
			return nil, fmt.Errorf("time out: %w (status %s)", ErrRunFinished, s.Status)
		}
		if _, ok := ev.(Resume); ok {
			return nil, fmt.Errorf("resume: %w (status %s)", ErrRunFinished, s.Status)
		}
		return nil, fmt.Errorf("%w: run is %s", ErrStale, s.Status)
	}
	d := &decider{g: g, s: s.Clone()}
	var err error
	switch ev := ev.(type) {
	case StepCompleted:
		err = d.stepCompleted(ev)
	case StepWaiting:
		err = d.stepWaiting(ev)
	case StepFailed:
		err = d.stepFailed(ev)
	case ItemCompleted:
		err = d.itemCompleted(ev)
	case ItemFailed:
		err = d.itemFailed(ev)
	case Resume:
		err = d.resume(ev)
	case TimerFired:
		err = d.timerFired(ev)
	case Cancel:
		d.cancel(ev.Reason)
	case TimedOut:
		d.timedOut(ev.Error)
	case StepSnoozed:
		err = d.stepSnoozed(ev)
	case StepCancelled:
		err = d.stepCancelled(ev)
	default:
		err = fmt.Errorf("engine: unknown event %T", ev)
	}
	if err != nil {
		return nil, err
	}
	d.settle()
	return d.decision(), nil
}

type decider struct {
	g    *Graph
	s    *State
	cmds []Command
	hist []History
}

func (d *decider) decision() *Decision {
	return &Decision{State: d.s, Commands: d.cmds, History: d.hist}
}

func (d *decider) history(h History) { d.hist = append(d.hist, h) }
func (d *decider) command(c Command) { d.cmds = append(d.cmds, c) }

// running returns the index of a step that must currently be scheduled with
// the given attempt, or ErrStale.
func (d *decider) running(name string, attempt int) (int, error) {
	i, err := d.g.step(name)
	if err != nil {
		return 0, err
	}
	st := &d.s.Steps[i]
	if st.Status != hephtype.StepScheduled || st.Attempt != attempt || d.g.Steps[i].Map {
		return 0, fmt.Errorf("%w: step %q attempt %d is %s (attempt %d)", ErrStale, name, attempt, st.Status, st.Attempt)
	}
	return i, nil
}

func (d *decider) stepCompleted(ev StepCompleted) error {
	i, err := d.running(ev.Step, ev.Attempt)
	if err != nil {
		return err
	}
	event := ev.Event
	if event == "" {
		event = EventOK
	}
	if !d.g.Steps[i].Declares(event) {
		// A bug in step code, not a transient fault: fail the step for good.
		msg := fmt.Sprintf("step %q emitted event %q, which it does not declare (declared: %s)",
			ev.Step, event, strings.Join(d.g.Steps[i].Events, ", "))
		d.history(History{Kind: hephtype.EventStepFailed, Step: ev.Step, Attempt: ev.Attempt, Error: msg})
		d.fail(i, ev.Attempt, msg)
		return nil
	}
	d.history(History{Kind: hephtype.EventStepCompleted, Step: ev.Step, Attempt: ev.Attempt, Event: event, Data: ev.Output})
	d.finish(i, event, ev.Output)
	return nil
}

func (d *decider) stepWaiting(ev StepWaiting) error {
	i, err := d.running(ev.Step, ev.Attempt)
	if err != nil {
		return err
	}
	st := &d.s.Steps[i]
	st.Status = hephtype.StepWaiting
	d.history(History{Kind: hephtype.EventStepWaiting, Step: ev.Step, Attempt: ev.Attempt})
	if t := d.g.Steps[i].WaitTimeout; t > 0 {
		st.Timer = true
		d.command(StartTimer{Step: ev.Step, After: t})
		d.history(History{Kind: hephtype.EventTimerStarted, Step: ev.Step, Data: durationJSON(t)})
	}
	return nil
}

func (d *decider) stepFailed(ev StepFailed) error {
	i, err := d.running(ev.Step, ev.Attempt)
	if err != nil {
		return err
	}
	d.history(History{Kind: hephtype.EventStepFailed, Step: ev.Step, Attempt: ev.Attempt, Error: ev.Error})
	st := &d.s.Steps[i]
	if ev.Retryable && ev.Attempt-st.Base < d.g.Steps[i].maxAttempts() {
		st.Attempt++
		d.history(History{Kind: hephtype.EventStepRetrying, Step: ev.Step, Attempt: st.Attempt})
		d.command(ScheduleStep{Step: ev.Step, Index: -1, Attempt: st.Attempt, Retry: true, Input: d.input(i)})
		return nil
	}
	d.fail(i, ev.Attempt, ev.Error)
	return nil
}

// stepSnoozed schedules the same attempt of a step or element again,
// after ev.After: the attempt is not consumed.
func (d *decider) stepSnoozed(ev StepSnoozed) error {
	if ev.After < 0 {
		return fmt.Errorf("snooze step %q: the delay %s is negative", ev.Step, ev.After)
	}
	if ev.Index < 0 {
		i, err := d.running(ev.Step, ev.Attempt)
		if err != nil {
			return err
		}
		d.history(History{Kind: hephtype.EventStepSnoozed, Step: ev.Step, Attempt: ev.Attempt, Data: durationJSON(ev.After)})
		d.command(ScheduleStep{Step: ev.Step, Index: -1, Attempt: ev.Attempt, Delay: ev.After, Input: d.input(i)})
		return nil
	}
	i, it, err := d.item(ev.Step, ev.Index, ev.Attempt)
	if err != nil {
		return err
	}
	d.history(History{Kind: hephtype.EventStepSnoozed, Step: ev.Step, Index: ev.Index, Attempt: ev.Attempt, Data: durationJSON(ev.After)})
	d.command(ScheduleStep{Step: ev.Step, Index: ev.Index, Attempt: ev.Attempt, Delay: ev.After, Input: d.input(i), Item: it.Input})
	return nil
}

// stepCancelled cancels the run on behalf of a running step or element.
func (d *decider) stepCancelled(ev StepCancelled) error {
	var err error
	if ev.Index < 0 {
		_, err = d.running(ev.Step, ev.Attempt)
	} else {
		_, _, err = d.item(ev.Step, ev.Index, ev.Attempt)
	}
	if err != nil {
		return err
	}
	reason := ev.Reason
	if reason == "" {
		reason = fmt.Sprintf("cancelled by step %q", ev.Step)
	}
	d.cancel(reason)
	return nil
}

// item returns a map step's element that must currently be scheduled with
// the given attempt, or ErrStale.
func (d *decider) item(name string, index, attempt int) (int, *ItemState, error) {
	i, err := d.g.step(name)
	if err != nil {
		return 0, nil, err
	}
	if !d.g.Steps[i].Map {
		return 0, nil, fmt.Errorf("%w: %q", ErrNotMap, name)
	}
	st := &d.s.Steps[i]
	if st.Status != hephtype.StepScheduled || index < 0 || index >= len(st.Items) {
		return 0, nil, fmt.Errorf("%w: step %q element %d", ErrStale, name, index)
	}
	it := &st.Items[index]
	if it.Status != hephtype.StepScheduled || it.Attempt != attempt {
		return 0, nil, fmt.Errorf("%w: step %q element %d attempt %d is %s (attempt %d)", ErrStale, name, index, attempt, it.Status, it.Attempt)
	}
	return i, it, nil
}

func (d *decider) itemCompleted(ev ItemCompleted) error {
	i, it, err := d.item(ev.Step, ev.Index, ev.Attempt)
	if err != nil {
		return err
	}
	it.Status = hephtype.StepCompleted
	it.Output = ev.Output
	d.history(History{Kind: hephtype.EventItemCompleted, Step: ev.Step, Index: ev.Index, Attempt: ev.Attempt, Data: ev.Output})
	st := &d.s.Steps[i]
	var buf bytes.Buffer
	buf.WriteByte('[')
	for k := range st.Items {
		if st.Items[k].Status != hephtype.StepCompleted {
			return nil
		}
		if k > 0 {
			buf.WriteByte(',')
		}
		buf.Write(orNull(st.Items[k].Output))
	}
	buf.WriteByte(']')
	out := json.RawMessage(buf.Bytes())
	d.history(History{Kind: hephtype.EventStepCompleted, Step: ev.Step, Attempt: st.Attempt, Event: EventOK, Data: out})
	d.finish(i, EventOK, out)
	return nil
}

func (d *decider) itemFailed(ev ItemFailed) error {
	i, it, err := d.item(ev.Step, ev.Index, ev.Attempt)
	if err != nil {
		return err
	}
	d.history(History{Kind: hephtype.EventItemFailed, Step: ev.Step, Index: ev.Index, Attempt: ev.Attempt, Error: ev.Error})
	if ev.Retryable && ev.Attempt-it.Base < d.g.Steps[i].maxAttempts() {
		it.Attempt++
		d.history(History{Kind: hephtype.EventStepRetrying, Step: ev.Step, Index: ev.Index, Attempt: it.Attempt})
		d.command(ScheduleStep{Step: ev.Step, Index: ev.Index, Attempt: it.Attempt, Retry: true, Input: d.input(i), Item: it.Input})
		return nil
	}
	it.Status = hephtype.StepFailed
	d.fail(i, d.s.Steps[i].Attempt, fmt.Sprintf("element %d: %s", ev.Index, ev.Error))
	return nil
}

func (d *decider) resume(ev Resume) error {
	i, err := d.g.step(ev.Step)
	if err != nil {
		return err
	}
	st := &d.s.Steps[i]
	if st.Status != hephtype.StepWaiting {
		return fmt.Errorf("resume step %q: %w (it is %s)", ev.Step, ErrNotWaiting, st.Status)
	}
	if !d.g.Steps[i].Declares(ev.Event) {
		return fmt.Errorf("resume step %q with event %q: %w (declared: %s)", ev.Step, ev.Event, ErrUnknownEvent,
			strings.Join(d.g.Steps[i].Events, ", "))
	}
	d.disarm(i)
	d.history(History{Kind: hephtype.EventStepResumed, Step: ev.Step, Event: ev.Event, Data: ev.Payload})
	d.finish(i, ev.Event, ev.Payload)
	return nil
}

func (d *decider) timerFired(ev TimerFired) error {
	i, err := d.g.step(ev.Step)
	if err != nil {
		return err
	}
	st := &d.s.Steps[i]
	if st.Status != hephtype.StepWaiting || !st.Timer {
		return fmt.Errorf("%w: timer of step %q fired while it is %s", ErrStale, ev.Step, st.Status)
	}
	st.Timer = false
	d.history(History{Kind: hephtype.EventTimerFired, Step: ev.Step})
	d.history(History{Kind: hephtype.EventStepCompleted, Step: ev.Step, Attempt: st.Attempt, Event: EventTimeout})
	d.finish(i, EventTimeout, nil)
	return nil
}

func (d *decider) disarm(i int) {
	st := &d.s.Steps[i]
	if st.Timer {
		st.Timer = false
		d.command(CancelTimer{Step: d.g.Steps[i].Name})
		d.history(History{Kind: hephtype.EventTimerCancelled, Step: d.g.Steps[i].Name})
	}
}

// fail handles a step that failed for good: it takes the "failed" edge when
// the flow routes it, otherwise the run fails.
func (d *decider) fail(i, attempt int, msg string) {
	step := &d.g.Steps[i]
	d.cancelItems(i)
	if step.routes(EventFailed) {
		out, _ := json.Marshal(map[string]string{"error": msg})
		d.history(History{Kind: hephtype.EventStepCompleted, Step: step.Name, Attempt: attempt, Event: EventFailed, Data: out, Error: msg})
		d.finish(i, EventFailed, out)
		return
	}
	d.s.Steps[i].Status = hephtype.StepFailed
	d.s.Error = fmt.Sprintf("step %q failed: %s", step.Name, msg)
	d.s.Status = hephtype.StatusFailed
	d.stopAll()
	d.history(History{Kind: hephtype.EventRunFailed, Step: step.Name, Error: d.s.Error})
	d.command(FailRun{Error: d.s.Error})
}

func (d *decider) cancel(reason string) {
	d.s.Status = hephtype.StatusCancelled
	d.s.Error = reason
	d.stopAll()
	d.history(History{Kind: hephtype.EventRunCancelled, Error: reason})
	d.command(CancelRun{Reason: reason})
}

// timedOut fails the run for its execution timeout: what runs or waits
// is cancelled as by cancel.
func (d *decider) timedOut(msg string) {
	d.s.Status = hephtype.StatusFailed
	d.s.Error = msg
	d.stopAll()
	d.history(History{Kind: hephtype.EventRunTimedOut, Error: msg})
	d.command(FailRun{Error: msg})
}

// stopAll cancels every step that is still scheduled or waiting.
func (d *decider) stopAll() {
	for i := range d.s.Steps {
		st := &d.s.Steps[i]
		switch st.Status {
		case hephtype.StepScheduled:
			if d.g.Steps[i].Map {
				d.cancelItems(i)
			} else {
				d.command(CancelStep{Step: d.g.Steps[i].Name, Index: -1})
			}
		case hephtype.StepWaiting:
			d.disarm(i)
		default:
			continue
		}
		st.Status = hephtype.StepCancelled
		d.history(History{Kind: hephtype.EventStepCancelled, Step: d.g.Steps[i].Name})
	}
}

// cancelItems cancels the in-flight elements of a map step.
func (d *decider) cancelItems(i int) {
	st := &d.s.Steps[i]
	for k := range st.Items {
		if st.Items[k].Status == hephtype.StepScheduled {
			st.Items[k].Status = hephtype.StepCancelled
			d.command(CancelStep{Step: d.g.Steps[i].Name, Index: k})
		}
	}
}

// finish records that step i ended with event and output, and resolves its
// outgoing edges.
func (d *decider) finish(i int, event string, output json.RawMessage) {
	st := &d.s.Steps[i]
	st.Status = hephtype.StepCompleted
	st.Event = event
	st.Output = output
	d.resolve(i, event)
}

// skip marks step i skipped and kills its outgoing edges.
func (d *decider) skip(i int) {
	d.s.Steps[i].Status = hephtype.StepSkipped
	d.history(History{Kind: hephtype.EventStepSkipped, Step: d.g.Steps[i].Name})
	d.resolve(i, "")
}

// resolve fires the edges of step i on event and kills the others; an
// empty event kills them all.
func (d *decider) resolve(i int, event string) {
	for _, es := range d.g.Steps[i].Out {
		state := EdgeDead
		if event != "" && es.Event == event {
			state = EdgeFired
		}
		for k, to := range es.To {
			if to == Done {
				continue
			}
			d.s.Steps[to].In[es.InPos[k]] = state
			d.check(to)
		}
	}
}

// check makes step t ready or skips it once all its incoming edges are
// resolved.
func (d *decider) check(t int) {
	st := &d.s.Steps[t]
	if st.Status != hephtype.StepPending || d.s.Status.Terminal() {
		// Once the run has ended (a step failed while this decision was
		// resolving edges), nothing more may start or be skipped.
		return
	}
	fired := false
	for _, e := range st.In {
		switch e {
		case EdgeOpen:
			return
		case EdgeFired:
			fired = true
		}
	}
	if fired {
		d.ready(t)
	} else {
		d.skip(t)
	}
}

// ready schedules step i (or expands a map step).
func (d *decider) ready(i int) {
	step := &d.g.Steps[i]
	st := &d.s.Steps[i]
	st.Status = hephtype.StepScheduled
	// A step that never ran makes attempt 1; one that a reset sent back to
	// pending goes on counting (Base: its budget starts afresh).
	st.Attempt++
	st.Base = st.Attempt - 1
	a := st.Attempt
	input := d.input(i)
	if !step.Map {
		d.history(History{Kind: hephtype.EventStepScheduled, Step: step.Name, Attempt: a})
		d.command(ScheduleStep{Step: step.Name, Index: -1, Attempt: a, Input: input})
		return
	}
	items, err := d.mapSource(i)
	if err != nil {
		d.history(History{Kind: hephtype.EventStepScheduled, Step: step.Name, Attempt: a})
		d.history(History{Kind: hephtype.EventStepFailed, Step: step.Name, Attempt: a, Error: err.Error()})
		d.fail(i, a, err.Error())
		return
	}
	d.history(History{Kind: hephtype.EventMapExpanded, Step: step.Name, Index: len(items)})
	if len(items) == 0 {
		out := json.RawMessage("[]")
		d.history(History{Kind: hephtype.EventStepCompleted, Step: step.Name, Attempt: a, Event: EventOK, Data: out})
		d.finish(i, EventOK, out)
		return
	}
	st.Items = make([]ItemState, len(items))
	for k, item := range items {
		st.Items[k] = ItemState{Status: hephtype.StepScheduled, Attempt: a, Base: a - 1, Input: item}
		d.command(ScheduleStep{Step: step.Name, Index: k, Attempt: a, Input: input, Item: item})
	}
}

// mapSource returns the elements a map step iterates over.
func (d *decider) mapSource(i int) ([]json.RawMessage, error) {
	step := &d.g.Steps[i]
	var src json.RawMessage
	from := "the run input"
	if step.MapSource == InputSource {
		src = d.s.Input
	} else {
		srcStep := &d.g.Steps[step.MapSource]
		from = fmt.Sprintf("the output of step %q", srcStep.Name)
		if d.s.Steps[step.MapSource].Status != hephtype.StepCompleted {
			return nil, fmt.Errorf("map step %q: %s is missing (the step was %s)", step.Name, from, d.s.Steps[step.MapSource].Status)
		}
		src = d.s.Steps[step.MapSource].Output
	}
	if step.MapField != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(orNull(src), &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("map step %q: %s is not a JSON object, so it has no field %q", step.Name, from, step.MapField)
		}
		v, ok := obj[step.MapField]
		if !ok {
			return nil, fmt.Errorf("map step %q: %s has no field %q", step.Name, from, step.MapField)
		}
		src = v
		from = fmt.Sprintf("field %q of %s", step.MapField, from)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(orNull(src), &items); err != nil || items == nil {
		return nil, fmt.Errorf("map step %q: %s is not a JSON array (got %s)", step.Name, from, jsonKind(src))
	}
	return items, nil
}

// input builds step i's input document: the run input and, by key, the
// output of every step of its context (its ancestors, or the steps it
// declares it reads) that completed. When a step becomes ready every
// ancestor has finished, so the document does not change across retries.
//
// Cost: the document holds each completed ancestor's output once, so it is
// at most the size of the run input plus every output in the run's state;
// in a chain of n steps, step k copies k-1 outputs (the state itself, which
// every decision decodes and encodes, holds all n).
func (d *decider) input(i int) json.RawMessage {
	var buf bytes.Buffer
	buf.WriteString(`{"input":`)
	buf.Write(orNull(d.s.Input))
	for _, j := range d.g.Context(i) {
		if d.s.Steps[j].Status != hephtype.StepCompleted {
			continue // skipped: its path was not taken
		}
		buf.WriteByte(',')
		key, _ := json.Marshal(d.g.Steps[j].Key)
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(orNull(d.s.Steps[j].Output))
	}
	buf.WriteByte('}')
	return buf.Bytes()
}

// settle updates the run status after a change: it completes the run when
// no step is active, and tells running from waiting otherwise.
func (d *decider) settle() {
	if d.s.Status.Terminal() {
		return
	}
	scheduled, waiting := 0, 0
	for i := range d.s.Steps {
		switch d.s.Steps[i].Status {
		case hephtype.StepScheduled:
			scheduled++
		case hephtype.StepWaiting:
			waiting++
		}
	}
	switch {
	case scheduled > 0:
		d.s.Status = hephtype.StatusRunning
	case waiting > 0:
		d.s.Status = hephtype.StatusWaiting
	default:
		// Nothing is active. Anything still pending can never become ready
		// (validation rules this out); skip it so the run's record is whole.
		for i := range d.s.Steps {
			if d.s.Steps[i].Status == hephtype.StepPending {
				d.s.Steps[i].Status = hephtype.StepSkipped
				d.history(History{Kind: hephtype.EventStepSkipped, Step: d.g.Steps[i].Name})
			}
		}
		d.s.Status = hephtype.StatusCompleted
		d.s.Output = d.output()
		d.history(History{Kind: hephtype.EventRunCompleted, Data: d.s.Output})
		d.command(CompleteRun{Output: d.s.Output})
	}
}

// output is the run's result: the outputs of the completed steps whose event
// leads to no further step, by key.
func (d *decider) output() json.RawMessage {
	out := map[string]json.RawMessage{}
	for i := range d.g.Steps {
		st := &d.s.Steps[i]
		if st.Status == hephtype.StepCompleted && !d.g.Steps[i].continues(st.Event) {
			out[d.g.Steps[i].Key] = orNull(st.Output)
		}
	}
	b, _ := json.Marshal(out)
	return b
}

// continues reports whether event leads from the step to another step.
func (s *Step) continues(event string) bool {
	for _, es := range s.Out {
		if es.Event == event {
			for _, to := range es.To {
				if to != Done {
					return true
				}
			}
		}
	}
	return false
}

// routes reports whether the step has an edge on event.
func (s *Step) routes(event string) bool {
	for _, es := range s.Out {
		if es.Event == event {
			return true
		}
	}
	return false
}

func (s *Step) maxAttempts() int { return max(s.MaxAttempts, 1) }

var null = json.RawMessage("null")

func orNull(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return null
	}
	return m
}

func jsonKind(m json.RawMessage) string {
	m = bytes.TrimSpace(m)
	if len(m) == 0 {
		return "nothing"
	}
	switch m[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func durationJSON(t fmt.Stringer) json.RawMessage {
	b, _ := json.Marshal(t.String())
	return b
}
