package flow_test

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	gold "github.com/hephaestus-go/hephaestus/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// processOrderFlow is the flow of Example_processOrder.
func processOrderFlow() *flow.Flow {
	b := flow.New("process_order").Defaults(flow.Retry(flow.RetryPolicy{MaxAttempts: 3}))
	flow.Step(b, "validate", func(ctx context.Context, in map[string]any) (map[string]bool, error) {
		return map[string]bool{"valid": true}, nil
	})
	flow.Step(b, "charge", func(ctx context.Context, in map[string]any) (Payment, error) {
		return Payment{Charged: true, Parties: []string{"customer", "warehouse", "accounting"}}, nil
	}, flow.DependsOn("validate"))
	flow.Map(b, "notify_parties", func(ctx context.Context, party string) (string, error) {
		return "notified " + party, nil
	}, flow.DependsOn("charge"), flow.Over("charge", "parties"))
	return b.MustBuild()
}

// approvalFlow has a waiting step with a timeout, a failure route and a map
// over the run input.
func approvalFlow() *flow.Flow {
	b := flow.New("approval")
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

func graphFlows() map[string]*flow.Flow {
	return map[string]*flow.Flow{
		"order":         orderFlow(),
		"process_order": processOrderFlow(),
		"approval":      approvalFlow(),
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	gold.Check(t, name, got, *update, "go test ./flow -run TestGraphGolden -update")
}

func TestGraphGolden(t *testing.T) {
	for name, f := range graphFlows() {
		t.Run(name, func(t *testing.T) {
			golden(t, name+".mmd.golden", f.Mermaid())
			golden(t, name+".dot.golden", f.DOT())
		})
	}
}

func TestGraphDeterministic(t *testing.T) {
	for name := range graphFlows() {
		a, b := graphFlows()[name], graphFlows()[name]
		if a.Mermaid() != b.Mermaid() || a.DOT() != b.DOT() {
			t.Errorf("%s: two builds of one definition render differently", name)
		}
	}
}

// TestGraphCompleteness checks that every step, every edge label and the
// markers appear in both renderings.
func TestGraphCompleteness(t *testing.T) {
	for name, f := range graphFlows() {
		t.Run(name, func(t *testing.T) {
			mmd, dot := f.Mermaid(), f.DOT()
			if !strings.HasPrefix(mmd, "flowchart TD\n") {
				t.Errorf("Mermaid does not start with flowchart TD:\n%s", mmd)
			}
			if !strings.HasPrefix(dot, "digraph ") || !strings.HasSuffix(dot, "}\n") {
				t.Errorf("DOT is not a digraph:\n%s", dot)
			}
			done := false
			for _, s := range f.Steps() {
				if !strings.Contains(mmd, `"`+s.Name) {
					t.Errorf("Mermaid lacks step %q", s.Name)
				}
				if !strings.Contains(dot, `"`+s.Name+`"`) {
					t.Errorf("DOT lacks step %q", s.Name)
				}
				if s.Kind == flow.KindMap {
					for _, out := range []string{mmd, dot} {
						if !strings.Contains(out, "map over") {
							t.Errorf("no map marker for %q in\n%s", s.Name, out)
						}
					}
					if !strings.Contains(dot, "box3d") {
						t.Errorf("map step %q is not a box3d in DOT", s.Name)
					}
				}
				if s.Waits {
					for _, out := range []string{mmd, dot} {
						if !strings.Contains(out, "wait") || (s.WaitTimeout > 0 && !strings.Contains(out, s.WaitTimeout.String())) {
							t.Errorf("no wait marker with timeout for %q in\n%s", s.Name, out)
						}
					}
					if !strings.Contains(dot, "hexagon") || !strings.Contains(mmd, "{{") {
						t.Errorf("waiting step %q has no distinct shape", s.Name)
					}
				}
			}
			for _, e := range f.Edges() {
				done = done || e.To == flow.Done
				if !strings.Contains(mmd, `|"`+e.Event+`"|`) {
					t.Errorf("Mermaid lacks the label of edge %v", e)
				}
				if !strings.Contains(dot, `[label="`+e.Event+`"`) {
					t.Errorf("DOT lacks the label of edge %v", e)
				}
			}
			if got := strings.Contains(dot, "doublecircle"); got != done {
				t.Errorf("DOT has a Done node: %v, want %v", got, done)
			}
			if got := strings.Contains(mmd, `((("done")))`); got != done {
				t.Errorf("Mermaid has a Done node: %v, want %v", got, done)
			}
			// One edge line per resolved edge, plus one per root.
			if n := strings.Count(dot, " -> "); n < len(f.Edges())+1 {
				t.Errorf("DOT has %d edges, want at least %d", n, len(f.Edges())+1)
			}
		})
	}
}

func TestGraphEscaping(t *testing.T) {
	// Names valid for a flow never need escaping, but the renderers must
	// not produce broken output when they do.
	b := flow.New("we.ird-name_1")
	flow.Step(b, "end", func(ctx context.Context, in any) (any, error) { return nil, nil })
	f := b.MustBuild()
	if mmd := f.Mermaid(); strings.Contains(mmd, "\n    end") {
		t.Errorf("Mermaid uses the step name as a node id, which breaks on the keyword end:\n%s", mmd)
	}
	if dot := f.DOT(); !strings.HasPrefix(dot, `digraph "we.ird-name_1" {`) {
		t.Errorf("DOT does not quote the flow name:\n%s", dot)
	}
}
