package hephaestus_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// newTracing returns a tracer provider that exports every span, as it
// ends, into the returned in-memory exporter.
func newTracing(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// inTrace returns the spans of trace id.
func inTrace(spans tracetest.SpanStubs, id trace.TraceID) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.SpanContext.TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// rootOf returns the span named name without a parent among spans.
func rootOf(t *testing.T, spans tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no span %q among %d: %s", name, len(spans), renderSpans(spans))
	return tracetest.SpanStub{}
}

// renderSpans renders the spans of a trace as an indented tree: a span's
// children in the order they started (then by name). Each line has the
// span's name and what tells attempts apart: the map index, the attempt,
// the outcome or the run's status, and an error. A span whose parent is
// not among spans is a root.
func renderSpans(spans tracetest.SpanStubs) string {
	byID := map[trace.SpanID]bool{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = true
	}
	kids := map[trace.SpanID][]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	for _, s := range spans {
		if p := s.Parent.SpanID(); s.Parent.IsValid() && byID[p] {
			kids[p] = append(kids[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	order := func(a, b tracetest.SpanStub) int {
		if c := a.StartTime.Compare(b.StartTime); c != 0 {
			return c
		}
		return strings.Compare(line(a), line(b))
	}
	var b strings.Builder
	var walk func(s tracetest.SpanStub, prefix string, last, top bool)
	walk = func(s tracetest.SpanStub, prefix string, last, top bool) {
		branch, next := "", ""
		if !top {
			branch, next = "├── ", "│   "
			if last {
				branch, next = "└── ", "    "
			}
		}
		b.WriteString(prefix + branch + line(s) + "\n")
		cs := kids[s.SpanContext.SpanID()]
		slices.SortStableFunc(cs, order)
		for i, c := range cs {
			walk(c, prefix+next, i == len(cs)-1, false)
		}
	}
	slices.SortStableFunc(roots, order)
	for _, r := range roots {
		walk(r, "", true, true)
	}
	return b.String()
}

func line(s tracetest.SpanStub) string {
	l := s.Name
	if v := attr(s, "heph.step.index"); v.Type() != attribute.EMPTY {
		l += fmt.Sprintf("[%d]", v.AsInt64())
	}
	var notes []string
	if v := attr(s, "heph.attempt"); v.AsInt64() > 0 && !strings.HasPrefix(s.Name, "decision ") {
		notes = append(notes, fmt.Sprintf("attempt %d", v.AsInt64()))
	}
	if v := attr(s, "heph.outcome"); v.AsString() != "" {
		notes = append(notes, v.AsString())
	}
	if v := attr(s, "heph.run.status"); v.AsString() != "" {
		notes = append(notes, v.AsString())
	}
	if v := attr(s, "heph.business_key"); v.AsString() != "" && strings.HasPrefix(s.Name, "run ") {
		notes = append(notes, "key "+v.AsString())
	}
	if len(s.Links) > 0 {
		notes = append(notes, fmt.Sprintf("%d link", len(s.Links)))
	}
	if s.Status.Code == codes.Error {
		notes = append(notes, "error: "+s.Status.Description)
	}
	if len(notes) > 0 {
		l += " (" + strings.Join(notes, ", ") + ")"
	}
	return l
}

// The trace of a run of the example order flow: validate_order fans out
// to charge_payment and to reserve_inventory, a map step over the order's
// two lines, which fan in to ship_order. One trace, rooted at the run's
// span, linked to the caller's; every attempt a child of the root with
// the run's attributes. The rendered tree is the one docs/observability.md
// shows.
func TestTraceFanOutFanIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tp, exp := newTracing(t)
	c := startClient(t, ctx, &heph.Config{Store: openSQLite(t), TracerProvider: tp, Logger: quietLogger()}, func(c *heph.Client) error {
		return demo.Register(ctx, c, flowdoc.NewRegistry())
	})

	// The caller's own span: the run's trace links to it.
	cctx, caller := tp.Tracer("checkout").Start(ctx, "POST /checkout")
	order := demo.Order{ID: "A-1", Customer: "ada", Region: "eu", Items: []demo.Line{{SKU: "pen", Qty: 2, Price: 150}, {SKU: "ink", Qty: 1, Price: 900}}}
	r, err := c.Run(cctx, demo.OrderFlow, order, &heph.StartOptions{BusinessValue: order.ID})
	caller.End()
	if err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("run: %+v, %v", r, err)
	}
	// The run's end commits before the worker that ran its last step ends
	// that step's span: wait for all seven.
	waitSpans(t, ctx, exp, map[string]int{"run " + demo.OrderFlow: 1, "step ship_order": 1, "end " + demo.OrderFlow: 1, "step reserve_inventory": 2})
	root := rootOf(t, exp.GetSpans(), "run "+demo.OrderFlow)
	spans := inTrace(exp.GetSpans(), root.SpanContext.TraceID())
	if root.SpanContext.TraceID() == caller.SpanContext().TraceID() {
		t.Error("the run's trace is the caller's; want a trace of its own, linked")
	}
	if len(root.Links) != 1 || root.Links[0].SpanContext.SpanID() != caller.SpanContext().SpanID() {
		t.Errorf("root links %+v; want the caller's span %s", root.Links, caller.SpanContext().SpanID())
	}
	if root.Parent.IsValid() {
		t.Errorf("root has parent %s", root.Parent.SpanID())
	}
	if got := attr(root, "heph.run.id").AsString(); got != r.ID {
		t.Errorf("root run id %q; want %q", got, r.ID)
	}
	if got := attr(root, "heph.business_key").AsString(); !strings.Contains(got, "A-1") {
		t.Errorf("root business key %q; want the order's", got)
	}
	tree := renderSpans(spans)
	t.Logf("trace:\n%s", tree)
	want := `run example.order (key order::A-1, 1 link)
├── step validate_order (attempt 1, completed)
├── step charge_payment (attempt 1, completed)
├── step reserve_inventory[0] (attempt 1, completed)
├── step reserve_inventory[1] (attempt 1, completed)
├── step ship_order (attempt 1, completed)
└── end example.order (completed)
`
	if got := normalizeSiblings(tree); got != normalizeSiblings(want) {
		t.Errorf("trace tree:\n%s\nwant (siblings in any order):\n%s", tree, want)
	}
	for _, s := range spans {
		if s.SpanContext.SpanID() == root.SpanContext.SpanID() {
			continue
		}
		if s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("%s: parent %s; want the root %s", s.Name, s.Parent.SpanID(), root.SpanContext.SpanID())
		}
		if attr(s, "heph.run.id").AsString() != r.ID || attr(s, "heph.workflow").AsString() != demo.OrderFlow || attr(s, "heph.workflow.version").AsInt64() != 1 {
			t.Errorf("%s: attributes %v; want the run's id, workflow and version", s.Name, s.Attributes)
		}
		if strings.HasPrefix(s.Name, "step ") && (attr(s, "heph.queue").AsString() != "default" || attr(s, "heph.step").AsString() == "" || attr(s, "heph.attempt").AsInt64() != 1) {
			t.Errorf("%s: attributes %v; want queue, step and attempt", s.Name, s.Attributes)
		}
		if s.StartTime.Before(root.StartTime) || s.EndTime.Before(s.StartTime) {
			t.Errorf("%s: %s – %s, root started %s", s.Name, s.StartTime, s.EndTime, root.StartTime)
		}
	}
	if *update {
		writeDocTree(t, tree)
	} else if doc := docTree(t); normalizeSiblings(doc) != normalizeSiblings(tree) {
		t.Errorf("docs/observability.md shows the trace\n%s\nnot this one (go test -run TestTraceFanOutFanIn -update . writes it):\n%s", doc, tree)
	}
}

// normalizeSiblings sorts the lines of a rendered tree, so that siblings
// that started at the same moment compare equal in any order.
func normalizeSiblings(tree string) string {
	lines := strings.Split(strings.TrimSpace(tree), "\n")
	for i, l := range lines {
		lines[i] = strings.NewReplacer("├── ", "", "└── ", "").Replace(l)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

const docBegin, docEnd = "<!-- trace:begin -->\n```\n", "```\n<!-- trace:end -->"

// docParts reads docs/observability.md and returns it with the bounds of
// the tree between its trace markers.
func docParts(t *testing.T) (doc string, from, to int) {
	t.Helper()
	b, err := os.ReadFile("docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	doc = string(b)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatal("docs/observability.md has no trace markers")
	}
	return doc, i + len(docBegin), j
}

// docTree returns the tree between the markers of docs/observability.md.
func docTree(t *testing.T) string {
	doc, from, to := docParts(t)
	return doc[from:to]
}

// writeDocTree puts tree between the markers of docs/observability.md.
func writeDocTree(t *testing.T, tree string) {
	doc, from, to := docParts(t)
	if err := os.WriteFile("docs/observability.md", []byte(doc[:from]+tree+doc[to:]), 0o644); err != nil {
		t.Fatal(err)
	}
}

var (
	traceFirst = workflow.NewActivity("trace.first", func(ctx context.Context, s string) (string, error) {
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return "", flow.NonRetryable(errors.New("the activity runs outside its span"))
		}
		return s + "1", nil
	})
	traceSecondTries atomic.Int32
	traceSecond      = workflow.NewActivity("trace.second", func(ctx context.Context, s string) (string, error) {
		if traceSecondTries.Add(1) == 1 {
			return "", errors.New("flaky")
		}
		return s + "2", nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}})
	traceReplays atomic.Int32
	traceChild   = workflow.New("trace.child", func(ctx workflow.Context, s string) (string, error) {
		return traceFirst.Execute(ctx, s)
	})
	traceParent = workflow.New("trace.parent", func(ctx workflow.Context, s string) (string, error) {
		traceReplays.Add(1) //heph:nondeterministic-ok the test counts (re)plays of the code; no command depends on it
		a, err := traceFirst.Execute(ctx, s)
		if err != nil {
			return "", err
		}
		if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
			return "", err
		}
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return "", err
		}
		b, err := traceSecond.Execute(ctx, a)
		if err != nil {
			return "", err
		}
		return traceChild.ExecuteChild(ctx, b)
	})
	traceHold = workflow.New("trace.hold", func(ctx workflow.Context, _ string) (string, error) {
		return workflow.WaitSignal[string](ctx, "go")
	})
)

