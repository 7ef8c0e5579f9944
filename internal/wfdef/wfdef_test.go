package wfdef_test

import (
	"encoding/json"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// Of gives the definition's function, which the replay core runs.
func TestOf(t *testing.T) {
	double := workflow.New("double", func(ctx workflow.Context, n int) (int, error) { return 2 * n, nil })
	sim, err := replay.NewSim(&replay.SimConfig{Workflows: map[string]replay.Func{"double": wfdef.Of(double)}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.Start("double", json.RawMessage(`21`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Output()); got != "42" {
		t.Fatalf("output %s, want 42", got)
	}
}

func TestOfOther(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Of(a string) did not panic")
		}
	}()
	wfdef.Of("not a workflow")
}
