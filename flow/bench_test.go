package flow_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
)

func benchStep(ctx context.Context, in int) (int, error) { return in, nil }

// chainFlow is a flow of n steps in a chain; one step in 32 declares it
// reads the first step.
func chainFlow(n int) *flow.Builder {
	b := flow.New("chain").Start("s0")
	for i := range n {
		name := "s" + strconv.Itoa(i)
		var opts []flow.StepOption
		if i > 0 && i%32 == 0 {
			opts = append(opts, flow.Reads("s0"))
		}
		flow.Step(b, name, benchStep, opts...)
		if i == n-1 {
			b.Edge(name, flow.EventOK, flow.Done)
		} else {
			b.Edge(name, flow.EventOK, "s"+strconv.Itoa(i+1))
		}
	}
	return b
}

// fanFlow is a flow of n steps: a start that fans out to n-2 branches,
// which all join in one step.
func fanFlow(n int) *flow.Builder {
	b := flow.New("fan").Start("a")
	flow.Step(b, "a", benchStep)
	branches := make([]string, n-2)
	for i := range branches {
		branches[i] = "b" + strconv.Itoa(i)
		flow.Step(b, branches[i], benchStep)
		b.Edge(branches[i], flow.EventOK, "j")
	}
	b.Edge("a", flow.EventOK, branches...)
	flow.Step(b, "j", benchStep)
	b.Edge("j", flow.EventOK, flow.Done)
	return b
}

// BenchmarkBuild validates and compiles Go flows of 1k to 30k steps,
// chains and fan-out/fan-in (docs/benchmarks.md). The builder is made
// outside the timed loop: Build is what is measured.
func BenchmarkBuild(b *testing.B) {
	for _, shape := range []struct {
		name string
		flow func(int) *flow.Builder
	}{{"chain", chainFlow}, {"fan", fanFlow}} {
		for _, n := range []int{1000, 3000, 10000, 30000} {
			fb := shape.flow(n)
			b.Run(fmt.Sprintf("%s/steps=%d", shape.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := fb.Build(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
