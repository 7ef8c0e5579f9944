package hephaestus_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// logBackends opens a fresh store of each backend; open may be called
// again for another handle on the same database.
func logBackends(t *testing.T) map[string]func(t *testing.T) store.Store {
	path := t.TempDir() + "/h.db"
	return map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store { return openSQLiteAt(t, path) },
		"postgres": func() func(t *testing.T) store.Store {
			var dsn string
			return func(t *testing.T) store.Store {
				if dsn == "" {
					dsn = pgtest.DSN(t)
				}
				st, err := postgres.Open(context.Background(), &postgres.Config{DSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
		}(),
	}
}

var (
	logActivity = workflow.NewActivity("logs.activity", func(ctx context.Context, s string) (string, error) {
		workflow.ActivityLogger(ctx).Info("activity ran", "input", s)
		return s, nil
	})
	logWorkflow = workflow.New("logs.workflow", func(ctx workflow.Context, s string) (string, error) {
		workflow.Logger(ctx).Info("workflow code: quiet in replay, not stored")
		return logActivity.Execute(ctx, s)
	})
	logJob = job.MustNew("logs.job", func(ctx context.Context, j *job.Job[string]) error {
		flow.Logger(ctx).Info("sending", "to", j.Args)
		return nil
	}, nil)
)

const logDoc = "name: logs-doc\nsteps:\n  act:\n    action: logact\n    args: {n: 3}\n    done: true\n"

// Step logs of a flow step (retried, with secrets), a job, a workflow
// activity and a document's action, read back per attempt; the run's
// pruning deletes them.
func TestStepLogs(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var tries atomic.Int32
			b := flow.New("logs.flow")
			flow.Step(b, "work", func(ctx context.Context, in string) (string, error) {
				log := flow.Logger(ctx)
				key, err := heph.Secret(ctx, "api_key")
				if err != nil {
					return "", err
				}
				log.Debug("not stored")
				log.Info("calling the API", "url", "https://x.test/?key="+key, "password", "p@ss", "order", 7)
				if tries.Add(1) == 1 {
					log.Error("attempt fails", "err", errors.New("flaky"))
					return "", errors.New("flaky")
				}
				log.With("phase", "end").WithGroup("res").Info("done", "code", 200)
				return in, nil
			}, flow.Retry(flow.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
			reg := flowdoc.NewRegistry()
			if err := flowdoc.RegisterAction(reg, "logact", func(ctx context.Context, call flowdoc.ActionCall, in map[string]any) (map[string]any, error) {
				flow.Logger(ctx).Warn("action logs", "n", in["n"])
				return in, nil
			}); err != nil {
				t.Fatal(err)
			}
			c := startClient(t, ctx, &heph.Config{Store: open(t), Logger: quietLogger(), SecretKeys: secretKeys(t, "k1:1"), Retention: time.Nanosecond, RetentionInterval: time.Hour},
				func(c *heph.Client) error {
					if _, err := c.PutDocument(ctx, "logs-doc", heph.DocumentYAML, []byte(logDoc)); err != nil {
						return err
					}
					return errors.Join(c.Register(b.MustBuild()), c.RegisterJobs(logJob), c.RegisterWorkflows(logWorkflow),
						c.RegisterActivities(logActivity), c.RegisterDocuments(ctx, reg))
				})
			if _, err := c.SetSecret(ctx, "api_key", []byte("sk-live-123456")); err != nil {
				t.Fatal(err)
			}
			wait := func(r *heph.Run, err error) string {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				res, err := c.WaitRun(ctx, r.ID)
				if err != nil || res.Status != heph.StatusCompleted {
					t.Fatalf("run %s: %+v, %v", r.ID, res, err)
				}
				return r.ID
			}
			flowRun := wait(c.StartRun(ctx, "logs.flow", "x", nil))
			j, err := heph.InsertJob(ctx, c, logJob, "ann@example.com", nil)
			if err != nil {
				t.Fatal(err)
			}
			jobRun := wait(&heph.Run{ID: j.ID}, nil)
			wfRun := wait(c.StartWorkflow(ctx, "logs.workflow", "w", nil))
			docRun := wait(c.StartDocument(ctx, "logs-doc", 0, map[string]any{}, nil))

			logs := func(id string, o heph.LogsOptions) []heph.LogRecord {
				t.Helper()
				p, err := c.RunLogs(ctx, id, o)
				if err != nil {
					t.Fatal(err)
				}
				return p.Records
			}
			got := logs(flowRun, heph.LogsOptions{})
			var lines []string
			for _, r := range got {
				lines = append(lines, r.Step+"#"+itoa(r.Attempt)+" "+r.Level+" "+r.Message+" "+string(r.Attrs))
				if r.Worker == "" || r.Time.IsZero() || r.Seq == 0 {
					t.Errorf("record without worker, time or seq: %+v", r)
				}
			}
			want := []string{
				`work#1 INFO calling the API {"url":"https://x.test/?key=[redacted]","password":"[redacted]","order":7}`,
				`work#1 ERROR attempt fails {"err":"flaky"}`,
				`work#2 INFO calling the API {"url":"https://x.test/?key=[redacted]","password":"[redacted]","order":7}`,
				`work#2 INFO done {"phase":"end","res":{"code":200}}`,
			}
			if strings.Join(lines, "\n") != strings.Join(want, "\n") {
				t.Errorf("flow logs:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
			if n := len(logs(flowRun, heph.LogsOptions{Step: "work", Attempt: 2})); n != 2 {
				t.Errorf("attempt 2 has %d records, want 2", n)
			}
			if n := len(logs(flowRun, heph.LogsOptions{Level: "error"})); n != 1 {
				t.Errorf("%d error records, want 1", n)
			}
			if p, err := c.RunLogs(ctx, flowRun, heph.LogsOptions{After: got[1].Seq}); err != nil || len(p.Records) != 2 || p.Next != got[3].Seq {
				t.Errorf("after the second record: %+v, %v", p, err)
			}
			if _, err := c.RunLogs(ctx, flowRun, heph.LogsOptions{Level: "loud"}); !errors.Is(err, heph.ErrInvalidInput) {
				t.Errorf("bad level: %v", err)
			}
			one := func(id, what string) {
				t.Helper()
				rs := logs(id, heph.LogsOptions{})
				if len(rs) != 1 || !strings.Contains(rs[0].Message+" "+string(rs[0].Attrs), what) {
					t.Errorf("%s logs = %+v, want one record with %q", id, rs, what)
				}
			}
			one(jobRun, `sending {"to":"ann@example.com"}`)
			one(wfRun, `activity ran {"input":"w"}`)
			one(docRun, `action logs {"n":3}`)

			// Retention deletes the runs, and their logs with them.
			if _, err := c.Prune(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := c.RunLogs(ctx, flowRun, heph.LogsOptions{}); !errors.Is(err, heph.ErrRunNotFound) {
				t.Errorf("logs of a pruned run: %v", err)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// What a step logged before its worker died is readable: heartbeats store
// it while the step runs, seen here through another handle on the store
// while the step still blocks.
func TestStepLogsFlushedByHeartbeat(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			release := make(chan struct{})
			defer close(release)
			b := flow.New("logs.block")
			flow.Step(b, "block", func(ctx context.Context, in string) (string, error) {
				flow.Logger(ctx).Info("before the crash")
				select {
				case <-release:
				case <-ctx.Done():
				}
				return in, nil
			})
			c := startClient(t, ctx, &heph.Config{Store: open(t), Logger: quietLogger(), HeartbeatInterval: 50 * time.Millisecond, LeaseDuration: 10 * time.Second},
				func(c *heph.Client) error { return c.Register(b.MustBuild()) })
			r, err := c.StartRun(ctx, "logs.block", "x", nil)
			if err != nil {
				t.Fatal(err)
			}
			other, err := heph.New(&heph.Config{Store: open(t), Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			p, err := other.RunLogs(ctx, r.ID, heph.LogsOptions{Wait: 50 * time.Second})
			if err != nil || len(p.Records) != 1 || p.Records[0].Message != "before the crash" {
				t.Fatalf("logs while the step runs: %+v, %v", p, err)
			}
			if run, err := other.GetRun(ctx, r.ID); err != nil || run.Status.Terminal() {
				t.Fatalf("the step ended before its log was read: %+v, %v", run, err)
			}
		})
	}
}

func openSQLiteAt(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
