// Package tracing makes the OpenTelemetry spans of runs: one trace per
// run (a child run joins its parent's), with a span per step or activity
// attempt, decision, timer wait and child run.
//
// It uses the OpenTelemetry trace API only: without an SDK the tracer
// records nothing, no run gets a trace context, and every call here
// returns after one check.
//
// The spans are made so that they join across processes and never repeat
// when a workflow replays:
//
//   - A run's root span ("run <workflow>") is started just before the run
//     is created and ended once the creation commits; a creation the store
//     refuses (a duplicate) ends nothing, so exports nothing. Its context
//     is stored with the run (store.Run.TraceContext) and copied into every
//     task of the run, so a worker in any process parents its spans in the
//     run's trace without reading the run.
//   - A task run by a worker of this process has a live span from its
//     start to the commit of its outcome (StartTask, EndTask); the code of
//     a step or an activity runs under it, so the program's own spans nest
//     there. A timer's span starts when the timer was set.
//   - The committer records each committed attempt outcome (Attempt): on
//     the live span of the task, or, for a remote worker's attempt, as a
//     span of its own from the attempt's start to the commit.
//   - Decisions made outside a decision task (an activity's outcome decided
//     at once, a signal, an update) are recorded once their change commits
//     (Decision), and a run's end as a last span (RunEnded).
//
// Replaying a workflow's history commits nothing and runs no task, so it
// makes no span.
package tracing

import (
	"context"
	"encoding/hex"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// ScopeName is the instrumentation scope of the tracer.
const ScopeName = "github.com/hephaestus-go/hephaestus"

// The span attributes.
const (
	AttrRunID       = attribute.Key("heph.run.id")
	AttrWorkflow    = attribute.Key("heph.workflow")
	AttrVersion     = attribute.Key("heph.workflow.version")
	AttrRunKind     = attribute.Key("heph.run.kind")
	AttrBusinessKey = attribute.Key("heph.business_key")
	AttrParentRun   = attribute.Key("heph.run.parent_id")
	AttrStatus      = attribute.Key("heph.run.status")
	AttrStep        = attribute.Key("heph.step")
	AttrIndex       = attribute.Key("heph.step.index")
	AttrAttempt     = attribute.Key("heph.attempt")
	AttrQueue       = attribute.Key("heph.queue")
	AttrTaskID      = attribute.Key("heph.task.id")
	AttrTaskKind    = attribute.Key("heph.task.kind")
	AttrOutcome     = attribute.Key("heph.outcome")
	AttrRemote      = attribute.Key("heph.remote")
)

// Tracer makes the spans of runs. A nil *Tracer makes none.
type Tracer struct {
	t trace.Tracer

	mu   sync.Mutex
	live map[store.Lease]trace.Span // spans of the tasks running here
}

// New returns a Tracer on tp (no spans when nil).
func New(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Tracer{t: tp.Tracer(ScopeName), live: map[store.Lease]trace.Span{}}
}

// Encode returns sc as a W3C traceparent, or "" when sc is not valid.
func Encode(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Decode parses a W3C traceparent of version 00; the zero SpanContext
// (not valid) when s is not one.
func Decode(s string) trace.SpanContext {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}
	}
	tid, err := trace.TraceIDFromHex(s[3:35])
	if err != nil {
		return trace.SpanContext{}
	}
	sid, err := trace.SpanIDFromHex(s[36:52])
	if err != nil {
		return trace.SpanContext{}
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(s[53:55])); err != nil {
		return trace.SpanContext{}
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
}

type childKey struct{}

// ChildRun marks ctx, the context of the task that creates a child run:
// the child's root span is a child of ctx's span, in the parent run's
// trace, instead of the root of a trace of its own.
func ChildRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, childKey{}, true)
}

