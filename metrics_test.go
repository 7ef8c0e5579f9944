package hephaestus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/metrics/metricstest"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// workload runs a known mix on a started client: a flow whose step fails
// once and is retried (tagged, with metadata), a flow that fails, a flow
// run cancelled while it waits, a job, and a workflow with an activity.
// It returns the run ids by name.
func workload(t *testing.T, ctx context.Context, c *heph.Client) map[string]string {
	t.Helper()
	var tries atomic.Int32
	fb := flow.New("flaky")
	flow.Step(fb, "try", func(ctx context.Context, in string) (string, error) {
		if tries.Add(1) == 1 {
			return "", errors.New("transient")
		}
		return "ok", nil
	}, flow.Retry(flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	bb := flow.New("broken")
	flow.Step(bb, "boom", func(ctx context.Context, in string) (string, error) {
		return "", flow.NonRetryable(errors.New("bad input"))
	})
	gb := flow.New("gate")
	flow.EventStep(gb, "hold", func(ctx context.Context, in string) (flow.Result[string], error) {
		return flow.Wait[string](), nil
	}, flow.Waits(0))
	mail := job.MustNew("mail", func(ctx context.Context, j *job.Job[string]) error { return nil }, nil)
	for _, f := range []*flow.Flow{fb.MustBuild(), bb.MustBuild(), gb.MustBuild()} {
		if err := c.Register(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RegisterJobs(mail); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	r, err := c.Run(ctx, "flaky", "x", &heph.StartOptions{Tags: []string{"t1"}, Metadata: map[string]any{"team": "core"}})
	if err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("flaky: %+v, %v; want completed", r, err)
	}
	ids["flaky"] = r.ID
	r, err = c.Run(ctx, "broken", "x", nil)
	if err != nil || r.Status != heph.StatusFailed {
		t.Fatalf("broken: %+v, %v; want failed", r, err)
	}
	ids["broken"] = r.ID
	r, err = c.StartRun(ctx, "gate", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	ids["gate"] = r.ID
	for r.Status != heph.StatusWaiting {
		if ctx.Err() != nil {
			t.Fatalf("gate never waited: %+v", r)
		}
		time.Sleep(5 * time.Millisecond) // polling for the state, not timing it
		if r, err = c.GetRun(ctx, ids["gate"]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.CancelRun(ctx, ids["gate"], "enough"); err != nil {
		t.Fatal(err)
	}
	j, err := heph.InsertJob(ctx, c, mail, "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	ids["mail"] = j.ID
	if r, err = c.WaitRun(ctx, j.ID); err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("mail job: %+v, %v", r, err)
	}
	wr, err := c.StartWorkflow(ctx, "echo", "hi", nil)
	if err != nil {
		t.Fatal(err)
	}
	ids["echo"] = wr.ID
	if r, err = c.WaitRun(ctx, wr.ID); err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("echo workflow: %+v, %v", r, err)
	}
	return ids
}

// registerEcho registers the echo workflow and its activity, which
// workload runs.
func registerEcho(c *heph.Client) error {
	return errors.Join(c.RegisterWorkflows(echoWorkflow), c.RegisterActivities(echoActivity))
}

func openSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	return openSQLiteAt(t, filepath.Join(t.TempDir(), "h.db"))
}

func TestMetricsAfterKnownWorkload(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	c := startClient(t, ctx, &heph.Config{Store: openSQLite(t), PollInterval: 20 * time.Millisecond, MeterProvider: mp}, registerEcho)
	workload(t, ctx, c)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := metricstest.Flatten(rm)
	want := map[string]float64{
		"heph.runs.started{kind=flow,workflow=flaky}":                                         1,
		"heph.runs.started{kind=flow,workflow=broken}":                                        1,
		"heph.runs.started{kind=flow,workflow=gate}":                                          1,
		"heph.runs.started{kind=flow,workflow=mail}":                                          1,
		"heph.runs.started{kind=workflow,workflow=echo}":                                      1,
		"heph.runs.completed{kind=flow,workflow=flaky}":                                       1,
		"heph.runs.completed{kind=flow,workflow=mail}":                                        1,
		"heph.runs.completed{kind=workflow,workflow=echo}":                                    1,
		"heph.runs.failed{kind=flow,workflow=broken}":                                         1,
		"heph.runs.cancelled{kind=flow,workflow=gate}":                                        1,
		"heph.step.retries{queue=default,step=try,workflow=flaky}":                            1,
		"heph.step.duration{outcome=retried,queue=default,step=try,workflow=flaky}":           1,
		"heph.step.duration{outcome=completed,queue=default,step=try,workflow=flaky}":         1,
		"heph.step.duration{outcome=failed,queue=default,step=boom,workflow=broken}":          1,
		"heph.step.duration{outcome=completed,queue=default,step=hold,workflow=gate}":         1,
		"heph.activity.duration{outcome=completed,queue=default,step=echo.say,workflow=echo}": 1,
		"heph.run.duration{kind=flow,status=cancelled,workflow=gate}":                         1,
		"heph.runs.blocked{}":                         0,
		"heph.runs.active{status=running}":            0,
		"heph.queue.depth{queue=default,state=ready}": 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// Every attempt run here was claimed and waited in its queue: two
	// of flaky, one each of broken, gate, mail, the activity, and the
	// workflow's tasks.
	if n := got["heph.task.claims{queue=default,task_kind=step}"]; n != 5 {
		t.Errorf("step claims %v, want 5", n)
	}
	if n := got["heph.task.queue_wait{queue=default,step=try,task_kind=step,workflow=flaky}"]; n != 2 {
		t.Errorf("queue waits of flaky's step %v, want 2", n)
	}
	for _, name := range []string{"heph.commit.batch_size{}", "heph.commit.duration{}"} {
		if got[name] < 1 {
			t.Errorf("%s recorded %v times, want some", name, got[name])
		}
	}
	for k := range got {
		if strings.Contains(k, "run_id") || strings.Contains(k, "run=") {
			t.Errorf("a series names a run: %s", k)
		}
	}
	if t.Failed() {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			t.Logf("%s = %v", k, got[k])
		}
	}
}

func TestEventsOfEachModel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var events []heph.Event
	c := startClient(t, ctx, &heph.Config{Store: openSQLite(t), PollInterval: 20 * time.Millisecond}, func(c *heph.Client) error {
		c.Subscribe(func(e heph.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		})
		return registerEcho(c)
	})
	ids := workload(t, ctx, c)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	of := func(run string) (out []string, evs []heph.Event) {
		for _, e := range events {
			if e.RunID == run && (strings.HasPrefix(string(e.Kind), "run.") || strings.HasPrefix(string(e.Kind), "step.")) {
				s := string(e.Kind)
				if e.Step != "" {
					s += " " + e.Step + fmt.Sprint("#", e.Attempt)
				}
				if e.Retry {
					s += " retry"
				}
				out = append(out, s)
				evs = append(evs, e)
			}
		}
		return out, evs
	}
	wants := map[string][]string{
		"flaky":  {"run.started", "step.started try#1", "step.failed try#1 retry", "step.started try#2", "step.completed try#2", "run.completed"},
		"broken": {"run.started", "step.started boom#1", "step.failed boom#1", "run.failed"},
		"gate":   {"run.started", "step.started hold#1", "step.completed hold#1", "run.cancelled"},
		"mail":   {"run.started", "step.started job#1", "step.completed job#1", "run.completed"},
		"echo":   {"run.started", "step.started echo.say#1", "step.completed echo.say#1", "run.completed"},
	}
	for name, want := range wants {
		got, evs := of(ids[name])
		if !slices.Equal(got, want) {
			t.Errorf("%s: events\n  %q\nwant\n  %q", name, got, want)
		}
		for _, e := range evs {
			committed := e.Kind != heph.StepStarted
			if committed && e.RunKind == "" {
				t.Errorf("%s: %s carries no run kind", name, e.Kind)
			}
			if name != "flaky" {
				continue
			}
			if !slices.Contains(e.Tags, "t1") || string(e.Metadata["team"]) != `"core"` {
				t.Errorf("flaky: %s carries tags %v, metadata %s; want the run's", e.Kind, e.Tags, e.Metadata)
			}
		}
	}
	// The worker's own events: started, polled, stopped; a commit.
	kinds := map[heph.EventKind]int{}
	for _, e := range events {
		kinds[e.Kind]++
	}
	for _, k := range []heph.EventKind{heph.WorkerStarted, heph.WorkerPoll, heph.WorkerStopped, heph.CommitCompleted, heph.TaskStarted, heph.TaskCompleted} {
		if kinds[k] == 0 {
			t.Errorf("no %s event; got %v", k, kinds)
		}
	}
}

// TestEventsCarryRunTags: every event of a run, those the process doing
// the work emits (task.*, step.started, decision.*) as well as the
// committer's, carries the run's tags and metadata, which each task of
// the run copies when it is inserted: a tagged flow run, workflow run and
// job. The workflow is started and signalled by a second client of the
// same database that does not have it, so that decision tasks (not the
// sender, inline) make its decisions.
func TestEventsCarryRunTags(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "h.db")
	newClient := func() *heph.Client {
		st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		c, err := heph.New(&heph.Config{Store: st, PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		return c
	}
	c, sender := newClient(), newClient()
	fb := flow.New("tagged")
	flow.Step(fb, "one", func(ctx context.Context, in string) (string, error) { return in, nil })
	if err := c.Register(fb.MustBuild()); err != nil {
		t.Fatal(err)
	}
	mail := job.MustNew("tagged-mail", func(ctx context.Context, j *job.Job[string]) error { return nil }, nil)
	if err := c.RegisterJobs(mail); err != nil {
		t.Fatal(err)
	}
	signalled := workflow.New("signalled", func(ctx workflow.Context, in string) (string, error) {
		out, err := echoActivity.Execute(ctx, in)
		if err != nil {
			return "", err
		}
		s, err := workflow.WaitSignal[string](ctx, "go")
		return out + s, err
	})
	if err := c.RegisterWorkflows(signalled); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterActivities(echoActivity); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []heph.Event
	changed := make(chan struct{}, 1)
	collect := func(e heph.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	for _, c := range []*heph.Client{c, sender} {
		c.Subscribe(collect)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	meta := func(model string) map[string]any { return map[string]any{"model": model, "n": 7} }
	tags := map[string][]string{} // by run id
	fr, err := c.StartRun(ctx, "tagged", "x", &heph.StartOptions{Tags: []string{"flow", "shared"}, Metadata: meta("flow")})
	if err != nil {
		t.Fatal(err)
	}
	tags[fr.ID] = []string{"flow", "shared"}
	// The sender knows the workflow only from c's record in the worker
	// registry, which c's maintenance writes when it starts: wait for it.
	var wr *heph.Run
	waitFor(t, ctx, func() bool {
		wr, err = sender.StartWorkflow(ctx, "signalled", "hi", &heph.WorkflowOptions{Tags: []string{"workflow"}, Metadata: meta("workflow")})
		if err != nil && !errors.Is(err, heph.ErrWorkflowNotFound) {
			t.Fatal(err)
		}
		return err == nil
	})
	tags[wr.ID] = []string{"workflow"}
	jr, err := heph.InsertJob(ctx, c, mail, "hi", &heph.JobOptions{Tags: []string{"job"}, Metadata: meta("job")})
	if err != nil {
		t.Fatal(err)
	}
	tags[jr.ID] = []string{"job"}
	models := map[string]string{fr.ID: "flow", wr.ID: "workflow", jr.ID: "job"}

	// Wait for the events themselves: every kind each run must report;
	// the workflow is signalled once its activity completed.
	common := []heph.EventKind{heph.RunStarted, heph.TaskStarted, heph.StepStarted, heph.StepCompleted, heph.TaskCompleted}
	want := map[string][]heph.EventKind{fr.ID: common, jr.ID: common, wr.ID: common}
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]map[heph.EventKind]bool{}
		for _, e := range events {
			if seen[e.RunID] == nil {
				seen[e.RunID] = map[heph.EventKind]bool{}
			}
			seen[e.RunID][e.Kind] = true
		}
		var out []string
		for id, kinds := range want {
			for _, k := range kinds {
				if !seen[id][k] {
					out = append(out, models[id]+" "+string(k))
				}
			}
		}
		return out
	}
	waitFor := func() {
		t.Helper()
		for m := missing(); len(m) > 0; m = missing() {
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("events never reported: %v", m)
			}
		}
	}
	waitFor()
	if err := sender.SignalWorkflow(ctx, wr.ID, "go", "!"); err != nil {
		t.Fatal(err)
	}
	for id := range want {
		want[id] = append(want[id], heph.RunCompleted)
	}
	want[wr.ID] = append(want[wr.ID], heph.DecisionStarted, heph.DecisionCompleted)
	waitFor()
	for _, c := range []*heph.Client{c, sender} {
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	counts := map[string]int{}
	for _, e := range events {
		if e.RunID == "" {
			continue
		}
		model, ok := models[e.RunID]
		if !ok {
			t.Errorf("%s of run %s, which the test did not start", e.Kind, e.RunID)
			continue
		}
		counts[model]++
		keys := 2
		if model == "job" {
			keys = 3 // and the runtime's mark of a job's run
			if string(e.Metadata["job"]) != "true" {
				t.Errorf("job: %s carries metadata %s; want the job mark", e.Kind, e.Metadata)
			}
		}
		if !slices.Equal(e.Tags, tags[e.RunID]) || len(e.Metadata) != keys || string(e.Metadata["model"]) != `"`+model+`"` ||
			string(e.Metadata["n"]) != "7" {
			t.Errorf("%s: %s (task %d, %s %s) carries tags %q, metadata %s; want %q and the run's metadata", model, e.Kind, e.TaskID,
				e.TaskKind, e.Step, e.Tags, e.Metadata, tags[e.RunID])
		}
	}
	t.Logf("events checked per run: %v", counts)
}

func TestLogEvents(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log := heph.LogEvents(logger, nil)
	log(heph.Event{Kind: heph.StepFailed, RunID: "r1", Workflow: "orders", RunKind: heph.KindFlow, Step: "charge", Index: -1, Attempt: 2,
		Queue: "default", Duration: 1500 * time.Millisecond, Retry: true, Tags: []string{"vip"},
		Metadata: map[string]json.RawMessage{"team": json.RawMessage(`"core"`)}, Err: errors.New("card declined")})
	log(heph.Event{Kind: heph.WorkerPoll, Queue: "default", Count: 3}) // Debug: below the logger's level
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("want exactly one JSON record, got %q: %v", buf.String(), err)
	}
	want := map[string]any{
		"level": "WARN", "msg": "step.failed", "run": "r1", "workflow": "orders", "run_kind": "flow", "step": "charge",
		"attempt": float64(2), "queue": "default", "duration": float64(1500 * time.Millisecond), "retry": true,
		"err": "card declined", "metadata": map[string]any{"team": `"core"`}, "tags": []any{"vip"},
	}
	for k, v := range want {
		if fmt.Sprint(rec[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v (record %s)", k, rec[k], v, buf.String())
		}
	}
	if _, ok := rec["index"]; ok {
		t.Errorf("index -1 (not a map element) was logged: %s", buf.String())
	}
	buf.Reset()
	heph.LogEvents(logger, func(heph.Event) slog.Level { return slog.LevelError })(heph.Event{Kind: heph.WorkerPoll, Queue: "q"})
	if !strings.Contains(buf.String(), `"level":"ERROR"`) || !strings.Contains(buf.String(), `"msg":"worker.poll"`) {
		t.Errorf("a custom level: %s", buf.String())
	}
}
