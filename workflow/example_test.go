package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// A workflow that waits a day, then greets. It runs here in the in-memory
// simulator of the runtime, whose virtual clock ends the day at once.
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

	sim, _ := replay.NewSim(&replay.SimConfig{
		Workflows:  map[string]replay.Func{hello.Name(): hello.Func()},
		Activities: map[string]replay.ActivityFunc{greet.Name(): greet.Invoke},
	})
	defer sim.Close()
	run, _ := sim.Start(hello.Name(), json.RawMessage(`"Ada"`))
	_ = sim.Drive(context.Background())
	fmt.Println(run.Status(), string(run.Output()))
	// Output: completed "Hello, Ada!"
}

// A phase with an update handler whose validator rejects bad arguments,
// and a signal that ends the phase.
func ExamplePhase() {
	tally := workflow.New("tally", func(ctx workflow.Context, _ struct{}) (int, error) {
		return workflow.Phase(ctx, 0,
			workflow.OnUpdate("add", func(ctx workflow.Context, n int, sum int) (workflow.Reply[int, int], error) {
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

	sim, _ := replay.NewSim(&replay.SimConfig{Workflows: map[string]replay.Func{tally.Name(): tally.Func()}})
	defer sim.Close()
	run, _ := sim.Start(tally.Name(), nil)
	for i, n := range []string{"2", "-1", "3"} {
		o, _ := run.Update(fmt.Sprint("u", i), "add", json.RawMessage(n))
		fmt.Println("add", n, "accepted:", o.Accepted, o.Err)
	}
	_ = run.Signal("close", nil)
	fmt.Println(run.Status(), string(run.Output()))
	// Output:
	// add 2 accepted: true <nil>
	// add -1 accepted: false update "add" (id "u1") rejected: -1 is not positive
	// add 3 accepted: true <nil>
	// completed 5
}
