// Package workflowcheck is a go/analysis analyzer that reports, in code
// reachable from a workflow function, what breaks deterministic replay:
// reading the clock, randomness, goroutines, channels and select, sync
// primitives, iteration over maps, writes to package-level variables, and
// I/O (files, the network, databases, processes, the environment). Each
// diagnostic names what was found and the workflow API to use instead.
//
// Workflow code is every function with a workflow.Context parameter (the
// functions given to workflow.New, phase handlers, parallel branches,
// helpers that take the Context), and every function of the same package
// it calls or refers to. Activities (functions with a context.Context
// parameter) are not workflow code: they may do anything. A call from
// workflow code of a function of another package of the same module that
// reaches non-deterministic code is reported at the call (a fact carries
// what the function reaches); functions of other modules and of the
// standard library are not followed.
//
// A finding that is known to be harmless is silenced by a comment on its
// line or the line above, with a reason:
//
//	//heph:nondeterministic-ok read once at start-up, never changes
//
// On a call of a function of the package, the comment also stops the
// check from following the call: what the callee does is accepted (it is
// still checked if workflow code calls it elsewhere without the comment).
// The comment without a reason silences nothing and is itself reported.
//
// Run it with heph vet ./..., with go vet -vettool=$(which heph) ./...,
// or add Analyzer to a multichecker.
package workflowcheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"reflect"
	"sort"

	"golang.org/x/tools/go/analysis"
)

// WorkflowPackage is the import path of the workflow API whose Context
// marks workflow code.
const WorkflowPackage = "github.com/hephaestus-go/hephaestus/workflow"

// Directive is the comment that silences a finding; a reason must follow.
const Directive = "//heph:nondeterministic-ok"

// Analyzer reports non-deterministic code reachable from workflow
// functions. Its result is a *Result.
var Analyzer = &analysis.Analyzer{
	Name:       "workflowcheck",
	Doc:        "report code reachable from Hephaestus workflow functions that breaks deterministic replay (time, randomness, goroutines, channels, map order, package variables, I/O)",
	URL:        "https://pkg.go.dev/github.com/hephaestus-go/hephaestus/workflow/workflowcheck",
	Run:        run,
	ResultType: reflect.TypeFor[*Result](),
	FactTypes:  []analysis.Fact{new(reaches)},
}

// Result is what the analyzer found in a package besides its
// diagnostics.
type Result struct {
	// Workflows names the workflow functions (those with a
	// workflow.Context parameter) the package declares, function
	// literals as "func literal at file:line"; sorted.
	Workflows []string
	// Reached names the other functions of the package reached from
	// them, which were checked as workflow code too; sorted.
	Reached []string
}

// checker holds the state of one pass.
type checker struct {
	pass     *analysis.Pass
	suppress map[string]map[int]bool // file → line → a directive with a reason
	decls    map[*types.Func]*ast.FuncDecl
	roots    map[ast.Node]bool // functions with a workflow.Context parameter
	visited  map[*ast.FuncDecl]bool
	queue    []reached
	reported map[token.Pos]bool
}

// reached is a function of the package to check as workflow code, and
// the workflow function it was first reached from.
type reached struct {
	decl *ast.FuncDecl
	from string
}

// emitFunc receives a finding: where, what, and the API to use instead.
type emitFunc func(pos token.Pos, found, advice string)

// reaches is the fact of a function that reaches non-deterministic code:
// importers in the same module report their calls of it from workflow
// code.
type reaches struct {
	Module string // the function's module
	Found  string // what it reaches ("time.Now")
	Advice string
	At     string // where: file.go:line
}

func (*reaches) AFact() {}

func (f *reaches) String() string { return "reaches " + f.Found + " at " + f.At }

