package workflowcheck

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"
)

// The advice of each rule: the workflow API to use instead.
const (
	adviceRandom  = "use workflow.Random(ctx) or workflow.UUID(ctx), recorded in the run's history"
	adviceIO      = "do it in an activity (workflow.NewActivity, called with Execute), whose result is recorded"
	adviceEnv     = "pass the value in the workflow's input, or read it in an activity"
	adviceLog     = "use workflow.Logger(ctx), which stays quiet during replay"
	adviceGo      = "use workflow.Parallel(ctx, branches...), whose branches are scheduled in a fixed order"
	adviceChannel = "the workflow API has no channels: wait for messages with workflow.WaitSignal or Signal.Wait, handle them in workflow.Phase, fan out with workflow.Parallel"
	adviceSync    = "workflow code runs one piece at a time: share state between handlers with workflow.Phase's state and workflow.UpdateState, fan out with workflow.Parallel"
	adviceMap     = "map order is random: range over sorted keys, e.g. for _, k := range slices.Sorted(maps.Keys(m))"
	adviceGlobal  = "a package variable is shared by every run and not in the history: keep the state in local variables, the phase state, or workflow.Publish"
)

// timeFuncs are the functions of package time that read the clock or
// wait on it, with the workflow API to use instead.
var timeFuncs = map[string]string{
	"Now":       "use workflow.Now(ctx), the time recorded for the activation",
	"Since":     "compute it from workflow.Now(ctx): workflow.Now(ctx).Sub(t)",
	"Until":     "compute it from workflow.Now(ctx): t.Sub(workflow.Now(ctx))",
	"Sleep":     "use workflow.Sleep(ctx, d), a durable timer",
	"After":     "use workflow.Sleep(ctx, d), or workflow.PhaseWithTimeout for a durable timeout while waiting for messages",
	"AfterFunc": "use workflow.Sleep(ctx, d) in a workflow.Parallel branch",
	"Tick":      "use workflow.Sleep(ctx, d) in a loop",
	"NewTimer":  "use workflow.Sleep(ctx, d), or workflow.PhaseWithTimeout for a durable timeout while waiting for messages",
	"NewTicker": "use workflow.Sleep(ctx, d) in a loop",
}

// uuidFuncs are the random constructors of github.com/google/uuid.
var uuidFuncs = map[string]bool{"New": true, "NewString": true, "NewRandom": true, "NewV7": true, "NewUUID": true, "NewV6": true}

// logFuncs are the package-level functions of fmt, log and log/slog that
// write to the process's streams.
var logFuncs = map[string]map[string]bool{
	"fmt": {"Print": true, "Printf": true, "Println": true, "Scan": true, "Scanf": true, "Scanln": true},
	"log": {"Print": true, "Printf": true, "Println": true, "Fatal": true, "Fatalf": true, "Fatalln": true, "Panic": true, "Panicf": true, "Panicln": true, "Output": true, "Writer": true},
	"log/slog": {"Debug": true, "Info": true, "Warn": true, "Error": true, "DebugContext": true, "InfoContext": true,
		"WarnContext": true, "ErrorContext": true, "Log": true, "LogAttrs": true, "Default": true},
}

