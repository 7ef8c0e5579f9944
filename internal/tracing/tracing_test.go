package tracing_test

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hephaestus-go/hephaestus/internal/tracing"
	"github.com/hephaestus-go/hephaestus/store"
)

func TestEncodeDecode(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	_, sp := tp.Tracer("t").Start(context.Background(), "x")
	sc := sp.SpanContext()
	tc := tracing.Encode(sc)
	if len(tc) != 55 {
		t.Fatalf("Encode = %q", tc)
	}
	got := tracing.Decode(tc)
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || got.TraceFlags() != sc.TraceFlags() || !got.IsRemote() {
		t.Fatalf("Decode(%q) = %+v; want %+v, remote", tc, got, sc)
	}
	if tracing.Encode(trace.SpanContext{}) != "" {
		t.Error("an invalid span context encodes")
	}
	for _, bad := range []string{"", "00", tc[:54], "01" + tc[2:], tc[:35] + "x" + tc[36:], tc[:53] + "zz",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"} {
		if tracing.Decode(bad).IsValid() {
			t.Errorf("Decode(%q) is valid", bad)
		}
	}
}

// A run's root span starts a trace of its own, linked to the caller's
// span; a child run's is the child of the span in ctx; nothing is stored
// without a recording provider, and a NewRun with a context keeps it.
func TestStartRun(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tracing.New(tp)
	now := time.Now()
	ctx, caller := tp.Tracer("t").Start(context.Background(), "caller")

	nr := &store.NewRun{ID: "r1", Workflow: "w", Version: 2}
	sp := tr.StartRun(ctx, nr, now)
	if sp == nil || nr.TraceContext == "" {
		t.Fatalf("no root span: %v %q", sp, nr.TraceContext)
	}
	sp.End()
	root := exp.GetSpans()[0]
	if root.SpanContext.TraceID() == caller.SpanContext().TraceID() || root.Parent.IsValid() {
		t.Errorf("root in the caller's trace or with a parent: %+v", root.Parent)
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("links %+v; want the caller", root.Links)
	}
	if tracing.Encode(root.SpanContext) != nr.TraceContext {
		t.Errorf("stored %q; span %s", nr.TraceContext, tracing.Encode(root.SpanContext))
	}

	child := &store.NewRun{ID: "r2", Workflow: "c", ParentID: "r1"}
	sp = tr.StartRun(tracing.ChildRun(ctx), child, now)
	sp.End()
	cs := exp.GetSpans()[1]
	if cs.SpanContext.TraceID() != caller.SpanContext().TraceID() || cs.Parent.SpanID() != caller.SpanContext().SpanID() || len(cs.Links) != 0 {
		t.Errorf("child run's root: trace %s parent %s links %d; want under the caller's span", cs.SpanContext.TraceID(), cs.Parent.SpanID(), len(cs.Links))
	}

	kept := &store.NewRun{ID: "r3", Workflow: "w", TraceContext: nr.TraceContext}
	if tr.StartRun(ctx, kept, now) != nil || kept.TraceContext != nr.TraceContext {
		t.Error("a NewRun's own trace context was replaced")
	}
	off := &store.NewRun{ID: "r4", Workflow: "w"}
	if tracing.New(nil).StartRun(ctx, off, now) != nil || off.TraceContext != "" {
		t.Errorf("the no-op provider stored %q", off.TraceContext)
	}
	var none *tracing.Tracer
	if none.StartRun(ctx, off, now) != nil {
		t.Error("a nil tracer started a span")
	}
}

// A task of a traced run gets a live span in its run's trace, which the
// committed outcome annotates; a task of a run without a context none; a
// remote attempt's outcome becomes a span of its own.
func TestTaskAndAttempt(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tracing.New(tp)
	now := time.Now()
	nr := &store.NewRun{ID: "r1", Workflow: "w", Version: 1}
	tr.StartRun(context.Background(), nr, now).End()
	root := exp.GetSpans()[0]
	run := &store.Run{ID: "r1", Workflow: "w", Version: 1, TraceContext: nr.TraceContext}
	tk := &store.Task{ID: 7, Token: 1, RunID: "r1", Kind: store.TaskStep, Workflow: "w", Version: 1, Step: "a", Index: -1, Attempt: 1, Queue: "q", TraceContext: nr.TraceContext}
	ctx, sp := tr.StartTask(context.Background(), tk, now)
	if trace.SpanFromContext(ctx) != sp || sp == nil {
		t.Fatal("the task's context does not hold its span")
	}
	tr.Attempt(run, tk, &tracing.Outcome{Step: "a", Index: -1, Attempt: 1, Result: "retried", Err: "boom", Start: now, End: now})
	tr.EndTask(tk, sp, nil, now.Add(time.Millisecond))
	got := exp.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans; want the root and the step's (the outcome made no span of its own)", len(got))
	}
	s := got[1]
	if s.Name != "step a" || s.Parent.SpanID() != root.SpanContext.SpanID() || s.Status.Description != "boom" {
		t.Errorf("span %q parent %s status %+v", s.Name, s.Parent.SpanID(), s.Status)
	}
	// The span is gone from the live ones: a later outcome of the same
	// task is a remote attempt's span.
	tr.Attempt(run, tk, &tracing.Outcome{Step: "a", Index: -1, Attempt: 1, Result: "completed", Start: now, End: now.Add(time.Second)})
	if got := exp.GetSpans(); len(got) != 3 || got[2].Name != "step a" || got[2].EndTime.Sub(got[2].StartTime) != time.Second {
		t.Errorf("remote attempt: %d spans", len(got))
	}
	bare := *tk
	bare.TraceContext = ""
	if _, sp := tr.StartTask(context.Background(), &bare, now); sp != nil {
		t.Error("a task of an untraced run got a span")
	}
}
