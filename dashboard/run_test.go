package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The run page's tests add a flow that fails once per key ("flaky"), a
// document with an approval gate ("expense"), a code-first workflow with
// an update, a signal and a query ("tally") and a job kind ("mail").

// flakyIn is the input of the flaky flow.
type flakyIn struct {
	Key string `json:"key"`
}

// flakyFailed holds the keys whose work step has failed once: it fails
// the first time for each key, for good, and succeeds on a retry.
var flakyFailed sync.Map

func flakyFlow() *flow.Flow {
	b := flow.New("flaky")
	flow.Input[flakyIn](b)
	flow.Step(b, "prepare", func(ctx context.Context, in flakyIn) (flakyIn, error) { return in, nil })
	flow.Step(b, "work", func(ctx context.Context, in flakyIn) (string, error) {
		if _, failed := flakyFailed.LoadOrStore(in.Key, true); !failed {
			return "", flow.NonRetryable(errors.New("the first try of " + in.Key + " fails"))
		}
		return "worked " + in.Key, nil
	})
	return b.Start("prepare").Edge("prepare", flow.EventOK, "work").Edge("work", flow.EventOK, flow.Done).MustBuild()
}

// expenseDoc checks a claim, waits at an open approval gate, then pays
// (approved) or tells (rejected).
const expenseDoc = `name: expense
steps:
  check:
    action: test.check
    args: {amount: "{{input.amount}}"}
    next: approval
  approval:
    approval:
      prompt: "Pay this claim?"
    on: {approved: pay, rejected: tell}
  pay:
    action: test.pay
    args: {amount: "{{steps.check.output}}"}
    done: true
  tell:
    action: test.pay
    args: {amount: 0}
    done: true
`

// tallyState is what a tally publishes.
type tallyState struct {
	Total int `json:"total"`
}

var (
	addUpdate    = workflow.NewUpdate[int, int]("add")
	finishSignal = workflow.NewSignal[string]("finish")
	totalQuery   = workflow.NewQuery[struct{}, int]("total")
	tallyStart   = workflow.NewActivity("tally.start", func(ctx context.Context, n int) (int, error) { return n, nil })
)

// tallyWorkflow starts from its input (through an activity), adds what
// the add updates send until the finish signal, and returns the total.
var tallyWorkflow = workflow.New("tally", func(ctx workflow.Context, start int) (int, error) {
	n, err := tallyStart.Execute(ctx, start)
	if err != nil {
		return 0, err
	}
	st := tallyState{Total: n}
	workflow.Publish(ctx, st)
	st, err = workflow.Phase(ctx, st,
		workflow.HandleUpdate(addUpdate, func(ctx workflow.Context, add int, st tallyState) (workflow.Reply[tallyState, int], error) {
			st.Total += add
			workflow.Publish(ctx, st)
			return workflow.Respond(st, st.Total), nil
		}),
		workflow.HandleSignal(finishSignal, func(ctx workflow.Context, _ string, st tallyState) workflow.Next[tallyState] {
			return workflow.Stop(st)
		}),
	)
	return st.Total, err
}).Declare(addUpdate, finishSignal)

func init() {
	workflow.HandleQuery(tallyWorkflow, totalQuery, func(s tallyState, _ struct{}) (int, error) { return s.Total, nil })
}

// kidWorkflow doubles its input; familyWorkflow runs it twice as its
// child and adds the results.
var (
	kidWorkflow    = workflow.New("kid", func(ctx workflow.Context, n int) (int, error) { return 2 * n, nil })
	familyWorkflow = workflow.New("family", func(ctx workflow.Context, n int) (int, error) {
		a, err := kidWorkflow.ExecuteChild(ctx, n)
		if err != nil {
			return 0, err
		}
		b, err := kidWorkflow.ExecuteChild(ctx, n+1)
		return a + b, err
	})
)

// mailArgs are a mail job's.
type mailArgs struct {
	To string `json:"to"`
}

