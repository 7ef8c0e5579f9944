package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// fastRetry retries at once (a millisecond), without jitter.
var fastRetry = flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Jitter: -1}

// stepsDoc's action "flaky" fails its first call; "declined" always
// fails.
const stepsDoc = `
name: steps-doc
steps:
  try:
    action: flaky
    retry: {max_attempts: 3, initial_backoff: 1ms, max_backoff: 1ms, jitter: -1}
    next: charge
  charge:
    action: declined
    retry: {max_attempts: 1}
    done: true
`

// stepsEnv serves a client whose definitions, of each kind, retry a step
// once and (but for the job) fail a step for good: the flow steps-flow
// (flaky, then boom), the job steps-job, the document steps-doc and the
// workflow steps-wf (activity fetch, retried once).
func stepsEnv(t *testing.T, b backend) *env {
	t.Helper()
	st := b.open(t)
	c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var flowCalls, jobCalls, docCalls, actCalls atomic.Int32
	fb := flow.New("steps-flow").BusinessKey("stepsorder", businesskey.ScopeActive)
	flow.Step(fb, "flaky", func(ctx context.Context, in any) (int, error) {
		if flowCalls.Add(1) == 1 {
			return 0, errors.New("first try fails")
		}
		return 1, nil
	}, flow.Retry(fastRetry))
	flow.Step(fb, "boom", func(ctx context.Context, in any) (int, error) {
		return 0, flow.NonRetryable(errors.New("card declined"))
	}, flow.DependsOn("flaky"))
	if err := c.Register(fb.MustBuild()); err != nil {
		t.Fatal(err)
	}
	jb := job.MustNew("steps-job", func(ctx context.Context, j *job.Job[struct{}]) error {
		if jobCalls.Add(1) == 1 {
			return errors.New("mailbox busy")
		}
		return nil
	}, &job.Options[struct{}]{Retry: fastRetry})
	if err := c.RegisterJobs(jb); err != nil {
		t.Fatal(err)
	}
	fetch := workflow.NewActivity("fetch", func(ctx context.Context, s string) (string, error) {
		if actCalls.Add(1) == 1 {
			return "", errors.New("upstream 503")
		}
		return s + "!", nil
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: fastRetry})
	wf := workflow.New("steps-wf", func(ctx workflow.Context, s string) (string, error) {
		return fetch.Execute(ctx, s)
	})
	if err := errors.Join(c.RegisterWorkflows(wf), c.RegisterActivities(fetch)); err != nil {
		t.Fatal(err)
	}
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "flaky", func(ctx context.Context, call flowdoc.ActionCall, in map[string]any) (map[string]any, error) {
		if docCalls.Add(1) == 1 {
			return nil, errors.New("try again")
		}
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := flowdoc.RegisterAction(reg, "declined", func(ctx context.Context, call flowdoc.ActionCall, in map[string]any) (map[string]any, error) {
		return nil, errors.New("card declined")
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.PutDocument(ctx, "steps-doc", heph.DocumentYAML, []byte(stepsDoc)); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return serve(t, st, c, nil)
}

// stepOf returns the named step of a run.
func stepOf(t *testing.T, steps []StepJSON, name string) StepJSON {
	t.Helper()
	var names []string
	for _, s := range steps {
		if s.Name == name {
			return s
		}
		names = append(names, s.Name)
	}
	t.Fatalf("no step %q among %q", name, names)
	return StepJSON{}
}

// checkRetried checks a step that failed once and then completed: two
// attempts, each with a worker, times in order, the first's error.
func checkRetried(t *testing.T, s StepJSON, firstErr string) {
	t.Helper()
	if s.Status != "completed" || s.StartedAt == nil || s.FinishedAt == nil || s.DurationMS == nil || s.Error != "" {
		t.Fatalf("step %s = %+v; want completed with times, no error", s.Name, s)
	}
	if len(s.AttemptDetails) != 2 {
		t.Fatalf("step %s has %d attempt details, want 2: %+v", s.Name, len(s.AttemptDetails), s.AttemptDetails)
	}
	a1, a2 := s.AttemptDetails[0], s.AttemptDetails[1]
	if a1.Number != 1 || a1.Outcome != "retrying" || a1.Error != firstErr || a1.Worker == "" || a1.StartedAt == nil || a1.FinishedAt == nil {
		t.Errorf("step %s attempt 1 = %+v; want retrying with %q, a worker and times", s.Name, a1, firstErr)
	}
	if a2.Number != 2 || a2.Outcome != "completed" || a2.Error != "" || a2.Worker == "" || a2.StartedAt == nil || a2.FinishedAt == nil {
		t.Errorf("step %s attempt 2 = %+v; want completed, a worker and times", s.Name, a2)
	}
	if a1.StartedAt != nil && a2.StartedAt != nil && (!s.StartedAt.Equal(*a1.StartedAt) || a2.StartedAt.Before(*a1.FinishedAt) || s.FinishedAt.Before(*a2.StartedAt)) {
		t.Errorf("step %s: started %v, attempts %v..%v and %v..%v, finished %v: out of order", s.Name, s.StartedAt, a1.StartedAt, a1.FinishedAt, a2.StartedAt, a2.FinishedAt, s.FinishedAt)
	}
}

// checkFailed checks a step that failed for good with its error.
func checkFailed(t *testing.T, s StepJSON, errText string) {
	t.Helper()
	if s.Status != "failed" || !strings.Contains(s.Error, errText) || s.StartedAt == nil || s.FinishedAt == nil {
		t.Fatalf("step %s = %+v; want failed with %q and times", s.Name, s, errText)
	}
	last := s.AttemptDetails[len(s.AttemptDetails)-1]
	if last.Outcome != "failed" || !strings.Contains(last.Error, errText) {
		t.Errorf("step %s last attempt = %+v; want failed with %q", s.Name, last, errText)
	}
}

// Every kind of run shows its steps' times and attempts: a retried step's
// two attempts with their workers and the first's error, a failed step's
// error, in GET /runs/{id} and in GET /runs/{id}/steps (addressed by the
// business id too).
func TestStepTimes(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := stepsEnv(t, b)
		start := func(body map[string]any) string {
			var r Run
			e.api.call(http.MethodPost, "/api/v1/runs", body, http.StatusCreated, &r)
			return r.ID
		}
		t.Run("flow", func(t *testing.T) {
			id := start(map[string]any{"kind": "flow", "name": "steps-flow", "business_value": "f1"})
			r := e.waitStatus(id, heph.StatusFailed)
			checkRetried(t, stepOf(t, r.Steps, "flaky"), "first try fails")
			checkFailed(t, stepOf(t, r.Steps, "boom"), "card declined")
			var list StepList
			e.api.call(http.MethodGet, "/api/v1/runs/stepsorder::f1/steps", nil, http.StatusOK, &list)
			if len(list.Steps) != len(r.Steps) || stepOf(t, list.Steps, "boom").Error != stepOf(t, r.Steps, "boom").Error {
				t.Errorf("GET /steps = %+v, want the run's steps %+v", list.Steps, r.Steps)
			}
		})
		t.Run("job", func(t *testing.T) {
			id := start(map[string]any{"kind": "job", "name": "steps-job", "input": map[string]any{}})
			r := e.waitStatus(id, heph.StatusCompleted)
			if len(r.Steps) != 1 {
				t.Fatalf("job steps %+v, want one", r.Steps)
			}
			checkRetried(t, r.Steps[0], "mailbox busy")
		})
		t.Run("document", func(t *testing.T) {
			id := start(map[string]any{"kind": "document", "name": "steps-doc", "input": map[string]any{}})
			r := e.waitStatus(id, heph.StatusFailed)
			checkRetried(t, stepOf(t, r.Steps, "try"), "try again")
			checkFailed(t, stepOf(t, r.Steps, "charge"), "card declined")
		})
		t.Run("workflow", func(t *testing.T) {
			id := start(map[string]any{"kind": "workflow", "name": "steps-wf", "input": "x"})
			r := e.waitStatus(id, heph.StatusCompleted)
			s := stepOf(t, r.Steps, "fetch #1")
			if s.Kind != "activity" {
				t.Errorf("fetch #0 kind %q, want activity", s.Kind)
			}
			checkRetried(t, s, "upstream 503")
		})
	})
}
