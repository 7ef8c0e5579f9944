package hephaestus_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/hephaestus-go/hephaestus"

// runtimePkgs are the runtime services: they sit between the public root
// and the pure cores.
var runtimePkgs = []string{
	module + "/internal/commit",
	module + "/internal/worker",
	module + "/internal/remote",
	module + "/internal/flowrt",
	module + "/internal/wfrt",
	module + "/internal/maintenance",
	module + "/internal/telemetry",
	module + "/internal/tracing",
	module + "/internal/metrics",
	module + "/internal/limits",
	module + "/internal/secrets",
}

// pureCores decide without I/O; they know nothing of the runtime.
var pureCores = []string{module + "/internal/engine", module + "/internal/replay", module + "/internal/flowctl", module + "/flow", module + "/workflow", module + "/hephtype", module + "/job", module + "/internal/graphtext"}

// importViolations applies the direction rules to an import graph
// (package → its imports, module packages only): nothing below the root
// imports the root; a pure core or the store seam imports no runtime
// service.
func importViolations(graph map[string][]string) []string {
	var out []string
	isAny := func(p string, set []string) bool {
		for _, s := range set {
			if p == s {
				return true
			}
		}
		return false
	}
	for pkg, imports := range graph {
		below := isAny(pkg, runtimePkgs) || isAny(pkg, pureCores) || strings.HasPrefix(pkg, module+"/store")
		for _, imp := range imports {
			switch {
			case below && imp == module:
				out = append(out, pkg+" imports the root package")
			case (isAny(pkg, pureCores) || strings.HasPrefix(pkg, module+"/store")) && isAny(imp, runtimePkgs):
				out = append(out, pkg+" (a pure core or the store seam) imports the runtime package "+imp)
			}
		}
	}
	return out
}

// Dependencies point one way: public root → runtime services → pure cores
// and the store seam.
func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		graph[f[0]] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				graph[f[0]] = append(graph[f[0]], imp)
			}
		}
	}
	for _, p := range append(append([]string{}, runtimePkgs...), pureCores...) {
		if _, ok := graph[p]; !ok {
			t.Errorf("package %s is not in the module: update the lists of this test", p)
		}
	}
	for _, v := range importViolations(graph) {
		t.Error(v)
	}
	// The rules do catch the edges they forbid.
	bad := map[string][]string{
		module + "/internal/worker": {module},
		module + "/internal/engine": {module + "/internal/wfrt"},
		module + "/store/sqlite":    {module + "/internal/commit"},
	}
	if n := len(importViolations(bad)); n != 3 {
		t.Fatalf("the rules found %d of 3 forbidden edges", n)
	}
}

// The library uses the OpenTelemetry API only: the SDK and its exporters
// are for the binary (internal/cli) and for tests. A program that embeds
// the library chooses its own SDK, or none.
func TestNoOpenTelemetrySDKInLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}`, ".", "./dashboard", "./server", "./store/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(p, "go.opentelemetry.io/otel/exporters") {
			t.Errorf("the library depends on %s", p)
		}
	}
	cli, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}`, "./internal/cli").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if !strings.Contains(string(cli), "go.opentelemetry.io/otel/sdk/trace\n") {
		t.Fatal("internal/cli does not use the trace SDK: the check above would not see one")
	}
}

// Remote work lives in internal/remote: the root's remote.go holds the
// public types and forwards to it, with no goroutine, no store call and
// no token codec of its own.
func TestRootForwardsRemoteWork(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "remote.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		if p := strings.Trim(imp.Path.Value, `"`); p != "context" && p != "encoding/json" && p != "time" && p != module+"/internal/remote" {
			t.Errorf("remote.go imports %s: remote work belongs in internal/remote", p)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			t.Errorf("%s: remote.go starts a goroutine", fset.Position(n.Pos()))
		case *ast.SelectStmt:
			t.Errorf("%s: remote.go waits (select)", fset.Position(n.Pos()))
		case *ast.SelectorExpr:
			if n.Sel.Name == "Store" {
				t.Errorf("%s: remote.go reaches the store", fset.Position(n.Pos()))
			}
		}
		return true
	})
}
