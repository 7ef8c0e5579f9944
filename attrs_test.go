package hephaestus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Search attributes on each backend: set at start (a typo or a value of
// the wrong type is refused, naming the attribute), upserted by step code
// with the step's result (a typo fails the step, naming it), read back with
// the run and filtered by ListOptions.Where.
func TestSearchAttributes(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			b := flow.New("attrs.order").SearchAttribute("amount", flow.AttrInt).
				SearchAttribute("region", flow.AttrKeywordList).SearchAttribute("updated", flow.AttrTime).
				SearchAttribute("stage", flow.AttrKeyword)
			flow.Step(b, "ship", func(ctx context.Context, in int) (int, error) {
				if in < 0 {
					return 0, flow.SetSearchAttributes(ctx, map[string]any{"stgae": "x"})
				}
				return in, flow.SetSearchAttributes(ctx, map[string]any{"stage": "shipped", "amount": in * 2})
			}, flow.Retry(flow.RetryPolicy{MaxAttempts: 1}))
			c := startClient(t, ctx, &heph.Config{Store: open(t), Logger: quietLogger()},
				func(c *heph.Client) error { return c.Register(b.MustBuild()) })

			_, err := c.StartRun(ctx, "attrs.order", 1, &heph.StartOptions{SearchAttributes: map[string]any{"amout": 1}})
			if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `did you mean "amount"`) {
				t.Fatalf("a typo at start: %v", err)
			}
			_, err = c.StartRun(ctx, "attrs.order", 1, &heph.StartOptions{SearchAttributes: map[string]any{"amount": "many"}})
			if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "amount") {
				t.Fatalf("a string for an int: %v", err)
			}
			day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			var ids []string
			for i, in := range []int{40, 150, -1} {
				r, err := c.StartRun(ctx, "attrs.order", in, &heph.StartOptions{SearchAttributes: map[string]any{
					"amount": in, "region": []string{"eu", []string{"us", "apac", "eu"}[i]}, "updated": day.Add(time.Duration(i-1) * time.Hour)}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.ID)
			}
			for _, id := range ids {
				if _, err := c.WaitRun(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			bad, err := c.GetRun(ctx, ids[2])
			if err != nil || bad.Status != hephtype.StatusFailed || !strings.Contains(bad.Error, `"stgae" is not declared`) {
				t.Fatalf("the step with a typo: %v %+v", err, bad)
			}
			got, err := c.GetRun(ctx, ids[1])
			if err != nil {
				t.Fatal(err)
			}
			if got.SearchAttributes["stage"] != "shipped" || got.SearchAttributes["amount"] != int64(300) {
				t.Fatalf("attributes after the step: %#v", got.SearchAttributes)
			}
			for _, tc := range []struct {
				where string
				want  []string
			}{
				{"amount > 100", []string{ids[1]}},
				{"stage = shipped", []string{ids[1], ids[0]}},
				{"region in [us, apac]", []string{ids[1], ids[0]}},
				{"updated < 2026-11-01", []string{ids[0]}},
				{"amount between 0 and 100 and region = eu", []string{ids[0]}},
			} {
				l, err := c.ListRuns(ctx, &heph.ListOptions{Where: tc.where})
				if err != nil {
					t.Fatalf("where %s: %v", tc.where, err)
				}
				var gotIDs []string
				for _, r := range l.Runs {
					gotIDs = append(gotIDs, r.ID)
				}
				if strings.Join(gotIDs, ",") != strings.Join(tc.want, ",") {
					t.Errorf("where %s: %v, want %v", tc.where, gotIDs, tc.want)
				}
			}
			if _, err := c.ListRuns(ctx, &heph.ListOptions{Where: "amout > 1"}); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `did you mean "amount"`) {
				t.Fatalf("a typo in where: %v", err)
			}
		})
	}
}

// A job kind declares search attributes: an insert sets them, the job's
// code upserts them with its result, lists filter by them (each backend).
func TestJobSearchAttributes(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			kind := job.MustNew("attrs.mail", func(ctx context.Context, j *job.Job[int]) error {
				return flow.SetSearchAttributes(ctx, map[string]any{"sent": true})
			}, &job.Options[int]{SearchAttributes: map[string]flow.AttrType{"tenant": flow.AttrKeyword, "sent": flow.AttrBool}})
			c := startClient(t, ctx, &heph.Config{Store: open(t), Logger: quietLogger()},
				func(c *heph.Client) error { return c.RegisterJobs(kind) })
			if _, err := heph.InsertJob(ctx, c, kind, 1, &heph.JobOptions{SearchAttributes: map[string]any{"tenat": "a"}}); !errors.Is(err, heph.ErrInvalidInput) {
				t.Fatalf("a typo: %v", err)
			}
			var ids []string
			for _, tenant := range []string{"acme", "globex"} {
				j, err := heph.InsertJob(ctx, c, kind, 1, &heph.JobOptions{SearchAttributes: map[string]any{"tenant": tenant}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.WaitRun(ctx, j.ID); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			l, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "attrs.mail", Where: "tenant = acme and sent = true"})
			if err != nil || len(l.Runs) != 1 || l.Runs[0].ID != ids[0] {
				t.Fatalf("where: %v %+v", err, l)
			}
		})
	}
}