// StartRun starts the root span of nr, a run about to be created, at now,
// and stores its context in nr.TraceContext. The caller ends the span
// (End) once the creation committed, and drops it otherwise. The span
// starts a trace of its own, linked to the caller's span in ctx when there
// is one (ChildRun: the child of ctx's span). It returns nil when nr has a
// trace context already, or when nothing is traced.
func (t *Tracer) StartRun(ctx context.Context, nr *store.NewRun, now time.Time) trace.Span {
	if t == nil || nr.TraceContext != "" {
		return nil
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, AttrRunID.String(nr.ID), AttrWorkflow.String(nr.Workflow), AttrVersion.Int(nr.Version), AttrRunKind.String(string(nr.Kind)))
	if nr.BusinessID != "" {
		attrs = append(attrs, AttrBusinessKey.String(nr.BusinessID))
	}
	if nr.ParentID != "" {
		attrs = append(attrs, AttrParentRun.String(nr.ParentID))
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(now), trace.WithAttributes(attrs...)}
	caller := trace.SpanContextFromContext(ctx)
	parent := context.Background()
	if child, _ := ctx.Value(childKey{}).(bool); child && caller.IsValid() {
		parent = trace.ContextWithSpanContext(parent, caller)
	} else {
		opts = append(opts, trace.WithNewRoot())
		if caller.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
		}
	}
	_, sp := t.t.Start(parent, "run "+nr.Workflow, opts...)
	tc := Encode(sp.SpanContext())
	if tc == "" {
		return nil
	}
	nr.TraceContext = tc
	return sp
}

// StartTask starts the span of task tk, which a worker of this process
// starts at now, in its run's trace; ctx, returned with the span in it, is
// what the task's code runs under. It returns ctx and nil when the run is
// not traced.
func (t *Tracer) StartTask(ctx context.Context, tk *store.Task, now time.Time) (context.Context, trace.Span) {
	if t == nil || tk.TraceContext == "" {
		return ctx, nil
	}
	parent := Decode(tk.TraceContext)
	if !parent.IsValid() {
		return ctx, nil
	}
	name, start := "", now
	switch tk.Kind {
	case store.TaskStep:
		name = "step " + tk.Step
	case store.TaskActivity:
		name = "activity " + tk.Step
	case store.TaskDecision:
		name = "decision " + tk.Workflow
	case store.TaskTimer, store.TaskWorkflowTimer:
		// A timer's span is its wait: from when it was set to its firing.
		name, start = "timer", tk.CreatedAt
		if tk.Step != "" {
			name += " " + tk.Step
		}
	default:
		name = string(tk.Kind) + " " + tk.Step
	}
	ctx, sp := t.t.Start(trace.ContextWithRemoteSpanContext(ctx, parent), name, trace.WithTimestamp(start), trace.WithAttributes(taskAttrs(tk)...))
	t.mu.Lock()
	t.live[tk.Lease()] = sp
	t.mu.Unlock()
	return ctx, sp
}

func taskAttrs(tk *store.Task) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, AttrRunID.String(tk.RunID), AttrWorkflow.String(tk.Workflow), AttrVersion.Int(tk.Version),
		AttrQueue.String(tk.Queue), AttrTaskID.Int64(tk.ID), AttrTaskKind.String(string(tk.Kind)), AttrAttempt.Int(tk.Attempt))
	if tk.Step != "" {
		attrs = append(attrs, AttrStep.String(tk.Step))
	}
	if tk.Index >= 0 {
		attrs = append(attrs, AttrIndex.Int(tk.Index))
	}
	return attrs
}

// WithTask returns ctx with the span of task tk in it, when a worker of
// this process runs tk: for work done on the task's behalf under another
// context (a commit that must outlive the task's).
func (t *Tracer) WithTask(ctx context.Context, tk *store.Task) context.Context {
	if t == nil || tk.TraceContext == "" {
		return ctx
	}
	t.mu.Lock()
	sp := t.live[tk.Lease()]
	t.mu.Unlock()
	if sp == nil {
		return ctx
	}
	return trace.ContextWithSpan(ctx, sp)
}

// EndTask ends at now the span StartTask returned for tk, failed with err
// when err is not nil (the lease was lost, the run cancelled, the worker
// stops: the task's outcome was not committed by this worker).
func (t *Tracer) EndTask(tk *store.Task, sp trace.Span, err error, now time.Time) {
	if sp == nil {
		return
	}
	t.mu.Lock()
	delete(t.live, tk.Lease())
	t.mu.Unlock()
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End(trace.WithTimestamp(now))
}

