package workflowcheck_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/hephaestus-go/hephaestus/workflow/workflowcheck"
)

// Every rule reports in workflow functions, literals, parallel branches
// and the helpers they reach; activities and unreachable helpers are not
// reported; a directive with a reason silences, one without does not.
func TestAnalyzer(t *testing.T) {
	rs := analysistest.Run(t, filepath.Join(analysistest.TestData(), "mod"), workflowcheck.Analyzer, "example.com/app/bad", "example.com/app/good", "example.com/app/cross")
	found := map[string]*workflowcheck.Result{}
	for _, r := range rs {
		found[r.Action.Package.PkgPath] = r.Action.Result.(*workflowcheck.Result)
	}
	if got := found["example.com/app/good"]; got == nil || len(got.Workflows) != 2 || len(got.Reached) != 1 || got.Reached[0] != "pure" {
		t.Errorf("good: workflows and reached functions = %+v, want Order and branch reaching pure", got)
	}
	if got := found["example.com/app/bad"]; got == nil || len(got.Reached) != 3 {
		t.Errorf("bad: reached functions = %+v, want helper, deeper and box.method", got)
	}
}