// envFuncs read the process's environment.
var envFuncs = map[string]bool{"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true}

// ioPackage reports whether a package does I/O: files, processes,
// signals, the network, databases.
func ioPackage(path string) bool {
	switch path {
	case "os", "os/exec", "os/signal", "os/user", "io/ioutil", "net", "database/sql", "syscall", "plugin":
		return true
	}
	return strings.HasPrefix(path, "net/") || strings.HasPrefix(path, "database/sql/")
}

// checkUse checks what an identifier refers to: a function, method or
// package variable of a package workflow code must not use.
func (c *checker) checkUse(id *ast.Ident, emit emitFunc) {
	obj := c.pass.TypesInfo.Uses[id]
	if obj == nil || obj.Pkg() == nil {
		return
	}
	var fn *types.Func
	switch o := obj.(type) {
	case *types.Func:
		fn = o
	case *types.Var:
		if o.Parent() != o.Pkg().Scope() {
			return // not a package variable
		}
	default:
		return
	}
	path, name := obj.Pkg().Path(), obj.Name()
	method := fn != nil && fn.Signature().Recv() != nil
	found := path + "." + name
	if fn != nil {
		found = fn.FullName()
	}
	switch {
	case path == "time" && !method && timeFuncs[name] != "" && fn != nil:
		emit(id.Pos(), found, timeFuncs[name])
	case path == "math/rand" || path == "math/rand/v2" || path == "crypto/rand":
		emit(id.Pos(), found, adviceRandom)
	case path == "github.com/google/uuid" && !method && uuidFuncs[name]:
		emit(id.Pos(), found, "use workflow.UUID(ctx)")
	case path == "os" && envFuncs[name]:
		emit(id.Pos(), found+" (reads the environment)", adviceEnv)
	case ioPackage(path):
		emit(id.Pos(), found+" (I/O)", adviceIO)
	case (path == "sync" || path == "sync/atomic") && fn != nil:
		emit(id.Pos(), found, adviceSync)
	case !method && logFuncs[path][name]:
		emit(id.Pos(), found+" (writes to the process's output)", adviceLog)
	}
}

// checkNode checks the statements and expressions that are
// non-deterministic whatever they call.
func (c *checker) checkNode(n ast.Node, emit emitFunc) {
	switch n := n.(type) {
	case *ast.GoStmt:
		emit(n.Pos(), "go statement", adviceGo)
	case *ast.SelectStmt:
		emit(n.Pos(), "select statement", adviceChannel)
	case *ast.SendStmt:
		emit(n.Arrow, "channel send", adviceChannel)
	case *ast.UnaryExpr:
		if n.Op == token.ARROW {
			emit(n.Pos(), "channel receive", adviceChannel)
		}
	case *ast.RangeStmt:
		c.checkRange(n, emit)
	case *ast.AssignStmt:
		if n.Tok != token.DEFINE {
			for _, lhs := range n.Lhs {
				c.checkWrite(lhs, emit)
			}
		}
	case *ast.IncDecStmt:
		c.checkWrite(n.X, emit)
	}
}

// checkRange reports a range over a channel, a map, or an iterator over a
// map's keys or values (maps.Keys, maps.Values, maps.All).
func (c *checker) checkRange(r *ast.RangeStmt, emit emitFunc) {
	t := c.pass.TypesInfo.TypeOf(r.X)
	if t == nil {
		return
	}
	switch t.Underlying().(type) {
	case *types.Chan:
		emit(r.Pos(), "range over a channel", adviceChannel)
		return
	case *types.Map:
		emit(r.Pos(), "range over a map", adviceMap)
		return
	}
	call, ok := ast.Unparen(r.X).(*ast.CallExpr)
	if !ok {
		return
	}
	var id *ast.Ident
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		id = f.Sel
	case *ast.Ident:
		id = f
	}
	if id == nil {
		return
	}
	if fn, ok := c.pass.TypesInfo.Uses[id].(*types.Func); ok && fn.Pkg() != nil && fn.Pkg().Path() == "maps" {
		switch fn.Name() {
		case "Keys", "Values", "All":
			emit(r.Pos(), "range over maps."+fn.Name(), adviceMap)
		}
	}
}

// checkWrite reports an assignment to a package-level variable, or to a
// field or element of one.
func (c *checker) checkWrite(lhs ast.Expr, emit emitFunc) {
	for e := lhs; e != nil; {
		id, _ := e.(*ast.Ident)
		if sel, ok := e.(*ast.SelectorExpr); ok {
			id, e = sel.Sel, sel.X
		} else {
			e = operand(e)
		}
		if id != nil && c.isPackageVar(id) {
			emit(lhs.Pos(), "write to package variable "+id.Name, adviceGlobal)
			return
		}
	}
}

// operand returns the expression that e indexes, dereferences or
// parenthesizes; nil for other expressions.
func operand(e ast.Expr) ast.Expr {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return x.X
	case *ast.IndexExpr:
		return x.X
	case *ast.IndexListExpr:
		return x.X
	case *ast.StarExpr:
		return x.X
	}
	return nil
}

func (c *checker) isPackageVar(id *ast.Ident) bool {
	v, ok := c.pass.TypesInfo.Uses[id].(*types.Var)
	return ok && v.Pkg() != nil && v.Parent() == v.Pkg().Scope()
}

// readDirectives finds the //heph:nondeterministic-ok comments: those
// with a reason silence their line and the next; those without are
// reported.
func (c *checker) readDirectives() {
	c.suppress = map[string]map[int]bool{}
	for _, f := range c.pass.Files {
		for _, g := range f.Comments {
			for _, cm := range g.List {
				rest, ok := strings.CutPrefix(cm.Text, Directive)
				if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
					continue
				}
				if strings.TrimSpace(rest) == "" {
					c.pass.Reportf(cm.Pos(), "%s needs a reason after it (%s <why this is deterministic>): it silences nothing without one", Directive, Directive)
					continue
				}
				p := c.pass.Fset.Position(cm.Pos())
				if c.suppress[p.Filename] == nil {
					c.suppress[p.Filename] = map[int]bool{}
				}
				c.suppress[p.Filename][p.Line] = true
			}
		}
	}
}
