package engine_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/engine"
)

// BenchmarkChainContext runs a chain of n steps, each with a 1 KiB output,
// and reports the bytes of input documents the engine writes per run (each
// step's holds the run input and every earlier output once) next to the
// size of the run's outputs.
func BenchmarkChainContext(b *testing.B) {
	for _, n := range []int{10, 50} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			gb := newGraph(b)
			for i := range n {
				gb.step(fmt.Sprintf("s%02d", i))
				if i > 0 {
					gb.edge(fmt.Sprintf("s%02d", i-1), "ok", fmt.Sprintf("s%02d", i))
				}
			}
			g := gb.edge(fmt.Sprintf("s%02d", n-1), "ok", "done").build()
			out := []byte(`"` + string(bytes.Repeat([]byte("x"), 1022)) + `"`)
			var docs int
			for b.Loop() {
				docs = 0
				d := engine.Start(g, []byte(`{}`))
				for {
					var next *engine.ScheduleStep
					for _, c := range d.Commands {
						if s, ok := c.(engine.ScheduleStep); ok {
							docs += len(s.Input)
							next = &s
						}
					}
					if next == nil {
						break
					}
					var err error
					d, err = engine.Apply(g, d.State, engine.StepCompleted{Step: next.Step, Attempt: 1, Output: out})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(docs), "input-bytes/run")
			b.ReportMetric(float64(n*len(out)), "output-bytes/run")
		})
	}
}
