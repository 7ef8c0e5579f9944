// Package apitest checks a package's exported API for types users cannot
// name: a type from a package whose import path has an "internal" element
// (".../internal/...") in any exported signature, field, method, alias,
// variable or constant. Only tests import it.
//
// Apply it to a public package from one of its tests:
//
//	func TestNoInternalTypes(t *testing.T) { apitest.NoInternalTypes(t, ".") }
//
// NoInternalNames is stricter: it also refuses exported constants and
// variables declared with an internal package's name (EventOK =
// engine.EventOK), which go doc prints although their type is public.
package apitest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// NoInternalTypes fails t once per exported identifier of the package in
// dir whose API mentions an internal type, naming the identifier and the
// type.
func NoInternalTypes(t testing.TB, dir string) {
	t.Helper()
	leaks, err := Leaks(dir)
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	for _, l := range leaks {
		t.Errorf("exported API mentions an internal type: %s", l)
	}
}

// NoInternalNames is NoInternalTypes that also fails t for each exported
// constant or variable whose declaration names an internal package.
func NoInternalNames(t testing.TB, dir string) {
	t.Helper()
	leaks, err := NameLeaks(dir)
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	for _, l := range leaks {
		t.Errorf("exported API mentions an internal package: %s", l)
	}
}

// Leaks type-checks the package in dir (its non-test Go files, imports
// read from the export data the go command builds) and returns, sorted,
// one line per exported identifier whose API mentions a type of an
// internal package: "<identifier>: <import path>.<type>".
func Leaks(dir string) ([]string, error) {
	pkg, _, _, err := load(dir)
	if err != nil {
		return nil, err
	}
	return exportedLeaks(pkg), nil
}

// NameLeaks is Leaks plus one line per exported constant or variable whose
// declaration names an internal package: "<identifier>: declared with
// <import path>".
func NameLeaks(dir string) ([]string, error) {
	pkg, files, info, err := load(dir)
	if err != nil {
		return nil, err
	}
	out := append(exportedLeaks(pkg), valueLeaks(pkg, files, info)...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// shared is the file set and importer of every load in a process: the
// importer keeps the packages it read, so a test that checks many
// packages reads their common dependencies (the standard library, pgx,
// cel-go …) once, not once a package. It is not safe for concurrent use:
// loads take turns.
var shared struct {
	sync.Mutex
	fset *token.FileSet
	imp  types.Importer
	// exports maps an import path to the file of its export data.
	exports map[string]string
}

// raceFlag is "-race" in a test built with the race detector (race.go):
// go list then names the export data that the test binary's build left in
// the build cache, instead of compiling the packages again.
var raceFlag string

// listExports adds to shared.exports the export data of the package in
// dir and of its dependencies, which go list -export builds (most come
// from the build cache). Importing them from export data instead of
// type-checking their source took a minute less of the root package's
// tests under the race detector.
func listExports(dir string) error {
	args := []string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}
	if raceFlag != "" {
		args = append(args, raceFlag)
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -export in %s: %w\n%s", dir, err, stderr.String())
	}
	for line := range strings.Lines(string(out)) {
		path, file, _ := strings.Cut(strings.TrimSpace(line), "\t")
		if file != "" {
			shared.exports[path] = file
		}
	}
	return nil
}

func load(dir string) (*types.Package, []*ast.File, *types.Info, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.fset == nil {
		shared.fset = token.NewFileSet()
		shared.exports = map[string]string{}
		shared.imp = importer.ForCompiler(shared.fset, "gc", func(path string) (io.ReadCloser, error) {
			file, ok := shared.exports[path]
			if !ok {
				return nil, fmt.Errorf("no export data for %s", path)
			}
			return os.Open(file)
		})
	}
	if err := listExports(dir); err != nil {
		return nil, nil, nil, err
	}
	fset := shared.fset
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, nil, nil, fmt.Errorf("%s holds no Go package", dir)
	}
	conf := types.Config{Importer: shared.imp}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("type-check %s: %w", dir, err)
	}
	return pkg, files, info, nil
}

