package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	gold "github.com/hephaestus-go/hephaestus/internal/golden"
	"github.com/hephaestus-go/hephaestus/internal/graphtext"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var update = flag.Bool("update", false, "record the fixtures of real runs and rewrite the testdata/*.golden files")

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	gold.Check(t, name, got, *update, "go test ./dashboard -update")
}

// fixture is a recorded run: its history, the run as the API shows it,
// and, for a flow, its definition's graph.
type fixture struct {
	Run    *server.Run
	Events []server.Event
	Graph  *graphtext.Graph
}

// The fixtures recorded from real runs (TestRecordFixtures).
var fixtureNames = []string{"order", "order_failed", "doc_gate", "checkout", "checkout_child"}

func loadFixture(t *testing.T, name string) *fixture {
	t.Helper()
	f := &fixture{}
	read := func(suffix string, v any) bool {
		b, err := os.ReadFile(filepath.Join("testdata", name+suffix))
		if errors.Is(err, os.ErrNotExist) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s%s: %v", name, suffix, err)
		}
		return true
	}
	if !read(".history.json", &f.Events) || !read(".run.json", &f.Run) {
		t.Fatalf("fixture %s is missing: run go test ./dashboard -run TestRecordFixtures -update", name)
	}
	var g graphtext.Graph
	if read(".graph.json", &g) {
		f.Graph = &g
	}
	return f
}

