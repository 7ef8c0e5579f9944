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
// parameter) are not workflow code: they may do anything.
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

func run(pass *analysis.Pass) (any, error) {
	c := &checker{
		pass:     pass,
		decls:    map[*types.Func]*ast.FuncDecl{},
		roots:    map[ast.Node]bool{},
		visited:  map[*ast.FuncDecl]bool{},
		reported: map[token.Pos]bool{},
	}
	c.readDirectives()
	res := &Result{}
	var rootDecls []*ast.FuncDecl
	var rootLits []*ast.FuncLit
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if fn, ok := pass.TypesInfo.Defs[n.Name].(*types.Func); ok {
					c.decls[fn] = n
				}
				if n.Body != nil && c.hasParam(n.Type, isWorkflowContext) {
					c.roots[n] = true
					rootDecls = append(rootDecls, n)
				}
			case *ast.FuncLit:
				if c.hasParam(n.Type, isWorkflowContext) {
					c.roots[n] = true
					rootLits = append(rootLits, n)
				}
			}
			return true
		})
	}
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
	sort.Strings(res.Workflows)
	sort.Strings(res.Reached)
	return res, nil
}

// walk checks the body of a function as workflow code: from is the
// workflow function it was reached from, via says how for the messages
// ("" in a workflow function itself).
func (c *checker) walk(body *ast.BlockStmt, from, via string) {
	if body == nil {
		return
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			// A literal with its own workflow.Context is checked as a
			// workflow function; one with a context.Context is an
			// activity.
			return !c.roots[n] && !c.hasParam(n.Type, isStdContext)
		case *ast.Ident:
			c.checkUse(n, via)
			if !c.silenced(n.Pos()) {
				c.follow(n, from)
			}
		default:
			c.checkNode(n, via)
		}
		return true
	})
}

// follow queues the function of the package that id refers to, unless
// it is an activity or a workflow function (checked on its own).
func (c *checker) follow(id *ast.Ident, from string) {
	fn, ok := c.pass.TypesInfo.Uses[id].(*types.Func)
	if !ok {
		return
	}
	d := c.decls[fn.Origin()]
	if d == nil || d.Body == nil || c.visited[d] || c.roots[d] || c.hasParam(d.Type, isStdContext) {
		return
	}
	c.visited[d] = true
	c.queue = append(c.queue, reached{decl: d, from: from})
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
	t := d.Recv.List[0].Type
	for {
		switch e := t.(type) {
		case *ast.StarExpr:
			t = e.X
			continue
		case *ast.IndexExpr:
			t = e.X
			continue
		case *ast.IndexListExpr:
			t = e.X
			continue
		case *ast.Ident:
			return e.Name + "." + d.Name.Name
		}
		return d.Name.Name
	}
}