// valueLeaks reports exported constants and variables whose declaration,
// which go doc prints, names an internal package (EventOK =
// engine.EventOK): users see a name they cannot import even where the type
// is a plain string.
func valueLeaks(pkg *types.Package, files []*ast.File, info *types.Info) []string {
	var out []string
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				var exported []string
				for _, n := range vs.Names {
					if n.IsExported() {
						exported = append(exported, n.Name)
					}
				}
				if len(exported) == 0 {
					continue
				}
				var exprs []ast.Node
				for _, v := range vs.Values {
					exprs = append(exprs, v)
				}
				if vs.Type != nil {
					exprs = append(exprs, vs.Type)
				}
				for _, e := range exprs {
					ast.Inspect(e, func(n ast.Node) bool {
						id, ok := n.(*ast.Ident)
						if !ok {
							return true
						}
						if pn, ok := info.Uses[id].(*types.PkgName); ok && isInternal(pn.Imported()) {
							for _, name := range exported {
								out = append(out, fmt.Sprintf("%s.%s: declared with %s", pkg.Name(), name, pn.Imported().Path()))
							}
						}
						return true
					})
				}
			}
		}
	}
	return out
}

// exportedLeaks walks the exported objects of pkg.
func exportedLeaks(pkg *types.Package) []string {
	var out []string
	report := func(ident string, t types.Type) {
		for _, n := range internalTypes(t) {
			out = append(out, fmt.Sprintf("%s: %s", ident, n))
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		ident := pkg.Name() + "." + name
		switch obj := obj.(type) {
		case *types.TypeName:
			if obj.IsAlias() {
				report(ident, obj.Type())
				continue
			}
			named, ok := obj.Type().(*types.Named)
			if !ok {
				continue
			}
			if tp := named.TypeParams(); tp != nil {
				for i := range tp.Len() {
					report(ident, tp.At(i).Constraint())
				}
			}
			switch u := named.Underlying().(type) {
			case *types.Struct:
				for i := range u.NumFields() {
					if f := u.Field(i); f.Exported() {
						report(ident+"."+f.Name(), f.Type())
					}
				}
			case *types.Interface:
				for i := range u.NumMethods() {
					if m := u.Method(i); m.Exported() {
						report(ident+"."+m.Name(), m.Type())
					}
				}
			default:
				report(ident, u)
			}
			for i := range named.NumMethods() {
				if m := named.Method(i); m.Exported() {
					report(fmt.Sprintf("%s.(%s).%s", pkg.Name(), recv(m), m.Name()), m.Type())
				}
			}
		default: // funcs, vars, consts
			report(ident, obj.Type())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func recv(m *types.Func) string {
	r := m.Type().(*types.Signature).Recv().Type()
	if p, ok := r.(*types.Pointer); ok {
		return "*" + p.Elem().(*types.Named).Obj().Name()
	}
	return r.(*types.Named).Obj().Name()
}

// internalTypes returns the internal named types t mentions, as
// "path.Name". A named type of another package is not entered: its own
// package answers for its API.
func internalTypes(t types.Type) []string {
	var out []string
	seen := map[types.Type]bool{}
	var walk func(types.Type)
	walk = func(t types.Type) {
		if t == nil || seen[t] {
			return
		}
		seen[t] = true
		switch t := t.(type) {
		case *types.Alias:
			if isInternal(t.Obj().Pkg()) {
				out = append(out, t.Obj().Pkg().Path()+"."+t.Obj().Name())
			}
			walk(types.Unalias(t))
		case *types.Named:
			if isInternal(t.Obj().Pkg()) {
				out = append(out, t.Obj().Pkg().Path()+"."+t.Obj().Name())
			}
			if ta := t.TypeArgs(); ta != nil {
				for i := range ta.Len() {
					walk(ta.At(i))
				}
			}
		case *types.Pointer:
			walk(t.Elem())
		case *types.Slice:
			walk(t.Elem())
		case *types.Array:
			walk(t.Elem())
		case *types.Map:
			walk(t.Key())
			walk(t.Elem())
		case *types.Chan:
			walk(t.Elem())
		case *types.Signature:
			walk(t.Params())
			walk(t.Results())
		case *types.Tuple:
			for i := range t.Len() {
				walk(t.At(i).Type())
			}
		case *types.Struct:
			for i := range t.NumFields() {
				if f := t.Field(i); f.Exported() || f.Embedded() {
					walk(f.Type())
				}
			}
		case *types.Interface:
			for i := range t.NumExplicitMethods() {
				walk(t.ExplicitMethod(i).Type())
			}
			for i := range t.NumEmbeddeds() {
				walk(t.EmbeddedType(i))
			}
		case *types.Union:
			for i := range t.Len() {
				walk(t.Term(i).Type())
			}
		case *types.TypeParam:
			walk(t.Constraint())
		}
	}
	walk(t)
	return out
}

// isInternal reports whether pkg's import path has an "internal" element.
func isInternal(pkg *types.Package) bool {
	if pkg == nil {
		return false
	}
	p := "/" + pkg.Path() + "/"
	return strings.Contains(p, "/internal/")
}
