package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// heph start --timeout gives the run a deadline (show prints it); once
// the fake clock passes it, show prints the failed run's condition
// timed_out and history its run_timed_out entry. A negative timeout is a
// usage error.
func TestStartTimeoutCLI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	start := time.Date(2032, 5, 6, 7, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := hephaestus.New(&hephaestus.Config{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	b := flow.New("waits")
	flow.EventStep(b, "wait", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("go"), flow.Waits(0))
	if err := c.Register(b.Start("wait").Edge("wait", "go", flow.Done).MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)

	if code, _, errOut := heph(t, env, "start", "waits", "--timeout", "-1h"); code != cli.ExitUsage || !strings.Contains(errOut, "--timeout") {
		t.Fatalf("a negative --timeout: exit %d, %s", code, errOut)
	}
	var run struct {
		ID       string
		Deadline time.Time
	}
	if err := json.Unmarshal([]byte(ok(t, env, "start", "waits", "--timeout", "1h", "-o", "json")), &run); err != nil {
		t.Fatal(err)
	}
	if !run.Deadline.Equal(start.Add(time.Hour)) {
		t.Fatalf("deadline %v, want %v", run.Deadline, start.Add(time.Hour))
	}
	wantLines(t, "show", ok(t, env, "show", run.ID), `^deadline:\s+2032-05-06T08:00:00Z`)
	clk.Advance(time.Hour)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.GetRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s after 30s", run.ID, r.Status)
		}
		clk.Advance(time.Second) // the sweep's next look, whenever it began to wait
		time.Sleep(20 * time.Millisecond)
	}
	wantLines(t, "show", ok(t, env, "show", run.ID), `^status:\s+failed`, `^condition:\s+timed_out timed out: `)
	wantLines(t, "history", ok(t, env, "history", run.ID), `\srun_timed_out\s`)
}