// TestRecordFixtures runs real flows, a document and a code-first
// workflow on an SQLite file and writes their histories under testdata;
// it runs only with -update.
func TestRecordFixtures(t *testing.T) {
	if !*update {
		t.Skip("records the fixtures with -update only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "rec.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 8}, MinPollInterval: 5 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	order := recOrderFlow()
	gate := recGateDoc(t)
	if err := c.Register(order, gate); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(recShip, recCheckout); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterActivities(recReserve, recCharge, recNotify, recLabel); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()

	// A flow: fan-out, a retried step, a map with a failing element, a wait.
	r, err := c.StartRun(ctx, "order", recOrder{ID: "o-1", Items: []int{3, 5, 7}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, c, r.ID, func(r *heph.Run) bool {
		for _, s := range r.Steps {
			if s.Name == "approve" && s.Status == "waiting" {
				return true
			}
		}
		return false
	})
	if err := c.ResumeRun(ctx, r.ID, "approved", &heph.ResumeOptions{Step: "approve", Payload: map[string]string{"by": "ann"}}); err != nil {
		t.Fatal(err)
	}
	record(ctx, t, c, "order", r.ID, graphtext.Of(order))

	// The same flow failing: the charge is declined on every attempt (its
	// failure routes to refund), and element 1 of the map never gets a
	// price, which fails the run.
	r, err = c.StartRun(ctx, "order", recOrder{ID: "o-2", Items: []int{1, 2}, Decline: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	record(ctx, t, c, "order_failed", r.ID, graphtext.Of(order))

	// A document with an approval gate.
	r, err = c.StartRun(ctx, "doc-gate", map[string]string{"title": "plan"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, c, r.ID, func(r *heph.Run) bool {
		for _, s := range r.Steps {
			if s.Name == "request_approval" && s.Status == "waiting" {
				return true
			}
		}
		return false
	})
	if _, err := c.Approve(ctx, r.ID, "request_approval", heph.Actor{ID: "ann"}, "looks good"); err != nil {
		t.Fatal(err)
	}
	record(ctx, t, c, "doc_gate", r.ID, graphtext.Of(gate))

	// A code-first workflow: a phase ended by a signal, an activity, a
	// parallel pair (one retried), a timer and a child.
	wr, err := heph.StartWorkflow(ctx, c, recCheckout, "ada", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := heph.SendSignal(ctx, c, wr.ID, recAdd, "ABC-123"); err != nil {
		t.Fatal(err)
	}
	if err := heph.SendSignal(ctx, c, wr.ID, recDone, struct{}{}); err != nil {
		t.Fatal(err)
	}
	record(ctx, t, c, "checkout", wr.ID, nil)
	kids, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "ship", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(kids.Runs) != 1 {
		t.Fatalf("%d runs of the child workflow, want 1", len(kids.Runs))
	}
	record(ctx, t, c, "checkout_child", kids.Runs[0].ID, nil)
}

func waitFor(ctx context.Context, t *testing.T, c *heph.Client, id string, ok func(*heph.Run) bool) {
	t.Helper()
	for {
		r, err := c.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(r) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s: %v before the expected state: %+v", id, ctx.Err(), r)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// record waits for the run to end and writes its fixture.
func record(ctx context.Context, t *testing.T, c *heph.Client, name, id string, g *graphtext.Graph) {
	t.Helper()
	r, err := c.WaitRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.History(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	run := &server.Run{ID: r.ID, Kind: string(r.Kind), Workflow: r.Flow, Version: r.Version, Status: string(r.Status),
		Error: r.Error, Input: r.Input, Output: r.Output, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), Tags: []string{}}
	if !r.FinishedAt.IsZero() {
		f := r.FinishedAt.UTC()
		run.FinishedAt = &f
	}
	for _, s := range r.Steps {
		run.Steps = append(run.Steps, server.StepJSON{Name: s.Name, Status: string(s.Status), Attempts: s.Attempt, Event: s.Event, Output: s.Output})
	}
	evs := make([]server.Event, 0, len(h))
	for _, e := range h {
		evs = append(evs, server.Event{Seq: e.Seq, Kind: string(e.Kind), Step: e.Step, Index: e.Index, Attempt: e.Attempt,
			Name: e.Name, Data: e.Data, Error: e.Error, At: e.At.UTC()})
	}
	write := func(suffix string, v any) {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", name+suffix), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".history.json", evs)
	write(".run.json", run)
	if g != nil {
		write(".graph.json", g)
	}
}

type recOrder struct {
	ID      string `json:"id"`
	Items   []int  `json:"items"`
	Decline bool   `json:"decline"`
}

// recOrderFlow: validate fans out to charge_payment (declined once, then
// retried), price_items (a map whose element 5 fails once) and
// reserve_inventory; they join at the approve gate, then ship.
func recOrderFlow() *flow.Flow {
	var charges, prices atomic.Int32
	b := flow.New("order").Version(3)
	flow.Input[recOrder](b)
	flow.Step(b, "validate_order", func(ctx context.Context, o recOrder) ([]int, error) {
		time.Sleep(20 * time.Millisecond)
		return o.Items, nil
	})
	flow.Step(b, "charge_payment", func(ctx context.Context, _ json.RawMessage) (string, error) {
		o, err := flow.RunInput[recOrder](ctx)
		if err != nil {
			return "", err
		}
		time.Sleep(30 * time.Millisecond)
		if o.Decline || charges.Add(1) == 1 {
			return "", errors.New("card declined")
		}
		return "ch_1", nil
	}, flow.DependsOn("validate_order"), flow.Retry(flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: 150 * time.Millisecond}))
	flow.Map(b, "price_items", func(ctx context.Context, n int) (int, error) {
		time.Sleep(time.Duration(n) * 5 * time.Millisecond)
		if n == 1 {
			return 0, errors.New("no price for item 1")
		}
		if n == 5 && prices.Add(1) == 1 {
			return 0, errors.New("price service unavailable")
		}
		return n * 100, nil
	}, flow.DependsOn("validate_order"), flow.Retry(flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond}))
	flow.Step(b, "reserve_inventory", func(ctx context.Context, _ json.RawMessage) (string, error) {
		time.Sleep(40 * time.Millisecond)
		return "north", nil
	}, flow.DependsOn("validate_order"))
	flow.EventStep(b, "approve", func(ctx context.Context, _ json.RawMessage) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("approved", "rejected"), flow.Waits(time.Hour))
	flow.Step(b, "ship_order", func(ctx context.Context, _ json.RawMessage) (string, error) {
		time.Sleep(25 * time.Millisecond)
		return "track-1", nil
	})
	flow.Step(b, "refund", func(ctx context.Context, _ json.RawMessage) (string, error) { return "refunded", nil })
	return b.
		Edge("charge_payment", flow.EventOK, "approve").
		Edge("charge_payment", flow.EventFailed, "refund").
		Edge("price_items", flow.EventOK, "approve").
		Edge("reserve_inventory", flow.EventOK, "approve").
		Edge("approve", "approved", "ship_order").
		Edge("approve", "rejected", "refund").
		Edge("approve", flow.EventTimeout, flow.Done).
		Edge("ship_order", flow.EventOK, flow.Done).
		Edge("refund", flow.EventOK, flow.Done).
		MustBuild()
}

const recGateYAML = `
name: doc-gate
steps:
  draft:
    action: draft
    args: {title: "{{input.title}}"}
    next: request_approval
  request_approval:
    approval:
      prompt: "Publish the plan?"
      assignees: {users: [ann]}
      deadline: 1h
    on: {approved: publish, rejected: done, expired: done}
  publish:
    action: publish
    args: {title: "{{input.title}}"}
    done: true
`

func recGateDoc(t *testing.T) *flow.Flow {
	reg := flowdoc.NewRegistry()
	type title struct {
		Title string `json:"title"`
	}
	for _, n := range []string{"draft", "publish"} {
		if err := flowdoc.RegisterAction(reg, n, func(ctx context.Context, c flowdoc.ActionCall, in title) (string, error) {
			time.Sleep(15 * time.Millisecond)
			return n + " " + in.Title, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := flowdoc.Load("gate.yaml", []byte(recGateYAML), reg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var (
	recAdd  = workflow.NewSignal[string]("add_item")
	recDone = workflow.NewSignal[struct{}]("checkout")

	recCharges atomic.Int32
	recReserve = workflow.NewActivity("reserve", func(ctx context.Context, items []string) (string, error) {
		time.Sleep(20 * time.Millisecond)
		return "north", nil
	})
	recCharge = workflow.NewActivity("charge", func(ctx context.Context, n int) (string, error) {
		time.Sleep(30 * time.Millisecond)
		if recCharges.Add(1) == 1 {
			return "", errors.New("gateway timeout")
		}
		return fmt.Sprintf("ch_%d", n), nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: 120 * time.Millisecond}})
	recNotify = workflow.NewActivity("notify", func(ctx context.Context, who string) (string, error) {
		time.Sleep(25 * time.Millisecond)
		return "sent to " + who, nil
	})
	recLabel = workflow.NewActivity("label", func(ctx context.Context, n int) (string, error) {
		time.Sleep(10 * time.Millisecond)
		return fmt.Sprintf("label-%d", n), nil
	})

	recShip = workflow.New("ship", func(ctx workflow.Context, n int) (string, error) {
		return recLabel.Execute(ctx, n)
	})

	recCheckout = workflow.New("checkout", func(ctx workflow.Context, customer string) (string, error) {
		items, err := workflow.Phase(ctx, []string(nil),
			workflow.HandleSignal(recAdd, func(ctx workflow.Context, sku string, s []string) workflow.Next[[]string] {
				return workflow.Continue(append(s, sku))
			}),
			workflow.HandleSignal(recDone, func(ctx workflow.Context, _ struct{}, s []string) workflow.Next[[]string] {
				return workflow.Stop(s)
			}))
		if err != nil {
			return "", err
		}
		if _, err := recReserve.Execute(ctx, items); err != nil {
			return "", err
		}
		rs := workflow.Parallel(ctx,
			func(ctx workflow.Context) (string, error) { return recCharge.Execute(ctx, len(items)) },
			func(ctx workflow.Context) (string, error) { return recNotify.Execute(ctx, customer) })
		for _, r := range rs {
			if r.Err != nil {
				return "", r.Err
			}
		}
		if err := workflow.Sleep(ctx, 200*time.Millisecond); err != nil {
			return "", err
		}
		label, err := recShip.ExecuteChild(ctx, len(items))
		if err != nil {
			return "", err
		}
		return strings.Join([]string{rs[0].Value, label}, " "), nil
	}).Declare(recAdd, recDone)
)

// eventKinds reads the event kinds hephtype declares, so that a kind
// added there fails TestDescribeEveryKind until describeEvent knows it.
func eventKinds(t *testing.T) []string {
	t.Helper()
	fset := gotoken.NewFileSet()
	file, err := parser.ParseFile(fset, filepath.Join("..", "hephtype", "hephtype.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range file.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != gotoken.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "EventKind" {
				continue
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					kinds = append(kinds, s)
				}
			}
		}
	}
	if len(kinds) < 30 {
		t.Fatalf("found %d event kinds in hephtype: %q", len(kinds), kinds)
	}
	return kinds
}

func TestDescribeEveryKind(t *testing.T) {
	for _, k := range eventKinds(t) {
		for _, e := range []server.Event{
			{Kind: k},
			{Kind: k, Step: "charge_payment", Attempt: 2, Name: "approved", Error: "card declined", Data: json.RawMessage(`{"after":"1h0m0s"}`)},
			{Kind: k, Index: 3, Attempt: 1, Name: "charge", Data: json.RawMessage(`"5s"`)},
		} {
			got := describeEvent(e)
			if got == "" || strings.HasPrefix(got, "entry ") || strings.Contains(got, "_") && !strings.Contains(got, "charge_payment") {
				t.Errorf("describeEvent(%+v) = %q", e, got)
			}
		}
	}
	if got := describeEvent(server.Event{Kind: "something_new", Step: "s"}); got != "entry something_new of step s" {
		t.Errorf("an unknown kind: %q", got)
	}
}

func TestDescribeEvent(t *testing.T) {
	at := func(name string, seq int64) server.Event {
		for _, e := range loadFixture(t, name).Events {
			if e.Seq == seq {
				return e
			}
		}
		t.Fatalf("%s has no entry %d", name, seq)
		return server.Event{}
	}
	for _, c := range []struct {
		e    server.Event
		want string
	}{
		{at("order", 1), "run started"},
		{at("order", 6), "map step price_items expanded to 3 elements"},
		{at("order", 11), "step price_items element 1 attempt 1 failed: price service unavailable"},
		{at("order", 14), "step charge_payment attempt 1 failed: card declined"},
		{at("order", 15), "step charge_payment retries as attempt 2 in 140ms"},
		{at("order", 23), "step charge_payment attempt 2 started on worker a1f59562a33d"},
		{at("order", 28), "timer 1h of step approve started"},
		{at("order", 30), `step approve resumed with approved`},
		{at("order", 32), "step refund skipped"},
		{at("order", 35), "run completed"},
		{at("order_failed", 27), `run failed: step "price_items" failed: element 0: no price for item 1`},
		{at("doc_gate", 10), `step request_approval resumed with approved by ann ("looks good")`},
		{at("checkout", 1), "run of checkout started"},
		{at("checkout", 5), "signal checkout received"},
		{at("checkout", 12), "activity notify #3 scheduled"},
		{at("checkout", 17), "activity charge #2 attempt 1 failed: gateway timeout; it retries as attempt 2 in 127ms"},
		{at("checkout", 21), "timer 200ms #4 started"},
		{at("checkout", 24), "child workflow ship #5 started"},
		{server.Event{Kind: "update_completed", Name: "add_item", Error: "full"}, "update add_item failed: full"},
		{server.Event{Kind: "step_completed", Step: "validate", Name: "invalid"}, "step validate completed with event invalid"},
	} {
		if got := describeEvent(c.e); got != c.want {
			t.Errorf("describeEvent(%d %s) = %q, want %q", c.e.Seq, c.e.Kind, got, c.want)
		}
	}
}

// TestDescribeGolden writes every recorded history as readable lines.
func TestDescribeGolden(t *testing.T) {
	for _, name := range fixtureNames {
		var b strings.Builder
		for _, e := range loadFixture(t, name).Events {
			fmt.Fprintf(&b, "%3d %s\n", e.Seq, describeEvent(e))
		}
		golden(t, name+".history.txt", b.String())
	}
}