// A code-first workflow whose instance is evicted from the sticky cache
// while it waits for a signal, so that its next decision replays its
// history: the replay makes no span. Every activity attempt, the timer and
// the child run appear once, in the parent's trace.
func TestTraceWorkflowReplayedFromEvictedCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tp, exp := newTracing(t)
	c := startClient(t, ctx, &heph.Config{Store: openSQLite(t), TracerProvider: tp, StickyCacheSize: 1, Logger: quietLogger()}, func(c *heph.Client) error {
		return errors.Join(c.RegisterWorkflows(traceParent, traceChild, traceHold), c.RegisterActivities(traceFirst, traceSecond))
	})
	traceReplays.Store(0)
	traceSecondTries.Store(0)

	r, err := heph.StartWorkflow(ctx, c, traceParent, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the first activity's outcome is in and the run waits.
	waitFor(t, ctx, func() bool {
		h, err := c.History(ctx, r.ID)
		return err == nil && slices.ContainsFunc(h, func(e heph.HistoryEvent) bool { return e.Kind == "step_completed" })
	})
	played := traceReplays.Load()
	// Another run takes the only slot of the cache.
	other, err := heph.StartWorkflow(ctx, c, traceHold, "y", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool {
		h, err := c.History(ctx, other.ID)
		return err == nil && len(h) > 0
	})
	if err := r.Signal(ctx, "go", "now"); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Get(ctx); err != nil || out != "x121" {
		t.Fatalf("output %q, %v; want x121", out, err)
	}
	if traceReplays.Load() == played {
		t.Fatal("the workflow was not replayed: the test proves nothing")
	}
	want := map[string]int{"run trace.parent": 1, "run trace.child": 1, "activity trace.first": 2, "activity trace.second": 2,
		"timer": 1, "end trace.parent": 1, "end trace.child": 1}
	waitSpans(t, ctx, exp, want)
	root := rootOf(t, exp.GetSpans(), "run trace.parent")
	// A span is exported when it ends, and a task's span ends after the
	// decision span it holds. A decision may still run after the run
	// ended (CI on b3bf83b read a decision span whose task's span had not
	// ended yet): stop the client, which ends every task it holds, then
	// wait until every parent has been exported too (a parent that never
	// comes fails the wait, and the check below).
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, func() bool { return orphans(inTrace(exp.GetSpans(), root.SpanContext.TraceID()), root) == 0 })
	spans := inTrace(exp.GetSpans(), root.SpanContext.TraceID())
	tree := renderSpans(spans)
	t.Logf("trace:\n%s", tree)
	count := map[string]int{}
	seen := map[string]bool{}
	for _, s := range spans {
		count[s.Name]++
		if strings.HasPrefix(s.Name, "decision ") || strings.HasPrefix(s.Name, "workflow_op ") {
			continue
		}
		key := fmt.Sprintf("%s/%d/%s", s.Name, attr(s, "heph.attempt").AsInt64(), s.Parent.SpanID())
		if seen[key] {
			t.Errorf("span %s (attempt %d) twice under one parent", s.Name, attr(s, "heph.attempt").AsInt64())
		}
		seen[key] = true
	}
	for name, n := range want {
		if count[name] != n {
			t.Errorf("%d spans %q; want %d\n%s", count[name], name, n, tree)
		}
	}
	if count["decision trace.parent"] == 0 {
		t.Errorf("no decision span\n%s", tree)
	}
	child := rootOf(t, spans, "run trace.child")
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	// Every span but the root has its parent in the trace.
	for _, s := range spans {
		if s.SpanContext.SpanID() == root.SpanContext.SpanID() {
			continue
		}
		if _, ok := byID[s.Parent.SpanID()]; !ok {
			t.Errorf("%s: parent %s is not in the trace", s.Name, s.Parent.SpanID())
		}
	}
	if p := byID[child.Parent.SpanID()]; !strings.HasPrefix(p.Name, "workflow_op ") {
		t.Errorf("the child run's root is under %q; want the task that started it", p.Name)
	}
	var retried bool
	for _, s := range spans {
		if s.Name == "activity trace.second" && attr(s, "heph.attempt").AsInt64() == 1 {
			retried = attr(s, "heph.outcome").AsString() == "retried" && s.Status.Code == codes.Error && s.Status.Description == "flaky"
		}
		if s.Name == "timer" && !s.EndTime.After(s.StartTime) {
			t.Errorf("timer span %s – %s; want its wait", s.StartTime, s.EndTime)
		}
	}
	if !retried {
		t.Errorf("the first attempt of trace.second is not marked retried with its error\n%s", tree)
	}
}

