package flowgraph_test

import (
	"context"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/flowgraph"
)

func TestOf(t *testing.T) {
	b := flow.New("g")
	flow.Step(b, "a", func(ctx context.Context, in int) (int, error) { return in, nil })
	flow.Step(b, "b", func(ctx context.Context, in int) (int, error) { return in, nil }, flow.DependsOn("a"))
	f := b.MustBuild()
	g := flowgraph.Of(f)
	if len(g.Steps) != 2 || g.Steps[0].Name != "a" || g.Steps[1].Name != "b" || !g.IsAncestor(0, 1) {
		t.Fatalf("graph of the flow: %+v", g.Steps)
	}
	if flowgraph.Of(f) != g {
		t.Error("Of compiles again instead of returning the flow's graph")
	}
	defer func() {
		if recover() == nil {
			t.Error("Of(a string) did not panic")
		}
	}()
	flowgraph.Of("not a flow")
}
