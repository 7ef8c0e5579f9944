package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// A workflow that waits a day, then greets. It runs here in hephtest's
// in-memory environment, whose virtual clock ends the day at once.
func Example() {
	greet := workflow.NewActivity("greet", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	hello := workflow.New("hello", func(ctx workflow.Context, name string) (string, error) {
		if err := workflow.Sleep(ctx, 24*time.Hour); err != nil {
			return "", err
		}
		return greet.Execute(ctx, name)
	})

	env := hephtest.NewWorkflowEnv(nil, hello)
	defer env.Close()
	env.RegisterActivities(greet)
	out, err := hephtest.ExecuteWorkflow(context.Background(), env, hello, "Ada")
	fmt.Println(out, err)
	// Output: Hello, Ada! <nil>
}

// A phase with an update handler whose validator rejects bad arguments,
// and a signal that ends the phase. The update and the signal are
// declared once, with their types, for the workflow and its callers.
func ExamplePhase() {
	add := workflow.NewUpdate[int, int]("add")
	closeTally := workflow.NewSignal[struct{}]("close")
	tally := workflow.New("tally", func(ctx workflow.Context, _ struct{}) (int, error) {
		return workflow.Phase(ctx, 0,
			workflow.HandleUpdate(add, func(ctx workflow.Context, n int, sum int) (workflow.Reply[int, int], error) {
				return workflow.Respond(sum+n, sum+n), nil
			}).Validate(func(n int, _ int) error {
				if n <= 0 {
					return fmt.Errorf("%d is not positive", n)
				}
				return nil
			}),
			workflow.HandleSignal(closeTally, func(ctx workflow.Context, _ struct{}, sum int) workflow.Next[int] {
				return workflow.Stop(sum)
			}),
		)
	}).Declare(add, closeTally)

	ctx := context.Background()
	env := hephtest.NewWorkflowEnv(nil, tally)
	defer env.Close()
	run, _ := hephtest.StartWorkflow(env, tally, struct{}{})
	for _, n := range []int{2, -1, 3} {
		sum, err := hephtest.RunUpdate(ctx, run, add, n)
		fmt.Println("add", n, "->", sum, "invalid:", errors.Is(err, workflow.ErrUpdateInvalid))
	}
	_ = hephtest.SendSignal(run, closeTally, struct{}{})
	fmt.Println(run.Result())
	// Output:
	// add 2 -> 2 invalid: false
	// add -1 -> 0 invalid: true
	// add 3 -> 5 invalid: false
	// 5 <nil>
}
