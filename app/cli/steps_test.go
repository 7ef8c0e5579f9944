package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var quickRetry = flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Jitter: -1}

// failFirst returns an error on its first call only.
func failFirst(n *atomic.Int32, msg string) error {
	if n.Add(1) == 1 {
		return errors.New(msg)
	}
	return nil
}

// stepsClient starts a client on st with a flow (cli-steps: "flaky" fails
// once, "boom" for good), a job (cli-steps-job, fails once), a document
// (cli-steps-doc: "declined" fails) and a workflow (cli-steps-wf: its
// activity "fetch" fails once).
func stepsClient(t *testing.T, st store.Store) *hephaestus.Client {
	t.Helper()
	ctx := t.Context()
	c, err := hephaestus.New(&hephaestus.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var flaky, jobs, acts atomic.Int32
	fb := flow.New("cli-steps")
	flow.Step(fb, "flaky", func(ctx context.Context, in any) (int, error) { return 1, failFirst(&flaky, "first try fails") }, flow.Retry(quickRetry))
	flow.Step(fb, "boom", func(ctx context.Context, in any) (int, error) {
		return 0, flow.NonRetryable(errors.New("card declined\nby the bank"))
	}, flow.DependsOn("flaky"))
	jb := job.MustNew("cli-steps-job", func(ctx context.Context, j *job.Job[struct{}]) error { return failFirst(&jobs, "mailbox busy") },
		&job.Options[struct{}]{Retry: quickRetry})
	fetch := workflow.NewActivity("fetch", func(ctx context.Context, s string) (string, error) { return s, failFirst(&acts, "upstream 503") }).
		WithOptions(workflow.ActivityOptions{RetryPolicy: quickRetry})
	wf := workflow.New("cli-steps-wf", func(ctx workflow.Context, s string) (string, error) { return fetch.Execute(ctx, s) })
	reg := flowdoc.NewRegistry()
	if err := errors.Join(c.Register(fb.MustBuild()), c.RegisterJobs(jb), c.RegisterWorkflows(wf), c.RegisterActivities(fetch),
		flowdoc.RegisterAction(reg, "declined", func(ctx context.Context, call flowdoc.ActionCall, in map[string]any) (map[string]any, error) {
			return nil, errors.New("card declined")
		})); err != nil {
		t.Fatal(err)
	}
	doc := "name: cli-steps-doc\nsteps:\n  charge:\n    action: declined\n    retry: {max_attempts: 1}\n    done: true\n"
	if _, err := c.PutDocument(ctx, "cli-steps-doc", hephaestus.DocumentYAML, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// waitEnded waits (30 seconds at most) for a run to end.
func waitEnded(t *testing.T, c *hephaestus.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 30s", id, r.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// heph show prints each step's times, attempts, worker and error (on one
// line), --attempts each attempt, and -o json the API's fields, for a
// flow, a job, a document and a workflow, on both backends.
func TestShowStepsCLI(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store {
			st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"postgres", func(t *testing.T) store.Store {
			st, err := postgres.Open(t.Context(), &postgres.Config{DSN: pgtest.DSN(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			st := b.open(t)
			c := stepsClient(t, st)
			env := serveAPI(t, c, st)
			ctx := t.Context()
			fr, err := c.StartRun(ctx, "cli-steps", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			jr, err := c.InsertJobJSON(ctx, "cli-steps-job", json.RawMessage(`{}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			dr, err := c.StartDocument(ctx, "cli-steps-doc", 0, map[string]any{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			wr, err := hephaestus.StartWorkflow(ctx, c, workflow.New("cli-steps-wf", func(ctx workflow.Context, s string) (string, error) { return s, nil }), "x", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{fr.ID, jr.ID, dr.ID, wr.ID} {
				waitEnded(t, c, id)
			}
			const (
				when = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
				dur  = `\d[\dµnms.]*`
			)
			wantLines(t, "show flow", ok(t, env, "show", fr.ID),
				`^STEP\s+STATUS\s+ATTEMPTS\s+STARTED\s+FINISHED\s+DURATION\s+WORKER\s+ERROR$`,
				`^flaky\s+completed\s+2\s+`+when+`\s+`+when+`\s+`+dur+`\s+\S+\s+-$`,
				`^boom\s+failed\s+1\s+`+when+`\s+`+when+`\s+`+dur+`\s+\S+\s+card declined by the bank$`)
			wantLines(t, "show flow --attempts", ok(t, env, "show", fr.ID, "--attempts"),
				`^flaky\s+completed\s+2\s`,
				`^  #1\s+retrying\s+-?\s*`+when+`\s+`+when+`\s+`+dur+`\s+\S+\s+first try fails$`,
				`^  #2\s+completed\s+-?\s*`+when+`\s+`+when+`\s+`+dur+`\s+\S+\s+-$`)
			wantLines(t, "show job --attempts", ok(t, env, "show", jr.ID, "--attempts"),
				`\scompleted\s+2\s+`+when, `^  #1\s+retrying\s.*\smailbox busy$`)
			wantLines(t, "show document", ok(t, env, "show", dr.ID), `^charge\s+failed\s+1\s+`+when+`\s.*\scard declined$`)
			wantLines(t, "show workflow --attempts", ok(t, env, "show", wr.ID, "--attempts"),
				`^fetch #1\s+completed\s+2\s+`+when, `^  #1\s+retrying\s.*\supstream 503$`)

			var run struct {
				Steps []struct {
					Name           string
					Error          string
					StartedAt      *time.Time `json:"started_at"`
					DurationMS     *int64     `json:"duration_ms"`
					AttemptDetails []struct {
						Outcome, Worker, Error string
					} `json:"attempt_details"`
				}
			}
			if err := json.Unmarshal([]byte(ok(t, env, "show", fr.ID, "-o", "json")), &run); err != nil {
				t.Fatal(err)
			}
			if len(run.Steps) != 2 || run.Steps[0].StartedAt == nil || run.Steps[0].DurationMS == nil || len(run.Steps[0].AttemptDetails) != 2 ||
				run.Steps[0].AttemptDetails[0].Worker == "" || !regexp.MustCompile("card declined").MatchString(run.Steps[1].Error) {
				t.Errorf("show -o json steps = %+v", run.Steps)
			}
		})
	}
}