func run(pass *analysis.Pass) (any, error) {
	c := &checker{
		pass:     pass,
		decls:    map[*types.Func]*ast.FuncDecl{},
		roots:    map[ast.Node]bool{},
		visited:  map[*ast.FuncDecl]bool{},
		reported: map[token.Pos]bool{},
	}
	c.readDirectives()
	rootDecls, rootLits := c.findRoots()
	res := &Result{}
	for _, d := range rootDecls {
		c.visited[d] = true
		res.Workflows = append(res.Workflows, funcName(d))
		c.walk(d.Body, funcName(d), "")
	}
	for _, l := range rootLits {
		p := pass.Fset.Position(l.Pos())
		name := fmt.Sprintf("func literal at %s:%d", filepath.Base(p.Filename), p.Line)
		res.Workflows = append(res.Workflows, name)
		c.walk(l.Body, name, "")
	}
	for len(c.queue) > 0 {
		r := c.queue[0]
		c.queue = c.queue[1:]
		res.Reached = append(res.Reached, funcName(r.decl))
		c.walk(r.decl.Body, r.from, fmt.Sprintf(" (in %s, reached from workflow function %s)", funcName(r.decl), r.from))
	}
	c.exportFacts()
	sort.Strings(res.Workflows)
	sort.Strings(res.Reached)
	return res, nil
}

// findRoots indexes the package's functions and returns those with a
// workflow.Context parameter.
func (c *checker) findRoots() (decls []*ast.FuncDecl, lits []*ast.FuncLit) {
	for _, f := range c.pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if fn, ok := c.pass.TypesInfo.Defs[n.Name].(*types.Func); ok {
					c.decls[fn] = n
				}
				if n.Body != nil && c.hasParam(n.Type, isWorkflowContext) {
					c.roots[n] = true
					decls = append(decls, n)
				}
			case *ast.FuncLit:
				if c.hasParam(n.Type, isWorkflowContext) {
					c.roots[n] = true
					lits = append(lits, n)
				}
			}
			return true
		})
	}
	return decls, lits
}

// inspect checks a function body: findings go to emit, the identifiers
// of functions it calls or refers to (on lines no directive silences) to
// call. Function literals with their own workflow.Context (checked as
// workflow functions) and activities (with a context.Context) are
// skipped.
func (c *checker) inspect(body *ast.BlockStmt, emit emitFunc, call func(id *ast.Ident)) {
	if body == nil {
		return
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return !c.roots[n] && !c.hasParam(n.Type, isStdContext)
		case *ast.Ident:
			c.checkUse(n, emit)
			if !c.silenced(n.Pos()) {
				call(n)
			}
		default:
			c.checkNode(n, emit)
		}
		return true
	})
}

// walk checks the body of a function as workflow code: from is the
// workflow function it was reached from, via says how for the messages
// ("" in a workflow function itself).
func (c *checker) walk(body *ast.BlockStmt, from, via string) {
	emit := func(pos token.Pos, found, advice string) { c.report(pos, found, advice, via) }
	c.inspect(body, emit, func(id *ast.Ident) {
		if d := c.declOf(id); d != nil && !c.visited[d] {
			c.visited[d] = true
			c.queue = append(c.queue, reached{decl: d, from: from})
		}
		if fn, f := c.importedFact(id); f != nil {
			emit(id.Pos(), fmt.Sprintf("call of %s (it reaches %s at %s)", fn.FullName(), f.Found, f.At), f.Advice)
		}
	})
}

// declOf returns the declaration of the function of the package that id
// refers to, unless it is a workflow function (checked on its own) or an
// activity.
func (c *checker) declOf(id *ast.Ident) *ast.FuncDecl {
	fn, ok := c.pass.TypesInfo.Uses[id].(*types.Func)
	if !ok {
		return nil
	}
	d := c.decls[fn.Origin()]
	if d == nil || d.Body == nil || c.roots[d] || c.hasParam(d.Type, isStdContext) {
		return nil
	}
	return d
}