// wfAttrsInput is the input of the attrs.wf test workflow.
type wfAttrsInput struct {
	Amount int  `json:"amount"`
	Typo   bool `json:"typo"`
}

// A workflow declares search attributes: a start sets them (a typo is
// refused), workflow code upserts them replay-safely, an activity upserts
// them with its result, lists filter by them (each backend). The
// workflow's second decision runs in another client, which replays the
// first upsert: replay applies nothing again (the activity's later value
// of "stage" survives it) and the history holds each upsert once.
func TestWorkflowSearchAttributes(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			charge := workflow.NewActivity("attrs.charge", func(ctx context.Context, amount int) (int, error) {
				if err := workflow.UpsertActivitySearchAttributes(ctx, map[string]any{"charged": "yes"}); err == nil || !strings.Contains(err.Error(), "charged") {
					return 0, fmt.Errorf("a string for a bool was taken: %v", err)
				}
				return amount * 2, workflow.UpsertActivitySearchAttributes(ctx, map[string]any{"stage": "charged", "charged": true})
			})
			wf := workflow.New("attrs.wf", func(ctx workflow.Context, in wfAttrsInput) (int, error) {
				if in.Typo {
					return 0, workflow.UpsertSearchAttributes(ctx, map[string]any{"stgae": "x"})
				}
				if err := workflow.UpsertSearchAttributes(ctx, map[string]any{"stage": "charging"}); err != nil {
					return 0, err
				}
				out, err := charge.Execute(ctx, in.Amount)
				if err != nil {
					return 0, err
				}
				if _, err := workflow.WaitSignal[string](ctx, "go"); err != nil {
					return 0, err
				}
				return out, workflow.UpsertSearchAttributes(ctx, map[string]any{"amount": out})
			}).SearchAttribute("amount", flow.AttrInt).SearchAttribute("stage", flow.AttrKeyword).SearchAttribute("charged", flow.AttrBool)
			st := open(t)
			register := func(c *heph.Client) error {
				if err := c.RegisterActivities(charge); err != nil {
					return err
				}
				return c.RegisterWorkflows(wf)
			}
			c1, err := heph.New(&heph.Config{Store: st, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			if err := register(c1); err != nil {
				t.Fatal(err)
			}
			if err := c1.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c1.Stop(context.Background()) }()

			_, err = c1.StartWorkflow(ctx, "attrs.wf", wfAttrsInput{Amount: 1}, &heph.WorkflowOptions{SearchAttributes: map[string]any{"amout": 1}})
			if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `did you mean "amount"`) {
				t.Fatalf("a typo at start: %v", err)
			}
			typo, err := c1.StartWorkflow(ctx, "attrs.wf", wfAttrsInput{Typo: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := c1.WaitRun(ctx, typo.ID); r == nil || r.Status != hephtype.StatusFailed || !strings.Contains(r.Error, `search attribute "stgae" is not declared by workflow attrs.wf; did you mean "stage"`) {
				t.Fatalf("a typo in workflow code: %v %+v", err, r)
			}
			r, err := c1.StartWorkflow(ctx, "attrs.wf", wfAttrsInput{Amount: 21}, &heph.WorkflowOptions{SearchAttributes: map[string]any{"amount": 21}})
			if err != nil {
				t.Fatal(err)
			}
			if r.SearchAttributes["stage"] != "charging" || r.SearchAttributes["amount"] != int64(21) {
				t.Fatalf("after the first decision: %#v", r.SearchAttributes)
			}
			waitFor(t, ctx, func() bool {
				got, err := c1.GetRun(ctx, r.ID)
				return err == nil && got.SearchAttributes["charged"] == true
			})
			got, err := c1.GetRun(ctx, r.ID)
			if err != nil || got.SearchAttributes["stage"] != "charged" {
				t.Fatalf("after the activity: %v %#v", err, got.SearchAttributes)
			}
			l, err := c1.ListRuns(ctx, &heph.ListOptions{Flow: "attrs.wf", Where: "stage = charged and charged = true and amount = 21"})
			if err != nil || len(l.Runs) != 1 || l.Runs[0].ID != r.ID {
				t.Fatalf("where (the workflow named): %v %+v", err, l)
			}
			if err := c1.Stop(ctx); err != nil {
				t.Fatal(err)
			}

			// Another client: it replays the history, first upsert included.
			c2 := startClient(t, ctx, &heph.Config{Store: st, Logger: quietLogger()}, register)
			if err := c2.SignalWorkflow(ctx, r.ID, "go", "now"); err != nil {
				t.Fatal(err)
			}
			done, err := c2.WaitRun(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"stage": "charged", "charged": true, "amount": int64(42)}
			if fmt.Sprint(done.SearchAttributes) != fmt.Sprint(want) {
				t.Fatalf("at the end: %#v, want %#v", done.SearchAttributes, want)
			}
			h, err := c2.History(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range h {
				if e.Kind == hephtype.EventAttributesUpserted {
					n++
				}
			}
			if n != 2 {
				t.Fatalf("%d search_attributes_upserted entries, want 2", n)
			}
			l, err = c2.ListRuns(ctx, &heph.ListOptions{Where: "amount >= 42 and stage = charged"})
			if err != nil || len(l.Runs) != 1 || l.Runs[0].ID != r.ID {
				t.Fatalf("where (any definition): %v %+v", err, l)
			}
			if _, err := c2.ListRuns(ctx, &heph.ListOptions{Flow: "attrs.wf", Where: "stgae = x"}); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), `did you mean "stage"`) {
				t.Fatalf("a typo in where: %v", err)
			}
		})
	}
}

