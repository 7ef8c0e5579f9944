package graphtext_test

import (
	"context"
	"encoding/json"
	"flag"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	gold "github.com/hephaestus-go/hephaestus/internal/golden"
	"github.com/hephaestus-go/hephaestus/internal/graphtext"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// approvalFlow has a map over the input, a waiting step with a timeout,
// a branch, a failure route and edges to Done.
func approvalFlow() *flow.Flow {
	b := flow.New("approval").Version(2)
	flow.Map(b, "price", func(ctx context.Context, item int) (int, error) { return item * 2, nil })
	flow.EventStep(b, "approve", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("approved", "rejected"), flow.Waits(24*time.Hour))
	flow.Step(b, "book", func(ctx context.Context, in any) (any, error) { return nil, nil })
	flow.Step(b, "escalate", func(ctx context.Context, in any) (any, error) { return nil, nil })
	flow.Step(b, "refund", func(ctx context.Context, in any) (any, error) { return nil, nil })
	return b.Start("price").
		Edge("price", flow.EventOK, "approve").
		Edge("approve", "approved", "book").
		Edge("approve", "rejected", flow.Done).
		Edge("approve", flow.EventTimeout, "escalate").
		Edge("book", flow.EventOK, flow.Done).
		Edge("book", flow.EventFailed, "refund").
		Edge("escalate", flow.EventOK, flow.Done).
		Edge("refund", flow.EventOK, flow.Done).
		MustBuild()
}

// chainFlow is PgFlow style: two roots joined, no Done edge.
func chainFlow() *flow.Flow {
	b := flow.New("chain")
	flow.Step(b, "a", func(ctx context.Context, in int) (int, error) { return in, nil })
	flow.Step(b, "b", func(ctx context.Context, in int) (int, error) { return in, nil })
	flow.Step(b, "c", func(ctx context.Context, in int) (int, error) { return in, nil }, flow.DependsOn("a", "b"))
	return b.MustBuild()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	gold.Check(t, name, got, *update, "go test ./internal/graphtext -update")
}

func TestGolden(t *testing.T) {
	states := map[string]string{"price": "completed", "approve": "waiting", "book": "pending", "escalate": "skipped"}
	for name, g := range map[string]*graphtext.Graph{
		"approval":        graphtext.Of(approvalFlow()),
		"approval_states": graphtext.Of(approvalFlow()).WithStates(states),
		"chain":           graphtext.Of(chainFlow()),
	} {
		t.Run(name, func(t *testing.T) {
			js, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".json", string(js)+"\n")
			golden(t, name+".mmd", graphtext.Mermaid(g))
			golden(t, name+".dot", graphtext.DOT(g))
			golden(t, name+".txt", graphtext.Text(g))
		})
	}
}

// TestOneWalk checks that every renderer shows every node and edge of
// the graph: the pictures come from one walk and cannot disagree.
func TestOneWalk(t *testing.T) {
	g := graphtext.Of(approvalFlow())
	if got := len(g.Nodes); got != 7 { // start, 5 steps, done
		t.Fatalf("nodes: %d, want 7: %+v", got, g.Nodes)
	}
	if got := len(g.Edges); got != 9 { // start->price and 8 declared
		t.Fatalf("edges: %d, want 9: %+v", got, g.Edges)
	}
	g2 := g.WithStates(map[string]string{"price": "failed", "_start": "x"})
	if g.Nodes[1].State != "" || g2.Nodes[1].State != "failed" || g2.Nodes[0].State != "" {
		t.Fatalf("WithStates: original %+v, copy %+v", g.Nodes[:2], g2.Nodes[:2])
	}
}
