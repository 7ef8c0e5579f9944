// Package puritytest checks that a decision core is pure: that neither it
// nor any package of this module it imports does I/O or reads the wall
// clock. Only tests import it.
package puritytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The decision core is a pure function (design section 2): no database, no
// network, no files or environment, no clock. TestPurity enforces that on
// internal/engine and every package of this module it imports, directly or
// not.

// forbiddenImport reports whether a package of the pure core must not import
// path.
func forbiddenImport(path string) bool {
	switch {
	case path == "database/sql", path == "net", path == "os":
		return true
	case strings.HasPrefix(path, "database/sql/"), strings.HasPrefix(path, "net/"), strings.HasPrefix(path, "os/"):
		return true
	}
	return false
}

// wallClock lists the functions of package time that read or wait on the
// wall clock.
var wallClock = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// impurities returns what in file f breaks purity: forbidden imports and
// references to the wall-clock functions of package time, under whatever
// name the file imports it.
func impurities(fset *token.FileSet, f *ast.File) []string {
	var found []string
	timeNames := map[string]bool{}
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			found = append(found, fmt.Sprintf("%s: bad import path %s", fset.Position(spec.Pos()), spec.Path.Value))
			continue
		}
		if forbiddenImport(path) {
			found = append(found, fmt.Sprintf("%s: imports %q", fset.Position(spec.Pos()), path))
		}
		if path != "time" {
			continue
		}
		name := "time"
		if spec.Name != nil {
			name = spec.Name.Name
		}
		switch name {
		case "_":
		case ".":
			// Calls of a dot-imported time.Now would read as Now(): refuse
			// the form outright rather than guess.
			found = append(found, fmt.Sprintf("%s: dot-imports \"time\"; import it by name", fset.Position(spec.Pos())))
		default:
			timeNames[name] = true
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		// An identifier the parser resolved is a local declaration that
		// shadows the import; a package name stays unresolved.
		if ok && id.Obj == nil && timeNames[id.Name] && wallClock[sel.Sel.Name] {
			found = append(found, fmt.Sprintf("%s: uses time.%s (as %s.%s)", fset.Position(sel.Pos()), sel.Sel.Name, id.Name, sel.Sel.Name))
		}
		return true
	})
	return found
}

// listedPackage is the part of `go list -json` output the test reads.
type listedPackage struct {
	ImportPath      string
	Dir             string
	DepOnly         bool
	Standard        bool
	GoFiles         []string
	CgoFiles        []string
	IgnoredGoFiles  []string
	Imports         []string
	Module          *struct{ Path string }
	Error           *struct{ Err string }
	DepsErrors      []*struct{ Err string }
	IncompleteFiles []string
}

func goTool(t *testing.T) string {
	t.Helper()
	// go test puts $GOROOT/bin first on PATH. A missing tool is a failure,
	// not a skip: this test must not pass by not running.
	path, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			if p, err2 := exec.LookPath(filepath.Join(root, "bin", "go")); err2 == nil {
				return p
			}
		}
		t.Fatalf("the go tool is not on PATH (%v); the purity check needs it", err)
	}
	return path
}

// moduleClosure lists the package in the current directory, whose import
// path ends in pkg, and the packages of its module that it imports
// transitively.
func moduleClosure(t *testing.T, pkg string) []listedPackage {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-deps", "-json", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json .: %v\n%s", err, stderr.Bytes())
	}
	var all []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		all = append(all, p)
	}
	var self *listedPackage
	for i := range all {
		if !all[i].DepOnly {
			if self != nil {
				t.Fatalf("go list matched several packages: %s and %s", self.ImportPath, all[i].ImportPath)
			}
			self = &all[i]
		}
	}
	if self == nil || !strings.HasSuffix(self.ImportPath, "/"+pkg) || self.Module == nil {
		t.Fatalf("go list did not report %s as a module package: %+v", pkg, self)
	}
	var mod []listedPackage
	for _, p := range all {
		if p.Error != nil {
			t.Fatalf("go list: package %s: %s", p.ImportPath, p.Error.Err)
		}
		if !p.Standard && p.Module != nil && p.Module.Path == self.Module.Path {
			mod = append(mod, p)
		}
	}
	return mod
}

// Check fails t if the package of the test's directory (its import path
// ends in pkg), or any package of this module it imports, imports
// database/sql, net, os (or their sub-packages) or calls a wall-clock
// function of package time.
func Check(t *testing.T, pkg string) {
	t.Helper()
	pkgs := moduleClosure(t, pkg)
	names := make([]string, len(pkgs))
	for i, p := range pkgs {
		names[i] = p.ImportPath
	}
	t.Logf("module packages in the closure of %s: %s", pkg, strings.Join(names, ", "))
	files := 0
	for _, p := range pkgs {
		for _, imp := range p.Imports {
			if forbiddenImport(imp) {
				t.Errorf("package %s imports %q: the decision core must do no I/O", p.ImportPath, imp)
			}
		}
		// Files excluded by build constraints count too: the core must be
		// pure on every platform.
		srcs := slices.Concat(p.GoFiles, p.CgoFiles, p.IgnoredGoFiles)
		for _, name := range srcs {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatalf("parsing %s: %v", name, err)
			}
			files++
			for _, v := range impurities(fset, f) {
				t.Errorf("package %s: %s: the decision core must do no I/O and read no clock", p.ImportPath, v)
			}
		}
	}
	if files == 0 {
		t.Fatal("the purity check parsed no file")
	}
}

// CheckDetector makes sure the detector catches what it is meant to, so
// that Check cannot pass by checking nothing.
func CheckDetector(t *testing.T) {
	t.Helper()
	cases := []struct {
		name string
		src  string
		want []string // substrings, one per expected finding, in order
	}{{
		name: "plain",
		src: `package p
import (
	"os"
	"time"
)
func f() time.Time { _ = os.Args; return time.Now() }
`,
		want: []string{`imports "os"`, "uses time.Now"},
	}, {
		name: "renamed and referenced without a call",
		src: `package p
import (
	clock "time"
	"net/http"
	"database/sql"
	"os/exec"
)
var _ = http.Get
var _ *sql.DB
var _ = exec.Command
var sleep = clock.Sleep
func g() { <-clock.After(clock.Second); clock.NewTicker(1).Stop(); _ = clock.Since(clock.Time{}) }
`,
		want: []string{`imports "net/http"`, `imports "database/sql"`, `imports "os/exec"`,
			"uses time.Sleep", "uses time.After", "uses time.NewTicker", "uses time.Since"},
	}, {
		name: "dot import",
		src: `package p
import . "time"
func h() Time { return Now() }
`,
		want: []string{`dot-imports "time"`},
	}, {
		name: "pure",
		src: `package p
import (
	"fmt"
	"time"
	"osext/notos"
)
type clock struct{ Now func() int }
func d(time clock) int { return time.Now() }
var timeout = 5 * time.Second
func s(d time.Duration) string { return fmt.Sprint(d, notos.X) }
`,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "snippet.go", c.src, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := impurities(fset, f)
			if len(got) != len(c.want) {
				t.Fatalf("found %d impurities, want %d:\n%s", len(got), len(c.want), strings.Join(got, "\n"))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %d = %q, want it to mention %q", i, got[i], w)
				}
			}
		})
	}
}
