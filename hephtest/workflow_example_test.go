package hephtest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var charge = workflow.NewActivity("billing.charge", func(ctx context.Context, amount int) (string, error) {
	return "", errors.New("the test must not call the bank")
})

// subscription charges a customer every 30 days, three times.
var subscription = workflow.New("subscription", func(ctx workflow.Context, amount int) ([]string, error) {
	var receipts []string
	for range 3 {
		if err := workflow.Sleep(ctx, 30*24*time.Hour); err != nil {
			return nil, err
		}
		r, err := charge.Execute(ctx, amount)
		if err != nil {
			return nil, err
		}
		receipts = append(receipts, r)
	}
	return receipts, nil
})

// A workflow that sleeps 90 days in all runs at once on the env's virtual
// clock, with its activity mocked.
func ExampleExecuteWorkflow() {
	env := hephtest.NewWorkflowEnv(nil, subscription)
	defer env.Close()
	hephtest.MockActivity(env, charge, func(ctx context.Context, amount int) (string, error) {
		return fmt.Sprintf("charged %d", amount), nil
	})
	start := env.Now()

	receipts, err := hephtest.ExecuteWorkflow(context.Background(), env, subscription, 42)
	fmt.Println(receipts, err)
	fmt.Println("virtual time:", env.Now().Sub(start))
	// Output:
	// [charged 42 charged 42 charged 42] <nil>
	// virtual time: 2160h0m0s
}

var tally = workflow.New("tally", func(ctx workflow.Context, _ struct{}) (int, error) {
	workflow.Publish(ctx, 0)
	return workflow.Phase(ctx, 0,
		workflow.OnUpdate("add", func(ctx workflow.Context, n int, sum int) (workflow.Reply[int, int], error) {
			workflow.Publish(ctx, sum+n)
			return workflow.Respond(sum+n, sum+n), nil
		}).Validate(func(n int, _ int) error {
			if n <= 0 {
				return fmt.Errorf("%d is not positive", n)
			}
			return nil
		}),
		workflow.OnSignal("close", func(ctx workflow.Context, _ struct{}, sum int) workflow.Next[int] {
			return workflow.Stop(sum)
		}),
	)
})

// Signals, updates (with a validator) and queries, in memory.
func ExampleUpdate() {
	ctx := context.Background()
	env := hephtest.NewWorkflowEnv(nil, tally)
	defer env.Close()
	run, _ := hephtest.StartWorkflow(env, tally, struct{}{})

	sum, err := hephtest.Update[int](ctx, run, "add", 5)
	fmt.Println(sum, err)
	_, err = hephtest.Update[int](ctx, run, "add", -1)
	fmt.Println(errors.As(err, new(*heph.UpdateRejectedError)), err)
	published, _ := hephtest.Query[int](run)
	fmt.Println("published:", published)

	_ = run.Signal("close", nil)
	fmt.Println(run.Result())
	// Output:
	// 5 <nil>
	// true update "add" of run run-1 rejected: -1 is not positive
	// published: 5
	// 5 <nil>
}

// Before deploying a change, replay the histories of runs in flight
// (exported with Client.ExportHistory) against the new code: a change that
// would break them is reported with the recorded event and the new
// command.
func ExampleReplayHistory() {
	env := hephtest.NewWorkflowEnv(nil, subscription)
	defer env.Close()
	hephtest.MockActivity(env, charge, func(ctx context.Context, amount int) (string, error) { return "ok", nil })
	run, _ := hephtest.StartWorkflow(env, subscription, 10)
	_ = env.Advance(context.Background(), 45*24*time.Hour) // one charge, then asleep
	history := run.History()

	fmt.Println("same code:", hephtest.ReplayHistory(history, subscription))

	// The new code charges weekly.
	weekly := workflow.New("subscription", func(ctx workflow.Context, amount int) ([]string, error) {
		for {
			if err := workflow.Sleep(ctx, 7*24*time.Hour); err != nil {
				return nil, err
			}
			if _, err := charge.Execute(ctx, amount); err != nil {
				return nil, err
			}
		}
	})
	err := hephtest.ReplayHistory(history, weekly)
	var nde *heph.NonDeterminismError
	if errors.As(err, &nde) {
		fmt.Println("recorded:", nde.Recorded)
		fmt.Println("new code:", nde.Command)
		fmt.Printf("changed: %s from %s to %s\n", nde.Changed, nde.Old, nde.New)
	}
	// Output:
	// same code: <nil>
	// recorded: timer_started #1 (720h0m0s)
	// new code: workflow.Sleep or phase timeout of 168h0m0s (timer_started #1)
	// changed: timer duration from 720h0m0s to 168h0m0s
}