// importedFact returns the function of another package of the same
// module that id refers to, and its fact if it reaches non-deterministic
// code.
func (c *checker) importedFact(id *ast.Ident) (*types.Func, *reaches) {
	fn, ok := c.pass.TypesInfo.Uses[id].(*types.Func)
	mod := c.module()
	if !ok || mod == "" || fn.Pkg() == nil || fn.Pkg() == c.pass.Pkg {
		return nil, nil
	}
	var f reaches
	if !c.pass.ImportObjectFact(fn.Origin(), &f) || f.Module != mod {
		return nil, nil
	}
	return fn, &f
}

// module returns the path of the package's module; "" outside modules
// (the standard library).
func (c *checker) module() string {
	if c.pass.Module == nil {
		return ""
	}
	return c.pass.Module.Path
}

// exportFacts marks every function of the package (other than workflow
// functions and activities) that reaches non-deterministic code, itself
// or through the functions it calls, so that workflow code of other
// packages of the module that calls it is reported. Packages outside a
// module (the standard library) export nothing.
func (c *checker) exportFacts() {
	mod := c.module()
	if mod == "" {
		return
	}
	type summary struct {
		fn      *types.Func
		fact    *reaches
		callees []*ast.FuncDecl
	}
	var order []*ast.FuncDecl
	sums := map[*ast.FuncDecl]*summary{}
	for fn, d := range c.decls {
		if d.Body != nil && !c.roots[d] && !c.hasParam(d.Type, isStdContext) && (d.Recv != nil || d.Name.Name != "init") {
			order = append(order, d)
			sums[d] = &summary{fn: fn}
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Pos() < order[j].Pos() })
	for _, d := range order {
		s := sums[d]
		first := func(pos token.Pos, found, advice string) {
			if s.fact == nil && !c.silenced(pos) {
				p := c.pass.Fset.Position(pos)
				s.fact = &reaches{Module: mod, Found: found, Advice: advice, At: fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line)}
			}
		}
		c.inspect(d.Body, first, func(id *ast.Ident) {
			if callee := c.declOf(id); callee != nil {
				s.callees = append(s.callees, callee)
			} else if _, f := c.importedFact(id); f != nil && s.fact == nil {
				s.fact = f
			}
		})
	}
	for changed := true; changed; {
		changed = false
		for _, d := range order {
			s := sums[d]
			for _, callee := range s.callees {
				if s.fact == nil && sums[callee] != nil && sums[callee].fact != nil {
					s.fact, changed = sums[callee].fact, true
				}
			}
		}
	}
	for _, d := range order {
		if s := sums[d]; s.fact != nil {
			c.pass.ExportObjectFact(s.fn, s.fact)
		}
	}
}

// report records a finding at pos unless a directive silences it.
func (c *checker) report(pos token.Pos, found, advice, via string) {
	if c.reported[pos] {
		return
	}
	c.reported[pos] = true
	if c.silenced(pos) {
		return
	}
	c.pass.Reportf(pos, "%s in workflow code%s: %s", found, via, advice)
}

// silenced reports whether a directive with a reason stands on the line
// of pos or the line above.
func (c *checker) silenced(pos token.Pos) bool {
	p := c.pass.Fset.Position(pos)
	lines := c.suppress[p.Filename]
	return lines[p.Line] || lines[p.Line-1]
}

// hasParam reports whether a function type has a parameter whose type
// satisfies is.
func (c *checker) hasParam(ft *ast.FuncType, is func(types.Type) bool) bool {
	if ft == nil || ft.Params == nil {
		return false
	}
	for _, f := range ft.Params.List {
		if t := c.pass.TypesInfo.TypeOf(f.Type); t != nil && is(t) {
			return true
		}
	}
	return false
}

func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	return n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

func isWorkflowContext(t types.Type) bool { return isNamed(t, WorkflowPackage, "Context") }

func isStdContext(t types.Type) bool { return isNamed(t, "context", "Context") }

// funcName is a declared function's name, Type.Method for methods.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	return recvName(d.Recv.List[0].Type) + "." + d.Name.Name
}

// recvName is the name of a method's receiver type: T of T, *T, T[P].
func recvName(t ast.Expr) string {
	if e := operand(t); e != nil {
		return recvName(e)
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