// A remote worker upserts search attributes with its result, for a remote
// step of a flow and for an activity of a workflow: an attribute not
// declared, or of the wrong type, is refused, naming it, and writes
// nothing (the claim still holds, and the next completion commits); the
// attributes are written with the result (each backend).
func TestRemoteSearchAttributes(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			fb := flow.New("attrs.remote").SearchAttribute("stage", flow.AttrKeyword)
			flow.Remote(fb, "ext", "attrs.ext")
			f := fb.Start("ext").Edge("ext", flow.EventOK, flow.Done).MustBuild()
			ext := workflow.NewActivity("attrs.remote_act", func(ctx context.Context, in int) (int, error) { return in, nil })
			wf := workflow.New("attrs.remote_wf", func(ctx workflow.Context, in int) (int, error) {
				return ext.Execute(ctx, in)
			}).SearchAttribute("score", flow.AttrFloat)
			c := startClient(t, ctx, &heph.Config{Store: open(t), Logger: quietLogger()}, func(c *heph.Client) error {
				if err := c.Register(f); err != nil {
					return err
				}
				return c.RegisterWorkflows(wf) // the activity is not registered here: a remote worker runs it
			})
			fr, err := c.StartRun(ctx, "attrs.remote", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			wr, err := c.StartWorkflow(ctx, "attrs.remote_wf", 7, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				run, action, activity string
				bad, good             map[string]any
				badMsg                string
			}{
				{fr.ID, "attrs.ext", "", map[string]any{"stgae": "x"}, map[string]any{"stage": "sent"}, `did you mean "stage"`},
				{wr.ID, "", "attrs.remote_act", map[string]any{"score": "high"}, map[string]any{"score": 0.5}, "score"},
			} {
				claim := &heph.RemoteClaim{WorkerID: "py-1", Wait: time.Minute}
				if tc.action != "" {
					claim.Actions = []string{tc.action}
				} else {
					claim.Activities = []string{tc.activity}
				}
				tasks, err := c.ClaimRemote(ctx, claim)
				if err != nil || len(tasks) != 1 || tasks[0].RunID != tc.run {
					t.Fatalf("claim: %v, %v", tasks, err)
				}
				err = c.CompleteRemoteWith(ctx, tasks[0].Token, []byte(`1`), &heph.CompleteOptions{SearchAttributes: tc.bad})
				if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), tc.badMsg) {
					t.Fatalf("bad attributes: %v", err)
				}
				if got, err := c.GetRun(ctx, tc.run); err != nil || got.Status.Terminal() || len(got.SearchAttributes) != 0 {
					t.Fatalf("after bad attributes: %v %+v", err, got)
				}
				if err := c.CompleteRemoteWith(ctx, tasks[0].Token, []byte(`1`), &heph.CompleteOptions{SearchAttributes: tc.good}); err != nil {
					t.Fatal(err)
				}
				got, err := c.WaitRun(ctx, tc.run)
				if err != nil || got.Status != heph.StatusCompleted || fmt.Sprint(got.SearchAttributes) != fmt.Sprint(tc.good) {
					t.Fatalf("the run: %v %+v", err, got)
				}
			}
		})
	}
}