var mailKind = job.MustNew("mail", func(ctx context.Context, j *job.Job[mailArgs]) error { return nil }, nil)

func registerRunDefinitions(ctx context.Context, c *heph.Client) error {
	if err := c.Register(flakyFlow()); err != nil {
		return err
	}
	if err := c.RegisterWorkflows(tallyWorkflow, kidWorkflow, familyWorkflow); err != nil {
		return err
	}
	if err := c.RegisterActivities(tallyStart); err != nil {
		return err
	}
	if err := c.RegisterJobs(mailKind); err != nil {
		return err
	}
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "test.check", func(ctx context.Context, _ flowdoc.ActionCall, in struct {
		Amount int `json:"amount"`
	}) (int, error) {
		return in.Amount, nil
	}); err != nil {
		return err
	}
	if err := flowdoc.RegisterAction(reg, "test.pay", func(ctx context.Context, _ flowdoc.ActionCall, in struct {
		Amount int `json:"amount"`
	}) (string, error) {
		return fmt.Sprintf("paid %d", in.Amount), nil
	}); err != nil {
		return err
	}
	if _, err := c.PutDocument(ctx, "expense", heph.DocumentYAML, []byte(expenseDoc)); err != nil {
		return err
	}
	return c.RegisterDocuments(ctx, reg)
}

// kindRun is a run and the kind the surfaces must name.
type kindRun struct{ id, kind string }