// A flow whose two steps run in two processes (each serving the queue of
// one step, each with its own tracer provider, as separate programs would
// have): the spans of both processes are in the run's one trace, under the
// root span the first process made, whose context both read from the
// store.
func TestTraceAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := pgtest.DSN(t)
	open := func() store.Store {
		st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	fb := flow.New("trace.split")
	flow.Step(fb, "here", func(ctx context.Context, in string) (string, error) { return in + "-here", nil }, flow.Queue("qa"))
	flow.Step(fb, "there", func(ctx context.Context, in string) (string, error) { return in + "-there", nil }, flow.Queue("qb"))
	f := fb.Start("here").Edge("here", flow.EventOK, "there").Edge("there", flow.EventOK, flow.Done).MustBuild()
	var exps []*tracetest.InMemoryExporter
	var clients []*heph.Client
	for _, q := range []string{"qa", "qb"} {
		tp, exp := newTracing(t)
		c := startClient(t, ctx, &heph.Config{Store: open(), TracerProvider: tp, Queues: map[string]int{q: 2}, Logger: quietLogger()}, func(c *heph.Client) error {
			return c.Register(f)
		})
		exps, clients = append(exps, exp), append(clients, c)
	}
	r, err := clients[0].Run(ctx, "trace.split", "x", nil)
	if err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("run: %+v, %v", r, err)
	}
	// The second process committed the run's end, after its step.
	waitSpans(t, ctx, exps[0], map[string]int{"run trace.split": 1, "step here": 1})
	waitSpans(t, ctx, exps[1], map[string]int{"step there": 1, "end trace.split": 1})
	a, b := exps[0].GetSpans(), exps[1].GetSpans()
	root := rootOf(t, a, "run trace.split")
	here, there := rootOf(t, a, "step here"), rootOf(t, b, "step there")
	for _, s := range []tracetest.SpanStub{here, there} {
		if s.SpanContext.TraceID() != root.SpanContext.TraceID() || s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("%s: trace %s parent %s; want trace %s parent %s", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(),
				root.SpanContext.TraceID(), root.SpanContext.SpanID())
		}
		if attr(s, "heph.outcome").AsString() != "completed" {
			t.Errorf("%s: outcome %q", s.Name, attr(s, "heph.outcome").AsString())
		}
	}
	for _, s := range a {
		if s.Name == "step there" {
			t.Error("the first process made a span of the step the second ran")
		}
	}
	for _, s := range b {
		if s.Name == "end trace.split" && s.Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("the end span's parent %s; want the root %s", s.Parent.SpanID(), root.SpanContext.SpanID())
		}
		if s.Name == "step here" || strings.HasPrefix(s.Name, "run ") {
			t.Errorf("the second process made span %q", s.Name)
		}
	}
	if n := len(inTrace(append(a, b...), root.SpanContext.TraceID())); n != 4 {
		t.Errorf("%d spans in the trace; want the root, two steps and the end\n%s", n, renderSpans(append(a, b...)))
	}
}

