package hephaestus_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/hephaestus-go/hephaestus"

// The layers, bottom to top. A package imports only packages of its own
// layer or below; every package of the module has a layer (or is a test
// helper). docs/architecture.md draws them.
const (
	layerCore    = iota // leaf types and pure cores: decide without I/O
	layerStore          // the storage seams and their backends
	layerRuntime        // the runtime services the root composes
	layerAPI            // the public API: the root, documents, test helpers for users
	layerService        // the HTTP API and the dashboard over the root
	layerApp            // applications: the heph binary, examples, end-to-end tests
)

var layerNames = []string{"core", "store", "runtime", "api", "service", "app"}

// layers assigns the module's packages (paths under the module, "" for
// the root) to their layers; a path ending in "/..." covers a tree.
var layers = map[string]int{
	"hephtype": layerCore, "clock": layerCore, "businesskey": layerCore, "flow": layerCore, "workflow": layerCore, "job": layerCore,
	"internal/engine": layerCore, "internal/replay": layerCore, "internal/flowctl": layerCore, "internal/cronspec": layerCore,
	"internal/dag": layerCore, "internal/flowgraph": layerCore, "internal/graphtext": layerCore, "internal/migrate": layerCore,
	"internal/wfdef": layerCore, "workflow/workflowcheck": layerCore, "internal/versionrule": layerCore, "internal/suggest": layerCore,
	"internal/runsteps": layerCore, "codec": layerCore, "blobstore": layerCore,

	"internal/attrfilter": layerStore,

	"store/...": layerStore, "blobstore/gocloudblob": layerStore,

	"internal/commit": layerRuntime, "internal/worker": layerRuntime, "internal/remote": layerRuntime, "internal/flowrt": layerRuntime,
	"internal/wfrt": layerRuntime, "internal/maintenance": layerRuntime, "internal/telemetry": layerRuntime, "internal/tracing": layerRuntime,
	"internal/metrics": layerRuntime, "internal/limits": layerRuntime, "internal/secrets": layerRuntime, "internal/schedule": layerRuntime, "internal/triggers": layerRuntime,
	"internal/notify": layerRuntime, "internal/hookin": layerRuntime,
	"internal/steplog": layerRuntime, "internal/payloadstore": layerRuntime,

	"": layerAPI, "flowdoc": layerAPI, "hephtest/...": layerAPI,

	"server": layerService, "dashboard": layerService,

	"client": layerApp, "app/...": layerApp, "cmd/...": layerApp, "examples/...": layerApp, "e2e/...": layerApp,
}

// testHelpers are imported by tests of any layer; they import nothing of
// the module above the store.
var testHelpers = []string{"internal/pgtest/...", "internal/puritytest", "internal/golden", "internal/oidctest", "internal/apitest", "internal/metrics/metricstest"}

// pureCores are the core packages that must stay free of I/O as well
// (puritytest checks them); the core layer holds them.
var pureCores = []string{module + "/internal/engine", module + "/internal/replay", module + "/internal/flowctl", module + "/flow", module + "/workflow", module + "/hephtype", module + "/job", module + "/internal/graphtext", module + "/internal/versionrule", module + "/internal/suggest", module + "/internal/runsteps"}

// layerOf returns the layer of a module package, and whether it is a test
// helper; ok is false for a package no rule covers.
func layerOf(pkg string) (layer int, helper, ok bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	match := func(pattern string) bool {
		if tree, isTree := strings.CutSuffix(pattern, "/..."); isTree {
			return rel == tree || strings.HasPrefix(rel, tree+"/")
		}
		return rel == pattern
	}
	for _, h := range testHelpers {
		if match(h) {
			return layerStore, true, true
		}
	}
	best, found := -1, ""
	for pattern, l := range layers {
		// The most specific rule wins.
		if match(pattern) && len(pattern) >= len(found) {
			best, found = l, pattern
		}
	}
	if best < 0 {
		return 0, false, false
	}
	return best, false, true
}

// importViolations applies the layers to an import graph (package → its
// imports, module packages only).
func importViolations(graph map[string][]string) []string {
	var out []string
	for pkg, imports := range graph {
		l, helper, ok := layerOf(pkg)
		if !ok {
			out = append(out, pkg+" has no layer: add it to the layers of arch_test.go (and to docs/architecture.md)")
			continue
		}
		for _, imp := range imports {
			il, ihelper, iok := layerOf(imp)
			switch {
			case !iok:
				continue // reported as a package of its own
			case ihelper && !helper:
				continue
			case il > l:
				out = append(out, fmt.Sprintf("%s (layer %s) imports %s (layer %s): an arrow up the layers", pkg, layerNames[l], imp, layerNames[il]))
			}
		}
	}
	sort.Strings(out)
	return out
}

// Dependencies point down the layers: app → service → api → runtime →
// store → core.
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
	for _, p := range pureCores {
		if l, _, ok := layerOf(p); !ok || l != layerCore {
			t.Errorf("pure core %s is not in the core layer", p)
		}
		if _, ok := graph[p]; !ok {
			t.Errorf("package %s is not in the module: update the lists of this test", p)
		}
	}
	for _, v := range importViolations(graph) {
		t.Error(v)
	}
	// The rules do catch the edges they forbid, and a package without a
	// layer.
	bad := map[string][]string{
		module + "/internal/worker":   {module},
		module + "/internal/engine":   {module + "/internal/wfrt"},
		module + "/store/sqlite":      {module + "/internal/commit"},
		module + "/server":            {module + "/client"},
		module + "/internal/pgtest":   {module + "/server"},
		module + "/internal/newthing": nil,
	}
	if n := len(importViolations(bad)); n != 6 {
		t.Fatalf("the rules found %d of 6 faults: %v", n, importViolations(bad))
	}
}

// The library uses the OpenTelemetry API only: the SDK and its exporters
// are for the binary (app/cli) and for tests. A program that embeds
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
	cli, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}`, "./app/cli").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if !strings.Contains(string(cli), "go.opentelemetry.io/otel/sdk/trace\n") {
		t.Fatal("app/cli does not use the trace SDK: the check above would not see one")
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
		if p := strings.Trim(imp.Path.Value, `"`); p != "context" && p != "encoding/json" && p != "time" && p != module+"/internal/remote" && p != module+"/hephtype" {
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
