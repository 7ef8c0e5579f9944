package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/flow"
)

// A mistyped step or definition gets a "did you mean" and what to do, in
// one line; a run that has not finished says how to wait for its result.
func TestDidYouMeanStepsAndDefinitions(t *testing.T) {
	t.Parallel()
	c, st := sqliteClient(t)
	pay := flow.New("payment")
	flow.Step(pay, "charge", func(ctx context.Context, in string) (string, error) { return in, nil })
	hold := flow.New("hold")
	flow.EventStep(hold, "approve", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("yes"), flow.Waits(0))
	if err := c.Register(pay.MustBuild(), hold.Start("approve").Edge("approve", "yes", flow.Done).MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)
	paid, err := c.StartRun(t.Context(), "payment", "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := c.StartRun(t.Context(), "hold", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "result", ok(t, env, "result", paid.ID, "--forever"), `completed`)
	waitCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		r, err := c.GetRun(waitCtx, held.ID)
		if err != nil {
			t.Fatalf("the run of hold did not come to wait: %v", err)
		}
		if r.Status == hephaestus.StatusWaiting {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling for the status, not timing it
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"logs", paid.ID, "--step", "chrage"}, cli.ExitFailure,
			`run ` + paid.ID + ` has no step "chrage"; did you mean "charge"?; see the run's steps with heph show ` + paid.ID},
		{[]string{"definitions", "show", "paymnet"}, cli.ExitNotFound,
			`no definition named "paymnet"; did you mean payment?; list the definitions with heph definitions (GET /api/v1/definitions)`},
		{[]string{"graph", "hodl", "--remote"}, cli.ExitNotFound, `no definition named "hodl"; did you mean hold?; list the definitions with heph definitions`},
		{[]string{"ls", "--status", "runnin"}, cli.ExitUsage, `--status "runnin": not a run status; did you mean running?`},
		{[]string{"result", held.ID}, cli.ExitNotFinished,
			"heph: run " + held.ID + " has not finished (waiting); wait for its result with heph result " + held.ID + " --wait 5m, or --forever"},
	} {
		code, _, errOut := heph(t, env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("heph %s: exit %d, stderr %q; want exit %d and one line with %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.want)
		}
	}
	// The step the run has: no error.
	ok(t, env, "logs", paid.ID, "--step", "charge")
}