// Outcome is the committed outcome of an attempt of a step or an activity.
type Outcome struct {
	Step    string
	Index   int
	Attempt int
	// Result: completed, waiting, snoozed, failed, retried (failed and
	// scheduled again) or cancelled.
	Result string
	Err    string
	// Start is when the attempt started, End when its outcome committed.
	Start, End time.Time
}

// Attempt records an attempt's outcome that committed: on the span of
// task tk when a worker of this process runs it (tk may be nil), or else
// (a remote worker's attempt) as a span of its own in run's trace.
func (t *Tracer) Attempt(run *store.Run, tk *store.Task, o *Outcome) {
	if t == nil || run.TraceContext == "" {
		return
	}
	var sp trace.Span
	if tk != nil && tk.Step == o.Step {
		t.mu.Lock()
		sp = t.live[tk.Lease()]
		t.mu.Unlock()
	}
	if sp == nil {
		parent := Decode(run.TraceContext)
		if !parent.IsValid() || o.Start.IsZero() {
			return
		}
		name := "step " + o.Step
		if run.Kind == hephtype.KindWorkflow {
			name = "activity " + o.Step
		}
		attrs := []attribute.KeyValue{AttrRunID.String(run.ID), AttrWorkflow.String(run.Workflow), AttrVersion.Int(run.Version),
			AttrStep.String(o.Step), AttrAttempt.Int(o.Attempt), AttrRemote.Bool(true)}
		if o.Index >= 0 {
			attrs = append(attrs, AttrIndex.Int(o.Index))
		}
		if tk != nil {
			attrs = append(attrs, AttrQueue.String(tk.Queue), AttrTaskID.Int64(tk.ID), AttrTaskKind.String(string(tk.Kind)))
		}
		_, sp = t.t.Start(trace.ContextWithRemoteSpanContext(context.Background(), parent), name,
			trace.WithTimestamp(o.Start), trace.WithAttributes(attrs...))
		defer sp.End(trace.WithTimestamp(o.End))
	}
	sp.SetAttributes(AttrOutcome.String(o.Result))
	if o.Err != "" {
		sp.SetStatus(codes.Error, o.Err)
	}
}

// Decision records a decision of a workflow run that committed outside a
// decision task (whose own span is the decision's), from start to end: a
// span under ctx's when that span is in the run's trace (the task whose
// outcome the decision took in), else under the run's root span, linked to
// ctx's span (the caller that signalled, updated, cancelled).
func (t *Tracer) Decision(ctx context.Context, run *store.Run, start, end time.Time) {
	if t == nil || run.TraceContext == "" {
		return
	}
	root := Decode(run.TraceContext)
	if !root.IsValid() {
		return
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(start),
		trace.WithAttributes(AttrRunID.String(run.ID), AttrWorkflow.String(run.Workflow), AttrVersion.Int(run.Version))}
	cur := trace.SpanContextFromContext(ctx)
	parent := trace.ContextWithRemoteSpanContext(context.Background(), root)
	switch {
	case cur.IsValid() && cur.TraceID() == root.TraceID():
		parent = trace.ContextWithSpanContext(context.Background(), cur)
	case cur.IsValid():
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: cur}))
	}
	_, sp := t.t.Start(parent, "decision "+run.Workflow, opts...)
	sp.End(trace.WithTimestamp(end))
}

// RunEnded records the end of run, committed at end: a span "end
// <workflow>" under its root, failed with the run's error when it failed.
func (t *Tracer) RunEnded(run *store.Run, end time.Time) {
	if t == nil || run.TraceContext == "" {
		return
	}
	root := Decode(run.TraceContext)
	if !root.IsValid() {
		return
	}
	attrs := []attribute.KeyValue{AttrRunID.String(run.ID), AttrWorkflow.String(run.Workflow), AttrVersion.Int(run.Version),
		AttrRunKind.String(string(run.Kind)), AttrStatus.String(string(run.Status))}
	if run.BusinessID != "" {
		attrs = append(attrs, AttrBusinessKey.String(run.BusinessID))
	}
	_, sp := t.t.Start(trace.ContextWithRemoteSpanContext(context.Background(), root), "end "+run.Workflow,
		trace.WithTimestamp(end), trace.WithAttributes(attrs...))
	if run.Status == hephtype.StatusFailed {
		sp.SetStatus(codes.Error, run.Error)
	}
	sp.End(trace.WithTimestamp(end))
}
