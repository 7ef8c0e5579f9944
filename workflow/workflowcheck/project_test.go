package workflowcheck_test

import (
	"strings"
	"testing"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/hephaestus-go/hephaestus/workflow/workflowcheck"
)

// The project's own workflows, in the examples, the end-to-end suite and
// hephtest's tests, pass the analyzer: what they do on purpose (a test
// that changes a workflow's input between replays, chaos delays) carries
// a //heph:nondeterministic-ok with its reason. The analyzer did see
// their workflow functions.
func TestProjectWorkflowsPass(t *testing.T) {
	t.Parallel()
	cfg := &packages.Config{
		Dir: "../..",
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles | packages.NeedImports |
			packages.NeedTypes | packages.NeedTypesSizes | packages.NeedSyntax | packages.NeedTypesInfo | packages.NeedModule,
		Tests: true,
	}
	pkgs, err := packages.Load(cfg, "./examples/...", "./e2e/...", "./hephtest/...")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 {
		t.Fatal("the packages do not load")
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{workflowcheck.Analyzer}, pkgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	workflows := map[string]int{}
	for act := range graph.All() {
		if !act.IsRoot {
			continue
		}
		if act.Err != nil {
			t.Fatalf("%s: %v", act.Package.ID, act.Err)
		}
		for _, d := range act.Diagnostics {
			t.Errorf("%s: %s", act.Package.Fset.Position(d.Pos), d.Message)
		}
		for _, dir := range []string{"/examples/", "/e2e", "/hephtest"} {
			if strings.Contains(act.Package.PkgPath, dir) {
				workflows[dir] += len(act.Result.(*workflowcheck.Result).Workflows)
			}
		}
	}
	for _, dir := range []string{"/examples/", "/e2e", "/hephtest"} {
		if workflows[dir] == 0 {
			t.Errorf("no workflow function found under %s: the analyzer saw no workflow code", dir)
		}
	}
	t.Logf("workflow functions checked: %v", workflows)
}
