package flowdoc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// stepName is the i-th of short step names ("s0", "s1", …, in base 36),
// so that documents of 30,000 steps fit in MaxDocumentSize.
func stepName(i int) string { return "s" + strconv.FormatInt(int64(i), 36) }

// chainDoc is a document of n steps in a chain; one step in 32 reads the
// output of the one before it, and one in 32 the first one's.
func chainDoc(n int) []byte {
	var b strings.Builder
	b.WriteString("name: chain\nsteps:\n")
	for i := range n {
		fmt.Fprintf(&b, " %s: {action: e", stepName(i))
		switch {
		case i > 0 && i%32 == 0:
			fmt.Fprintf(&b, ", args: {q: '{{steps.%s.output}}'}", stepName(i-1))
		case i%32 == 1:
			fmt.Fprintf(&b, ", args: {q: '{{steps.%s.output}}'}", stepName(0))
		}
		if i == n-1 {
			b.WriteString(", done: true}\n")
		} else {
			fmt.Fprintf(&b, ", next: %s}\n", stepName(i+1))
		}
	}
	return []byte(b.String())
}

// fanDoc is a document of n steps: a start that fans out to n-2
// branches, which all join in one step; one branch in 64 reads the
// start's output.
func fanDoc(n int) []byte {
	var b strings.Builder
	b.WriteString("name: fan\nstart: a\nsteps:\n a: {action: e, parallel: [")
	for i := range n - 2 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(stepName(i))
	}
	b.WriteString("]}\n")
	for i := range n - 2 {
		fmt.Fprintf(&b, " %s: {action: e", stepName(i))
		if i%64 == 0 {
			b.WriteString(", args: {q: '{{steps.a.output}}'}")
		}
		b.WriteString(", join: j}\n")
	}
	b.WriteString(" j: {action: e, done: true}\n")
	return []byte(b.String())
}

func benchRegistry(b *testing.B) *flowdoc.Registry {
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "e", func(ctx context.Context, c flowdoc.ActionCall, in json.RawMessage) (json.RawMessage, error) {
		return in, nil
	}); err != nil {
		b.Fatal(err)
	}
	return reg
}

// BenchmarkLoad parses and compiles documents of 1k to 30k steps, chains
// and fan-out/fan-in (docs/benchmarks.md).
func BenchmarkLoad(b *testing.B) {
	reg := benchRegistry(b)
	for _, shape := range []struct {
		name string
		doc  func(int) []byte
	}{{"chain", chainDoc}, {"fan", fanDoc}} {
		for _, n := range []int{1000, 3000, 10000, 30000} {
			data := shape.doc(n)
			b.Run(fmt.Sprintf("%s/steps=%d", shape.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					if _, err := flowdoc.Load("bench.yaml", data, reg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The benchmark's documents fit in a document, and a chain of 30,000
// steps, below flow.MaxSteps, compiles.
func TestBenchDocuments(t *testing.T) {
	for _, doc := range []func(int) []byte{chainDoc, fanDoc} {
		if data := doc(30000); len(data) > flowdoc.MaxDocumentSize {
			t.Fatalf("a document of 30,000 steps is %d bytes, more than %d", len(data), flowdoc.MaxDocumentSize)
		}
	}
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "e", func(ctx context.Context, c flowdoc.ActionCall, in json.RawMessage) (json.RawMessage, error) {
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}
	f, err := flowdoc.Load("bench.yaml", chainDoc(30000), reg)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.Steps()); n != 30000 {
		t.Fatalf("%d steps, want 30000", n)
	}
}