// startEveryKind starts a run of each kind of registerRunDefinitions: a
// flow, a document, a workflow and a job, in that order.
func (e *env) startEveryKind() []kindRun {
	e.t.Helper()
	ctx := context.Background()
	flowRun := e.start("order", order{ID: "a1", Amount: 10})
	doc, err := e.client.StartDocument(ctx, "expense", 0, map[string]int{"amount": 3}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	wf, err := e.client.StartWorkflow(ctx, "tally", 1, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	mail, err := heph.InsertJob(ctx, e.client, mailKind, mailArgs{To: "ops@example.com"}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return []kindRun{{flowRun, "flow"}, {doc.ID, "document"}, {wf.ID, "workflow"}, {mail.ID, "job"}}
}

// apiRun reads a run through the API, as the server answers it.
func (e *env) apiRun(id string) *server.Run {
	e.t.Helper()
	res, err := httpGet(e.url+"/api/v1/runs/"+id, e.admin)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("GET /api/v1/runs/%s: %d %s", id, res.StatusCode, b)
	}
	r := &server.Run{}
	if err := json.NewDecoder(res.Body).Decode(r); err != nil {
		e.t.Fatal(err)
	}
	return r
}

// confirm fills the open dialog's fields (by name) and confirms it.
func (b *browser) confirm(what string, values map[string]string) {
	b.t.Helper()
	actions := []chromedp.Action{chromedp.WaitVisible("#confirm", chromedp.ByQuery)}
	for name, v := range values {
		actions = append(actions, chromedp.SendKeys(fmt.Sprintf(`#confirm-fields [name=%q]`, name), v, chromedp.ByQuery))
	}
	actions = append(actions, chromedp.Click("#confirm-yes", chromedp.ByQuery))
	b.run(what, actions...)
	b.waitJS(what+": the dialog closed", `!document.querySelector("#confirm").open`)
}

// The DAG shows each step in the state the API gives it (a step that is
// queued or running as running), for runs that hold completed, failed,
// skipped and waiting steps between them; the steps table agrees.
func TestRunPageDAGStates(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	ok := e.start("order", order{ID: "a1", Amount: 10})
	bad := e.start("order", order{ID: "b2", Amount: 5000})
	invalid := e.start("order", order{ID: "c3", Amount: 0})
	gate := e.start("gate", nil)
	e.waitStatus(ok, heph.StatusCompleted)
	e.waitStatus(bad, heph.StatusFailed)
	e.waitStatus(invalid, heph.StatusCompleted)
	e.waitStatus(gate, heph.StatusWaiting)

	b := newBrowser(t)
	seen := map[string]bool{}
	for _, id := range []string{ok, bad, invalid, gate} {
		b.open(e.url + "/runs/" + id)
		var nodes map[string]string
		b.eval(`Object.fromEntries(Array.from(document.querySelectorAll("#run-dag svg g.node")).map(n => [n.dataset.step, n.dataset.state]))`, &nodes)
		var rows map[string]string
		b.eval(`Object.fromEntries(Array.from(document.querySelectorAll("#run-steps tr[data-step]")).map(r => [r.dataset.step, r.dataset.status]))`, &rows)
		run := e.apiRun(id)
		if len(run.Steps) == 0 {
			t.Fatalf("run %s: the API gives no steps", id)
		}
		inRun := map[string]bool{}
		for _, s := range run.Steps {
			inRun[s.Name] = true
			want := s.Status
			if want == "scheduled" {
				want = "running"
			}
			got, drawn := nodes[s.Name]
			if !drawn {
				t.Errorf("run %s: step %s is not in the picture (nodes %v)", id, s.Name, nodes)
				continue
			}
			if got != want {
				t.Errorf("run %s: step %s is drawn %q, the API says %q", id, s.Name, got, s.Status)
			}
			if rows[s.Name] != s.Status {
				t.Errorf("run %s: the steps table says %s is %q, the API %q", id, s.Name, rows[s.Name], s.Status)
			}
			seen[got] = true
		}
		for name, state := range nodes {
			if !inRun[name] && state != "" {
				t.Errorf("run %s: node %s is drawn %q, but the run has no such step", id, name, state)
			}
		}
		if _, ok := nodes["_start"]; !ok {
			t.Errorf("run %s: the picture has no start node: %v", id, nodes)
		}
		b.noErrors("the run page of " + id)
	}
	for _, st := range []string{"completed", "failed", "skipped", "waiting"} {
		if !seen[st] {
			t.Errorf("no step was drawn %s: %v", st, seen)
		}
	}
}

// Cancel a waiting run from its page: the API then says it is cancelled
// with the reason given, and the page's header follows without a reload.
func TestRunPageCancel(t *testing.T) {
	e := newEnv(t, false, registerRunDefinitions)
	id := e.start("gate", nil)
	e.waitStatus(id, heph.StatusWaiting)

	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/runs/" + id)
	if n := b.count("#action-retry"); n != 0 {
		t.Errorf("a waiting run offers retry")
	}
	if n := b.count("#action-resume-hold"); n != 1 {
		t.Errorf("the waiting step hold offers no resume")
	}
	b.eval(`window.loadedOnce = true`, nil)
	b.run("cancel", jsClick("#action-cancel"))
	b.confirm("cancel the run", map[string]string{"reason": "no longer needed"})
	e.waitStatus(id, heph.StatusCancelled)
	if r := e.apiRun(id); r.Status != "cancelled" || !strings.Contains(r.Error, "no longer needed") {
		t.Errorf("after the cancel the API says %s, error %q", r.Status, r.Error)
	}
	b.waitJS("the header says cancelled", `document.querySelector("#run-header").dataset.status === "cancelled"`)
	var same bool
	b.eval(`window.loadedOnce === true`, &same)
	if !same {
		t.Error("the page reloaded instead of refreshing its parts")
	}
	if n := b.count("#action-cancel"); n != 0 {
		t.Error("a cancelled run still offers cancel")
	}
	b.noErrors("cancelling a run")
}

// Approve a document's approval gate from the run page, with a comment:
// the run completes through the paying branch, and the gate's output
// records the decision, its actor and its comment.
func TestRunPageApprove(t *testing.T) {
	e := newEnv(t, false, registerRunDefinitions)
	r, err := e.client.StartDocument(context.Background(), "expense", 0, map[string]int{"amount": 120}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := r.ID
	e.waitStatus(id, heph.StatusWaiting)

	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/runs/" + id)
	if kind := b.text("#run-header .kind-name"); kind != "document" {
		t.Errorf("the header says the kind is %q, want document", kind)
	}
	if n := b.count("#action-resume-approval"); n != 0 {
		t.Error("an approval gate is offered as a plain resume")
	}
	b.run("approve", jsClick("#action-approve-approval"))
	if p := b.text("#confirm-text"); p != "Pay this claim?" {
		t.Errorf("the dialog asks %q, want the gate's prompt", p)
	}
	b.confirm("approve the gate", map[string]string{"comment": "receipt checked"})
	e.waitStatus(id, heph.StatusCompleted)
	run := e.apiRun(id)
	steps := map[string]server.StepJSON{}
	for _, s := range run.Steps {
		steps[s.Name] = s
	}
	gate := steps["approval"]
	var decision struct {
		Actor   string `json:"actor"`
		Comment string `json:"comment"`
	}
	if err := json.Unmarshal(gate.Output, &decision); err != nil {
		t.Fatalf("the gate's output %s: %v", gate.Output, err)
	}
	if gate.Event != "approved" || decision.Comment != "receipt checked" || decision.Actor != "ops" {
		t.Errorf("the gate ended with event %q and decision %+v, want approved by ops with the comment", gate.Event, decision)
	}
	if steps["pay"].Status != "completed" || steps["tell"].Status != "skipped" {
		t.Errorf("pay is %q and tell %q, want completed and skipped", steps["pay"].Status, steps["tell"].Status)
	}
	b.waitJS("the page shows the run completed", `document.querySelector("#run-header").dataset.status === "completed"`)
	b.waitJS("the history shows the decision", `Array.from(document.querySelectorAll("#run-history td")).some(td => td.textContent.includes("resumed with approved by ops"))`)
	b.noErrors("approving a gate")
}

// Retry a failed run from its page: the step that failed runs again and
// succeeds, and the API says the run completed.
func TestRunPageRetry(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	id := e.start("flaky", flakyIn{Key: "retry-" + t.Name()})
	e.waitStatus(id, heph.StatusFailed)

	b := newBrowser(t)
	b.open(e.url + "/runs/" + id)
	if msg := b.text("#run-error"); !strings.Contains(msg, "first try") {
		t.Errorf("the header's error says %q", msg)
	}
	if n := b.count("#action-cancel"); n != 0 {
		t.Error("a failed run offers cancel")
	}
	b.run("retry", jsClick("#action-retry"))
	b.confirm("retry the run", nil)
	e.waitStatus(id, heph.StatusCompleted)
	run := e.apiRun(id)
	if run.Status != "completed" || !strings.Contains(string(run.Output), "worked retry-") {
		t.Errorf("after the retry the API says %s with output %s", run.Status, run.Output)
	}
	for _, s := range run.Steps {
		if s.Name == "work" && s.Attempts < 2 {
			t.Errorf("work ran %d attempts, want the retry's too", s.Attempts)
		}
	}
	b.noErrors("retrying a run")
}

// Query, update and signal a code-first workflow from its page: the
// query and the update show their answers, the published state follows,
// and the signal ends the run with the total.
func TestRunPageWorkflowMessages(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	r, err := e.client.StartWorkflow(context.Background(), "tally", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := r.ID
	b := newBrowser(t)
	b.open(e.url + "/runs/" + id)
	b.waitJS("the state is published", `(document.querySelector("#run-state")?.textContent || "").includes('"total": 2')`)

	b.run("query", jsClick("#action-query"))
	b.confirm("query total", map[string]string{"name": "total"})
	b.waitJS("the query's answer", `!document.querySelector("#action-answer").hidden`)
	var answer struct {
		Result int `json:"result"`
	}
	var text string
	b.eval(`document.querySelector("#action-answer").textContent`, &text)
	if err := json.Unmarshal([]byte(text), &answer); err != nil || answer.Result != 2 {
		t.Errorf("the query answered %q (%v), want result 2", text, err)
	}

	b.run("update", jsClick("#action-update"))
	b.confirm("update add", map[string]string{"name": "add", "args": "5"})
	b.waitJS("the update's answer", `(document.querySelector("#action-answer").textContent || "").includes('"stage": "completed"')`)
	b.eval(`document.querySelector("#action-answer").textContent`, &text)
	if err := json.Unmarshal([]byte(text), &answer); err != nil || answer.Result != 7 {
		t.Errorf("the update answered %q (%v), want result 7", text, err)
	}
	b.waitJS("the state follows", `(document.querySelector("#run-state")?.textContent || "").includes('"total": 7')`)
	// The update's name is now offered in the dialog.
	b.run("update again", jsClick("#action-update"), chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	var offered []string
	b.eval(`Array.from(document.querySelectorAll("#confirm-fields datalist option")).map(o => o.value)`, &offered)
	if strings.Join(offered, ",") != "add" {
		t.Errorf("the update dialog offers %v, want [add]", offered)
	}
	b.run("close the dialog", chromedp.Click("#confirm-no", chromedp.ByQuery))

	b.run("signal", jsClick("#action-signal"))
	b.confirm("signal finish", map[string]string{"name": "finish", "payload": `"by the test"`})
	e.waitStatus(id, heph.StatusCompleted)
	if run := e.apiRun(id); string(run.Output) != "7" {
		t.Errorf("the workflow returned %s, want 7", run.Output)
	}
	b.waitJS("the header says completed", `document.querySelector("#run-header").dataset.status === "completed"`)
	b.noErrors("messages to a workflow")
}

// The page of a run of each kind loads with no error in the browser and
// draws a picture; a run whose definition this server does not know
// lists its steps and says why there is no picture; the history's
// download link answers the history as JSON.
func TestRunPageEveryKind(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	ctx := context.Background()
	runs := e.startEveryKind()
	flowRun, doc, mail := runs[0].id, runs[1].id, runs[3].id
	// A run of a flow that only another process registered: this server
	// cannot draw its graph.
	other, err := heph.New(&heph.Config{Store: e.store})
	if err != nil {
		t.Fatal(err)
	}
	remote := flow.New("remote")
	flow.Step(remote, "far", func(ctx context.Context, in any) (string, error) { return "", nil })
	if err := other.Register(remote.Start("far").Edge("far", flow.EventOK, flow.Done).MustBuild()); err != nil {
		t.Fatal(err)
	}
	unknown, err := other.StartRun(ctx, "remote", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(flowRun, heph.StatusCompleted)
	e.waitStatus(doc, heph.StatusWaiting)
	e.waitStatus(mail, heph.StatusCompleted)

	b := newBrowser(t)
	for _, c := range runs {
		b.open(e.url + "/runs/" + c.id)
		if k := b.text("#run-header .kind-name"); k != c.kind {
			t.Errorf("run %s: the header says %q, want %s", c.id, k, c.kind)
		}
		if n := b.count("#run-dag svg g.node"); n < 2 {
			t.Errorf("the %s run's picture has %d nodes", c.kind, n)
		}
		if n := b.count("#run-timeline svg"); n != 1 {
			t.Errorf("the %s run's page has no timeline", c.kind)
		}
		if n := b.count("#run-history tr[data-seq]"); n == 0 {
			t.Errorf("the %s run's page lists no history", c.kind)
		}
		b.noErrors("the page of a " + c.kind + " run")
	}
	if n := b.count("#action-approve-approval"); n != 0 {
		t.Error("a job's page offers an approval")
	}

	// The download link: the API's history, as JSON, with a file name.
	b.open(e.url + "/runs/" + flowRun)
	var dl struct {
		Name   string `json:"name"`
		Events int    `json:"events"`
		Kinds  string `json:"kinds"`
	}
	b.run("fetch the download", chromedp.Evaluate(`(async () => {
		const a = document.querySelector("#history-download");
		const res = await fetch(a.href, {credentials: "same-origin"});
		const h = await res.json();
		return {name: a.getAttribute("download"), events: h.events.length, kinds: h.events.map(e => e.kind).join(",")};
	})()`, &dl, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if dl.Name != "run-"+flowRun+"-history.json" || dl.Events == 0 || !strings.HasPrefix(dl.Kinds, "run_started") || !strings.Contains(dl.Kinds, "run_completed") {
		t.Errorf("the download link: %+v", dl)
	}
	if n := b.count("#run-history tr[data-seq]"); n != dl.Events {
		t.Errorf("the page lists %d entries, the download has %d", n, dl.Events)
	}
	b.noErrors("the download")

	b.open(e.url + "/runs/" + unknown.ID)
	if msg := b.text("#no-dag"); !strings.Contains(msg, "not known to this server") {
		t.Errorf("a run of an unknown definition says %q", msg)
	}
	if n, want := b.count(`#run-steps tr[data-step]`), len(e.apiRun(unknown.ID).Steps); n != want {
		t.Errorf("the run of an unknown definition lists %d steps, the API %d", n, want)
	}
	if n := b.count("#run-steps table.steps"); n != 1 {
		t.Error("the run of an unknown definition has no steps table")
	}
	b.noErrors("the page of a run of an unknown definition")

	res, err := httpGet(e.url+"/runs/0190aaaa-0000-7000-8000-000000000000", "")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "404") {
		t.Errorf("the page of a run that does not exist answers %d", res.StatusCode)
	}
}

// A workflow's page links the children it started, and a child's page
// links its parent, as the API relates them.
func TestRunPageFamily(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	r, err := e.client.StartWorkflow(context.Background(), "family", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusCompleted)
	if run := e.apiRun(r.ID); string(run.Output) != "14" {
		t.Fatalf("the family returned %s, want 6+8", run.Output)
	}

	b := newBrowser(t)
	b.open(e.url + "/runs/" + r.ID)
	var kids []string
	b.eval(`Array.from(document.querySelectorAll("#run-children li a")).map(a => a.getAttribute("href"))`, &kids)
	if len(kids) != 2 {
		t.Fatalf("the parent's page links %v, want its two children", kids)
	}
	if n := b.count("#run-parent"); n != 0 {
		t.Error("a run started by nobody shows a parent")
	}
	if s := b.text("#run-build"); s != e.client.BuildID() {
		t.Errorf("the run's build reads %q, want the client's %q", s, e.client.BuildID())
	}
	b.noErrors("the parent's page")
	for _, href := range kids {
		id := strings.TrimPrefix(href, "/runs/")
		child := e.apiRun(id)
		if child.ParentID != r.ID || child.Workflow != "kid" || child.Status != "completed" {
			t.Errorf("the linked run %s is a %s run, %s, with parent %q", id, child.Workflow, child.Status, child.ParentID)
		}
		b.open(e.url + href)
		var parent string
		b.eval(`document.querySelector("#run-parent a")?.getAttribute("href") || ""`, &parent)
		if parent != "/runs/"+r.ID {
			t.Errorf("the child's page links its parent as %q", parent)
		}
		b.noErrors("a child's page")
	}
}

// A reader may query a workflow from its page (the API admits the read
// role) and sees no other action.
func TestRunPageReaderQueries(t *testing.T) {
	e := newEnv(t, false, registerRunDefinitions)
	r, err := e.client.StartWorkflow(context.Background(), "tally", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, reader, err := server.NewToken(context.Background(), e.store.(store.Admin), &server.TokenParams{Principal: "viewer", Role: server.RoleRead}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t)
	b.login(e.url, reader)
	b.open(e.url + "/runs/" + r.ID)
	b.waitJS("the state is published", `(document.querySelector("#run-state")?.textContent || "").includes('"total": 3')`)
	if n := b.count("#run-actions button[data-api]"); n != 1 {
		t.Errorf("a reader sees %d action buttons, want the query alone", n)
	}
	b.run("query", jsClick("#action-query"))
	b.confirm("query total", map[string]string{"name": "total"})
	b.waitJS("the query's answer", `(document.querySelector("#action-answer").textContent || "").includes('"result": 3')`)
	b.noErrors("a reader's query")
}
