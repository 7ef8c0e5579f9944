package replay

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// The scheduler runs the units of a workflow (the workflow function, each
// parallel branch, each async handler) as coroutines: one goroutine each,
// of which exactly one runs at a time. The driver (the goroutine that
// calls Replay or Decide) hands the baton to a unit and waits until that
// unit blocks, finishes or is aborted; a unit never runs while another
// does, so workflow state needs no locks and every interleaving is decided
// by the scheduler, never by the Go runtime.
//
// Scheduling goes in rounds: each round visits the live units in creation
// order and resumes those whose wait condition holds; activations run
// rounds until one resumes nobody. Everything a condition reads is
// workflow state, so the order of resumptions, and with it the order of
// commands and their sequence numbers, is a function of the history.

// coroutine is the goroutine of one unit.
type coroutine struct {
	in     *Instance
	id     int
	name   string
	resume chan struct{}

	// Written by the coroutine before it yields, read by the driver.
	cond func() bool
	wait string // what it waits for, for snapshots and errors
	// waits: what it waits for, structured (blockFor; Instance.Waits).
	waits []Wait
	file  string // where it waits (only while replaying)
	line  int

	started bool
	done    bool
	kill    bool
}

// spawn creates a coroutine that will run body when first resumed. It is
// called by the baton holder (or the driver) and appends the coroutine to
// the schedule.
func (in *Instance) spawn(name string, body func()) *coroutine {
	in.nextCo++
	co := &coroutine{in: in, id: in.nextCo, name: name, resume: make(chan struct{})}
	in.cos = append(in.cos, co)
	go co.main(body)
	return co
}

func (co *coroutine) main(body func()) {
	defer func() {
		if p := recover(); p != nil {
			// Bodies recover the panics of workflow code themselves, so
			// this is a bug of the scheduler: fail the instance rather
			// than the process.
			if co.in.err == nil {
				co.in.err = fmt.Errorf("replay: internal error in %s: %v\n%s", co.name, p, debug.Stack())
			}
		}
		co.done = true
		co.in.yield <- struct{}{}
	}()
	<-co.resume
	if co.kill {
		runtime.Goexit()
	}
	body()
}

// step hands the baton to co and waits until it gives it back.
func (in *Instance) step(co *coroutine) {
	co.started = true
	in.running = co
	co.resume <- struct{}{}
	<-in.yield
	in.running = nil
}

// block suspends the calling coroutine until cond holds. wait describes
// what it waits for.
func (co *coroutine) block(wait string, cond func() bool) {
	in := co.in
	if cond() {
		return
	}
	co.cond, co.wait = cond, wait
	if in.replaying {
		co.file, co.line = callSite()
	}
	in.yield <- struct{}{}
	<-co.resume
	co.cond, co.wait, co.file, co.line = nil, "", "", 0
	if co.kill || in.err != nil {
		runtime.Goexit()
	}
}

// runnable reports whether the driver should resume co in this round.
func (co *coroutine) runnable() bool {
	return !co.done && (!co.started || co.cond == nil || co.cond())
}

// run resumes units in rounds until none can go on, or the instance fails.
func (in *Instance) run() error {
	for {
		progress := false
		for i := 0; i < len(in.cos); i++ {
			co := in.cos[i]
			if !co.runnable() {
				continue
			}
			in.step(co)
			progress = true
			if in.err != nil {
				return in.err
			}
		}
		n := 0
		for _, co := range in.cos {
			if !co.done {
				in.cos[n] = co
				n++
			}
		}
		clear(in.cos[n:])
		in.cos = in.cos[:n]
		if !progress {
			return nil
		}
	}
}

// killAll ends every live coroutine: each wakes up and exits with
// runtime.Goexit, running its deferred calls (which can call no workflow
// primitive: they exit too).
func (in *Instance) killAll() {
	for _, co := range in.cos {
		if co.done {
			continue
		}
		co.kill = true
		in.step(co)
	}
	in.cos = nil
}

// protect calls fn and turns a panic into a *PanicError. runtime.Goexit
// (an abort) passes through.
func protect(fn func()) (perr *PanicError) {
	defer func() {
		if p := recover(); p != nil {
			perr = &PanicError{Value: p, Stack: string(debug.Stack())}
		}
	}()
	fn()
	return nil
}

// Packages whose frames callSite skips to reach workflow code: this one
// and the typed API over it.
var libraryPackages = func() []string {
	pc, _, _, _ := runtime.Caller(0)
	name := runtime.FuncForPC(pc).Name() // …/internal/replay.init.func1
	self := funcPackage(name)
	module := strings.TrimSuffix(self, "/internal/replay")
	return []string{self, module + "/workflow"}
}()

// funcPackage returns the import path of the package of a function, given
// its full name as runtime.Frame reports it.
func funcPackage(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}

// isLibrary reports whether the function fn (its full name) is of the
// runtime, this package or the workflow package.
func isLibrary(fn string) bool {
	pkg := funcPackage(fn)
	lib := pkg == "runtime"
	for _, p := range libraryPackages {
		lib = lib || pkg == p
	}
	return lib
}

// callSite returns the file and line of the innermost caller outside this
// package and the workflow package: the workflow code that called the
// primitive.
func callSite() (string, int) {
	var pcs [48]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !isLibrary(f.Function) && f.File != "" {
			return f.File, f.Line
		}
		if !more {
			return "", 0
		}
	}
}