// Without a tracer provider that records (the global no-op one), no run
// gets a trace context.
func TestNoTraceWithoutSDK(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := openSQLite(t)
	c := startClient(t, ctx, &heph.Config{Store: st, Logger: quietLogger()}, func(c *heph.Client) error { return c.Register(echoFlow) })
	r, err := c.Run(ctx, echoFlow.Name(), "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := st.GetRun(ctx, r.ID)
	if err != nil || sr.TraceContext != "" {
		t.Fatalf("trace context %q, %v; want none", sr.TraceContext, err)
	}
}

// startClient starts a client on cfg after register, and stops it when
// the test ends.
func startClient(t *testing.T, ctx context.Context, cfg *heph.Config, register func(c *heph.Client) error) *heph.Client {
	t.Helper()
	c, err := heph.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := register(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// waitSpans waits until exp holds at least want[name] spans of each
// name: a worker ends a task's span after the commit that may end the
// run, so a caller told the run ended may not see its spans yet.
func waitSpans(t *testing.T, ctx context.Context, exp *tracetest.InMemoryExporter, want map[string]int) {
	t.Helper()
	waitFor(t, ctx, func() bool {
		got := map[string]int{}
		for _, s := range exp.GetSpans() {
			got[s.Name]++
		}
		for name, n := range want {
			if got[name] < n {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatal("condition never held")
		}
		time.Sleep(5 * time.Millisecond) // polling for the state, not timing it
	}
}

var update = flag.Bool("update", false, "write the rendered trace into docs/observability.md")

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// A remote worker's attempt: the claim hands the worker the run's
// traceparent, and the span of the attempt is made when the outcome it
// reported commits, under the run's root.
func TestTraceRemoteAttempt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tp, exp := newTracing(t)
	fb := flow.New("trace.remote")
	flow.Remote(fb, "ext", "trace.ext")
	f := fb.Start("ext").Edge("ext", flow.EventOK, flow.Done).MustBuild()
	c := startClient(t, ctx, &heph.Config{Store: openSQLite(t), TracerProvider: tp, Logger: quietLogger()}, func(c *heph.Client) error { return c.Register(f) })
	r, err := c.StartRun(ctx, "trace.remote", map[string]int{"n": 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.ClaimRemote(ctx, &heph.RemoteClaim{WorkerID: "py-1", Actions: []string{"trace.ext"}, Wait: time.Minute})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v, %v", tasks, err)
	}
	if err := c.CompleteRemote(ctx, tasks[0].Token, []byte(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.WaitRun(ctx, r.ID); err != nil || got.Status != heph.StatusCompleted {
		t.Fatalf("run: %+v, %v", got, err)
	}
	waitSpans(t, ctx, exp, map[string]int{"run trace.remote": 1, "step ext": 1, "end trace.remote": 1})
	root := rootOf(t, exp.GetSpans(), "run trace.remote")
	if tp := tasks[0].TraceParent; tp == "" || !strings.Contains(tp, root.SpanContext.TraceID().String()) || !strings.Contains(tp, root.SpanContext.SpanID().String()) {
		t.Errorf("the claimed task's traceparent %q; want the root span %s/%s", tp, root.SpanContext.TraceID(), root.SpanContext.SpanID())
	}
	ext := rootOf(t, exp.GetSpans(), "step ext")
	if ext.Parent.SpanID() != root.SpanContext.SpanID() || !attr(ext, "heph.remote").AsBool() || attr(ext, "heph.outcome").AsString() != "completed" {
		t.Errorf("remote attempt span: parent %s, attributes %v", ext.Parent.SpanID(), ext.Attributes)
	}
	if ext.EndTime.Before(ext.StartTime) || ext.StartTime.Before(root.StartTime) {
		t.Errorf("remote attempt span %s – %s", ext.StartTime, ext.EndTime)
	}
}

// A run started through the HTTP API with a W3C traceparent header is
// linked to the caller's span: the server reads the header with its
// propagator.
func TestTraceCallerOverHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tp, exp := newTracing(t)
	st := openSQLite(t)
	c := startClient(t, ctx, &heph.Config{Store: st, TracerProvider: tp, Logger: quietLogger()}, func(c *heph.Client) error { return c.Register(echoFlow) })
	srv, err := server.New(&server.Config{Client: c, Store: st, Insecure: true, Logger: quietLogger(), Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/api/v1/runs", strings.NewReader(`{"name":"`+echoFlow.Name()+`","input":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", caller)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST /api/v1/runs: %s", resp.Status)
	}
	waitSpans(t, ctx, exp, map[string]int{"run " + echoFlow.Name(): 1})
	root := rootOf(t, exp.GetSpans(), "run "+echoFlow.Name())
	if len(root.Links) != 1 || root.Links[0].SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" ||
		root.Links[0].SpanContext.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("root links %+v; want the caller's span from the header", root.Links)
	}
	if root.SpanContext.TraceID().String() == "0af7651916cd43dd8448eb211c80319c" {
		t.Error("the run joined the caller's trace; want a trace of its own, linked")
	}
}

// orphans counts the spans of a trace, other than its root, whose parent
// is not among them.
func orphans(spans []tracetest.SpanStub, root tracetest.SpanStub) int {
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext.SpanID()] = true
	}
	n := 0
	for _, s := range spans {
		if s.SpanContext.SpanID() != root.SpanContext.SpanID() && !ids[s.Parent.SpanID()] {
			n++
		}
	}
	return n
}
