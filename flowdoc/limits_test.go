package flowdoc_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// A document of more than flow.MaxSteps steps is refused with an error
// that names the limit and the count, from the count of the keys of its
// steps, before any step is read: the memory it takes is bounded by the
// document's text, not by what compiling the steps would take.
func TestMaxStepsDocument(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: big\nsteps: {")
	for i := range flow.MaxSteps + 1 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(stepName(i) + ": 0")
	}
	b.WriteString("}\n")
	data := []byte(b.String())
	if len(data) > flowdoc.MaxDocumentSize {
		t.Fatalf("the test's document is %d bytes, more than %d", len(data), flowdoc.MaxDocumentSize)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := flowdoc.Parse("big.yaml", data)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a document of flow.MaxSteps+1 steps parses")
	}
	errs := flowdoc.Errors(err)
	want := "the document has " + strconv.Itoa(flow.MaxSteps+1) + " steps, more than the limit of " + strconv.Itoa(flow.MaxSteps) + " (flow.MaxSteps)"
	if len(errs) != 1 || errs[0].Path != "steps" || errs[0].Message != want {
		t.Fatalf("errors %v, want one at steps: %s", errs, want)
	}
	// The YAML tree of the text is all that is built (about 100 bytes per
	// byte of text); compiling the steps would take some 13 KiB each, 1,400
	// bytes per byte of this document.
	if got := after.TotalAlloc - before.TotalAlloc; got > 256*uint64(len(data)) {
		t.Errorf("refusing the document allocated %d bytes, more than 256 per byte of its %d", got, len(data))
	}
	t.Logf("refusing %d bytes allocated %d bytes", len(data), after.TotalAlloc-before.TotalAlloc)
}
