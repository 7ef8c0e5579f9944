package hephaestus_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// Client.Steps shows a running step from its open task, before its
// outcome commits: running, with its worker, its lease and the heartbeat
// details it recorded; once it completes, its attempt has its start and
// end from the history. On both backends.
func TestStepsRunning(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"sqlite", func(t *testing.T) store.Store {
			st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "h.db")})
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
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			release := make(chan struct{})
			fb := flow.New("steps.hold")
			flow.Step(fb, "hold", func(ctx context.Context, in any) (int, error) {
				if err := flow.RecordHeartbeat(ctx, map[string]int{"done": 7}); err != nil {
					return 0, err
				}
				select {
				case <-release:
					return 1, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			})
			c := startClient(t, ctx, &heph.Config{Store: b.open(t), Logger: quietLogger(), HeartbeatInterval: 50 * time.Millisecond},
				func(c *heph.Client) error { return c.Register(fb.MustBuild()) })
			r, err := c.StartRun(ctx, "steps.hold", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var running heph.StepDetail
			waitFor(t, ctx, func() bool {
				steps, err := c.Steps(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(steps) != 1 || len(steps[0].Attempts) != 1 {
					return false
				}
				a := steps[0].Attempts[0]
				running = steps[0]
				return a.Outcome == "running" && len(a.Details) > 0
			})
			a := running.Attempts[0]
			if running.Name != "hold" || running.Status != "running" || a.Worker == "" || a.LeaseUntil.IsZero() || a.ReadyAt.IsZero() ||
				!detailsAre(a.Details, 7) || !a.FinishedAt.IsZero() || !running.FinishedAt.IsZero() {
				t.Fatalf("running step %+v, attempt %+v; want running with a worker, a lease, a ready time, the details, no end", running, a)
			}
			close(release)
			waitFor(t, ctx, func() bool {
				got, err := c.GetRun(ctx, r.ID)
				return err == nil && got.Status == heph.StatusCompleted
			})
			steps, err := c.Steps(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			done := steps[0].Attempts[0]
			if steps[0].Status != "completed" || done.Outcome != "completed" || done.Worker != a.Worker || done.StartedAt.IsZero() ||
				done.FinishedAt.Before(done.StartedAt) || steps[0].Duration != done.FinishedAt.Sub(done.StartedAt) {
				t.Errorf("completed step %+v; want completed by %s with its times", steps[0], a.Worker)
			}
		})
	}
}

// detailsAre reports whether heartbeat details are {"done": n}.
func detailsAre(raw json.RawMessage, n int) bool {
	var d struct{ Done int }
	return json.Unmarshal(raw, &d) == nil && d.Done == n
}
