package flow_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
)

// A flow of flow.MaxSteps steps builds; one more is refused with an error
// that names the limit and the count, before anything is built over the
// steps (a bounded number of allocations, whatever the count).
func TestMaxSteps(t *testing.T) {
	at := chainFlow(flow.MaxSteps)
	if _, err := at.Build(); err != nil {
		t.Fatalf("a flow of flow.MaxSteps steps: %v", err)
	}
	over := chainFlow(flow.MaxSteps + 1)
	_, err := over.Build()
	if err == nil {
		t.Fatal("a flow of flow.MaxSteps+1 steps builds")
	}
	want := "the flow has " + strconv.Itoa(flow.MaxSteps+1) + " steps, more than flow.MaxSteps (" + strconv.Itoa(flow.MaxSteps) + ")"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}
	if ves := flow.ValidationErrors(err); len(ves) != 1 || ves[0].Rule != flow.RuleTooManySteps {
		t.Errorf("validation errors %v, want one of rule %s", ves, flow.RuleTooManySteps)
	}
	if n := testing.AllocsPerRun(3, func() { _, _ = over.Build() }); n > 20 {
		t.Errorf("refusing a flow of %d steps takes %v allocations, want a handful", flow.MaxSteps+1, n)
	}
}
