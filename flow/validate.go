package flow

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/dag"
	"github.com/hephaestus-go/hephaestus/internal/engine"
	fuzzy "github.com/hephaestus-go/hephaestus/internal/suggest"
)

// Rule names a validation rule; every ValidationError carries one.
type Rule string

// The validation rules.
const (
	RuleNoSteps          Rule = "no-steps"
	RuleInvalidName      Rule = "invalid-name"
	RuleInvalidOption    Rule = "invalid-option"
	RuleDuplicateStep    Rule = "duplicate-step"
	RuleDuplicateKey     Rule = "duplicate-key"
	RuleUnknownStep      Rule = "unknown-step"
	RuleMissingDep       Rule = "missing-dependency"
	RuleUndeclaredEvent  Rule = "undeclared-event"
	RuleUnroutedEvent    Rule = "unrouted-event"
	RuleStart            Rule = "start"
	RuleCycle            Rule = "cycle"
	RuleUnreachable      Rule = "unreachable"
	RuleMapSource        Rule = "map-source"
	RuleNotAncestor      Rule = "not-ancestor"
	RuleNoConvergence    Rule = "no-convergence"
	RuleInvalidMetadata  Rule = "invalid-metadata"
	RuleInvalidBusinessK Rule = "invalid-business-key"
	RuleTooManySteps     Rule = "too-many-steps"
)

// ValidationError is one problem Build found. Build joins all of them with
// errors.Join; use ValidationErrors (or errors.As for the first) to inspect
// them.
type ValidationError struct {
	Flow string
	Rule Rule
	// Steps names the steps at fault.
	Steps []string
	// At is the file:line of the offending declaration, when known.
	At string
	// Message says what is wrong and how to fix it.
	Message string
}

func (e *ValidationError) Error() string {
	at := ""
	if e.At != "" {
		at = " (" + e.At + ")"
	}
	return fmt.Sprintf("flow %q: %s%s", e.Flow, e.Message, at)
}

// ValidationErrors returns every *ValidationError inside err.
func ValidationErrors(err error) []*ValidationError {
	var out []*ValidationError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if ve, ok := err.(*ValidationError); ok {
			out = append(out, ve)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		walk(errors.Unwrap(err))
	}
	walk(err)
	return out
}

var nameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`)

// validName: names of flows, steps, queues, keys and events start with a
// letter, go on with letters, digits, '_', '-' or '.', and are at most
// hephtype.MaxNameLen bytes long.
func validName(s string) bool { return len(s) <= hephtype.MaxNameLen && nameRE.MatchString(s) }

type checker struct {
	b    *Builder
	errs []*ValidationError
}

func (c *checker) add(rule Rule, at string, steps []string, format string, args ...any) {
	c.errs = append(c.errs, &ValidationError{Flow: c.b.name, Rule: rule, Steps: steps, At: at, Message: fmt.Sprintf(format, args...)})
}

// Build validates the definition and returns the flow, or every problem
// found, joined: cycles (with their path), steps unreachable from the
// start, edges on undeclared events, declared events without an edge,
// duplicate step names and context keys, dependencies on missing steps,
// map steps over values that are not arrays, Reads of steps that are not
// ancestors, fan-outs that never converge
// in a flow that ends in Done, bad options, and a flow with no steps.
func (b *Builder) Build() (*Flow, error) {
	if b == nil {
		return nil, errors.New("flow: Build called on a nil *Builder; start with flow.New")
	}
	c := &checker{b: b}
	if n := len(b.steps); n > MaxSteps {
		// Refused before anything is built over the steps.
		c.add(RuleTooManySteps, "", nil, "the flow has %d steps, more than flow.MaxSteps (%d); split it into smaller flows", n, MaxSteps)
		return nil, errors.Join(c.errs[0])
	}
	for _, e := range b.errs {
		e.Flow = b.name
		c.errs = append(c.errs, e)
	}
	c.flowOptions()
	byName := c.stepNames()
	edges, doneTerminated := c.edges(byName)
	c.events(byName, edges, doneTerminated)
	succ := successors(b.steps, byName, edges)
	roots := c.roots(byName, edges)
	acyclic := c.cycles(succ)
	c.reachable(roots, succ)
	var r *reach
	if acyclic {
		r = newReach(byName, succ)
	}
	mapSrc := c.mapSources(byName, edges, r)
	c.reads(byName, r)
	if acyclic && doneTerminated {
		c.convergence(byName, edges, r)
	}
	if len(c.errs) > 0 {
		errs := make([]error, len(c.errs))
		for i, e := range c.errs {
			errs[i] = e
		}
		return nil, errors.Join(errs...)
	}
	return b.compile(byName, edges, roots, mapSrc), nil
}

func (c *checker) flowOptions() {
	b := c.b
	if !validName(b.name) {
		c.add(RuleInvalidName, "", nil, "flow name %q is not valid: start with a letter, then letters, digits, '_', '-' or '.', at most 200 bytes", b.name)
	}
	if b.version < 1 {
		c.add(RuleInvalidOption, "", nil, "version is %d; it must be a positive integer", b.version)
	}
	if b.timeout < 0 {
		c.add(RuleInvalidOption, "", nil, "execution timeout is %v; it must not be negative (zero for none)", b.timeout)
	}
	for _, name := range slices.Sorted(maps.Keys(b.attrs)) {
		if err := hephtype.CheckAttrName(name); err != nil {
			c.add(RuleInvalidOption, "", nil, "%v", err)
		} else if t := b.attrs[name]; !t.Valid() {
			c.add(RuleInvalidOption, "", nil, "search attribute %s: unknown type %q (one of %v)", name, t, hephtype.AttrTypes)
		}
	}
	if b.key != "" {
		if err := businesskey.ValidateKey(b.key); err != nil {
			c.add(RuleInvalidBusinessK, "", nil, "business key: %v", err)
		}
	}
	if !b.scope.Valid() {
		c.add(RuleInvalidBusinessK, "", nil, "business key scope %q is unknown; use flow.ScopeActive, flow.ScopeForever or flow.ScopeNone", b.scope)
	}
	seen := map[string]bool{}
	for i, t := range b.tags {
		switch {
		case strings.TrimSpace(t) == "":
			c.add(RuleInvalidOption, "", nil, "tag %d is empty; tags must be non-empty strings", i)
		case seen[t]:
			c.add(RuleInvalidOption, "", nil, "tag %q is given twice", t)
		}
		seen[t] = true
	}
	for _, k := range sortedKeys(b.metadata) {
		if k == "" {
			c.add(RuleInvalidMetadata, "", nil, "metadata has an empty key; keys must be non-empty strings")
			continue
		}
		if _, err := json.Marshal(b.metadata[k]); err != nil {
			c.add(RuleInvalidMetadata, "", nil, "metadata %q is not a JSON value (%v); use strings, numbers, booleans, nil, slices and maps of those", k, err)
		}
	}
	d := &b.defaults
	if d.depsSet || d.eventsSet || d.keySet || d.waitsSet || d.overSet || d.readsSet {
		c.add(RuleInvalidOption, "", nil, "Defaults accepts only Retry, Timeout, Queue and Priority; DependsOn, Events, Key, Waits, Over and Reads belong to single steps")
	}
	if d.prepare != nil || d.finish != nil {
		c.add(RuleInvalidOption, "", nil, "Defaults accepts only Retry, Timeout, Queue and Priority; RemotePrepare and RemoteFinish belong to single remote steps")
	}
	c.stepOptions("flow defaults", "", d)
}

func (c *checker) stepOptions(what, step string, d *stepDef) {
	var steps []string
	if step != "" {
		steps = []string{step}
	}
	if d.retry != nil {
		if err := d.retry.validate(); err != nil {
			c.add(RuleInvalidOption, d.at, steps, "%s: retry policy: %s", what, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	if d.timeout != nil && *d.timeout <= 0 {
		c.add(RuleInvalidOption, d.at, steps, "%s: Timeout is %s; it must be positive", what, *d.timeout)
	}
	if d.queue != nil && !validName(*d.queue) {
		c.add(RuleInvalidOption, d.at, steps, "%s: queue name %q is not valid: start with a letter, then letters, digits, '_', '-' or '.', at most 200 bytes", what, *d.queue)
	}
	if d.waitTimeout < 0 {
		c.add(RuleInvalidOption, d.at, steps, "%s: Waits timeout is %s; use 0 for no timeout or a positive duration", what, d.waitTimeout)
	}
}

// stepNames checks names and keys, and indexes the steps by name (first
// declaration wins).
func (c *checker) stepNames() map[string]*stepDef {
	b := c.b
	if len(b.steps) == 0 {
		c.add(RuleNoSteps, "", nil, "the flow has no steps; add one with flow.Step, flow.EventStep or flow.Map")
	}
	byName := map[string]*stepDef{}
	byKey := map[string]*stepDef{}
	for _, d := range b.steps {
		what := fmt.Sprintf("step %q", d.name)
		switch {
		case !validName(d.name):
			c.add(RuleInvalidName, d.at, []string{d.name}, "step name %q is not valid: start with a letter, then letters, digits, '_', '-' or '.', at most 200 bytes", d.name)
		case d.name == Done || d.name == "input":
			c.add(RuleInvalidName, d.at, []string{d.name}, "step name %q is reserved; choose another name", d.name)
		}
		if prev, dup := byName[d.name]; dup {
			c.add(RuleDuplicateStep, d.at, []string{d.name}, "step %q is declared twice (first at %s); give each step its own name", d.name, prev.at)
			continue
		}
		byName[d.name] = d
		key := d.contextKey()
		switch {
		case d.keySet && !validName(key):
			c.add(RuleInvalidName, d.at, []string{d.name}, "step %q: context key %q is not valid: start with a letter, then letters, digits, '_', '-' or '.', at most 200 bytes", d.name, key)
		case key == "input":
			c.add(RuleDuplicateKey, d.at, []string{d.name}, "step %q: context key \"input\" is reserved for the run input; set another with flow.Key", d.name)
		}
		if prev, dup := byKey[key]; dup {
			c.add(RuleDuplicateKey, d.at, []string{prev.name, d.name}, "steps %q and %q share the context key %q, so one output would overwrite the other; give one of them another key with flow.Key", prev.name, d.name, key)
		} else {
			byKey[key] = d
		}
		c.stepOptions(what, d.name, d)
		c.checkRemote(d)
		if d.kind == KindMap && d.waits {
			c.add(RuleInvalidOption, d.at, []string{d.name}, "map step %q cannot wait; make the waiting step a plain step after it", d.name)
		}
		if d.kind != KindMap && d.overSet {
			c.add(RuleInvalidOption, d.at, []string{d.name}, "step %q: Over applies only to map steps; drop the option or declare the step with flow.Map", d.name)
		}
		seen := map[string]bool{}
		for _, e := range d.events {
			switch {
			case !validName(e):
				c.add(RuleInvalidName, d.at, []string{d.name}, "step %q: event name %q is not valid: start with a letter, then letters, digits, '_', '-' or '.', at most 200 bytes", d.name, e)
			case e == EventFailed || e == EventTimeout:
				c.add(RuleInvalidName, d.at, []string{d.name}, "step %q: event %q is built in and must not be declared: route it with an edge (%q comes from flow.Waits with a timeout)", d.name, e, EventTimeout)
			case seen[e]:
				c.add(RuleInvalidName, d.at, []string{d.name}, "step %q declares event %q twice", d.name, e)
			}
			seen[e] = true
		}
		if d.eventsSet && len(d.events) == 0 {
			c.add(RuleInvalidOption, d.at, []string{d.name}, "step %q: Events was given no events; declare at least one or drop the option", d.name)
		}
	}
	return byName
}

// declared returns the events a step may emit.
func declared(d *stepDef) []string {
	ev := []string{EventOK}
	if d.eventsSet {
		ev = slices.Clone(d.events)
	}
	if d.waitTimeout > 0 {
		ev = append(ev, EventTimeout)
	}
	return ev
}

// edges resolves DependsOn and Edge declarations into a deduplicated list.
func (c *checker) edges(byName map[string]*stepDef) ([]edgeDecl, bool) {
	type key struct{ from, event, to string }
	seen := map[key]bool{}
	var out []edgeDecl
	done := false
	add := func(from, event string, to []string, at string) {
		var tos []string
		for _, t := range to {
			k := key{from, event, t}
			if !seen[k] {
				seen[k] = true
				tos = append(tos, t)
			}
		}
		if len(tos) > 0 {
			out = append(out, edgeDecl{from: from, event: event, to: tos, at: at})
		}
	}
	for _, d := range c.b.steps {
		if byName[d.name] != d {
			continue
		}
		for _, dep := range d.deps {
			if _, ok := byName[dep]; !ok {
				c.add(RuleMissingDep, d.at, []string{d.name, dep}, "step %q depends on %q, which is not a step of the flow%s", d.name, dep, suggestOrFix(dep, byName))
				continue
			}
			add(dep, EventOK, []string{d.name}, d.at)
		}
	}
	for _, e := range c.b.edges {
		bad := false
		if _, ok := byName[e.from]; !ok {
			c.add(RuleUnknownStep, e.at, []string{e.from}, "edge from %q on %q: there is no step %q%s", e.from, e.event, e.from, suggestOrFix(e.from, byName))
			bad = true
		}
		if e.event == "" {
			c.add(RuleUndeclaredEvent, e.at, []string{e.from}, "edge from %q has an empty event; name the event it follows (%q by default)", e.from, EventOK)
			bad = true
		}
		if len(e.to) == 0 {
			c.add(RuleUnknownStep, e.at, []string{e.from}, "edge from %q on %q has no target; give one or more steps, or flow.Done", e.from, e.event)
			bad = true
		}
		for _, t := range e.to {
			if t == Done {
				continue
			}
			if _, ok := byName[t]; !ok {
				c.add(RuleUnknownStep, e.at, []string{e.from, t}, "edge from %q on %q leads to %q, which is not a step of the flow%s", e.from, e.event, t, suggestOrFix(t, byName))
				bad = true
			}
		}
		if !bad {
			if slices.Contains(e.to, Done) {
				done = true
			}
			add(e.from, e.event, e.to, e.at)
		}
	}
	return out, done
}

// events checks that every edge's event is declared and every declared
// event has an edge.
func (c *checker) events(byName map[string]*stepDef, edges []edgeDecl, doneTerminated bool) {
	routed := map[string]map[string]bool{}
	for _, e := range edges {
		d := byName[e.from]
		if routed[e.from] == nil {
			routed[e.from] = map[string]bool{}
		}
		routed[e.from][e.event] = true
		if e.event == EventFailed || slices.Contains(declared(d), e.event) {
			continue
		}
		hint := fmt.Sprintf("declare it with flow.Events on step %q, or route one of its events: %s", e.from, strings.Join(declared(d), ", "))
		if e.event == EventTimeout {
			hint = fmt.Sprintf("give step %q a timeout with flow.Waits(d)", e.from)
		}
		c.add(RuleUndeclaredEvent, e.at, []string{e.from}, "edge from %q on event %q, which %q does not declare; %s", e.from, e.event, e.from, hint)
	}
	for _, d := range c.b.steps {
		if byName[d.name] != d {
			continue
		}
		for _, ev := range declared(d) {
			if routed[d.name][ev] {
				continue
			}
			implicit := ev == EventOK && !d.eventsSet
			switch {
			case !implicit:
				c.add(RuleUnroutedEvent, d.at, []string{d.name}, "step %q declares event %q but no edge follows it; add Edge(%q, %q, <next step or flow.Done>)", d.name, ev, d.name, ev)
			case doneTerminated:
				c.add(RuleUnroutedEvent, d.at, []string{d.name}, "step %q ends without reaching Done: its event %q has no edge; add Edge(%q, %q, flow.Done) or a next step", d.name, ev, d.name, ev)
			}
		}
	}
}

// successors maps each step to the steps its edges lead to, in declaration
// order.
func successors(steps []*stepDef, byName map[string]*stepDef, edges []edgeDecl) map[string][]string {
	succ := map[string][]string{}
	seen := map[[2]string]bool{}
	for _, e := range edges {
		for _, t := range e.to {
			if k := [2]string{e.from, t}; t != Done && !seen[k] {
				seen[k] = true
				succ[e.from] = append(succ[e.from], t)
			}
		}
	}
	return succ
}

func (c *checker) roots(byName map[string]*stepDef, edges []edgeDecl) []string {
	incoming := map[string]bool{}
	for _, e := range edges {
		for _, t := range e.to {
			incoming[t] = true
		}
	}
	if c.b.start != "" {
		d, ok := byName[c.b.start]
		if !ok {
			c.add(RuleUnknownStep, "", []string{c.b.start}, "Start names %q, which is not a step of the flow%s", c.b.start, suggestOrFix(c.b.start, byName))
			return nil
		}
		if incoming[d.name] {
			c.add(RuleStart, d.at, []string{d.name}, "start step %q has incoming edges; the start step must come first: remove the edges into it or start elsewhere", d.name)
		}
		return []string{d.name}
	}
	var roots []string
	for _, d := range c.b.steps {
		if byName[d.name] == d && !incoming[d.name] {
			roots = append(roots, d.name)
		}
	}
	if len(roots) == 0 && len(byName) > 0 {
		c.add(RuleStart, "", nil, "every step has an incoming edge, so no step can start the run; name the first step with Start")
	}
	return roots
}

// cycles reports every cycle once, with its path. It returns true when the
// graph is acyclic.
func (c *checker) cycles(succ map[string][]string) bool {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	acyclic := true
	reported := map[string]bool{}
	var visit func(n string)
	visit = func(n string) {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range succ[n] {
			switch color[m] {
			case white:
				visit(m)
			case grey:
				acyclic = false
				i := slices.Index(stack, m)
				cycle := append(slices.Clone(stack[i:]), m)
				members := slices.Clone(stack[i:])
				slices.Sort(members)
				sig := strings.Join(members, "\x00")
				if !reported[sig] {
					reported[sig] = true
					c.add(RuleCycle, "", slices.Clone(stack[i:]), "cycle: %s; flows must be acyclic: remove one of these edges", strings.Join(cycle, " -> "))
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	for _, d := range c.b.steps {
		if color[d.name] == white {
			visit(d.name)
		}
	}
	return acyclic
}

func (c *checker) reachable(roots []string, succ map[string][]string) {
	if len(roots) == 0 {
		return
	}
	seen := map[string]bool{}
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		queue = append(queue, succ[n]...)
	}
	done := map[string]bool{}
	for _, d := range c.b.steps {
		if seen[d.name] || done[d.name] {
			continue
		}
		done[d.name] = true
		from := "the start step " + fmt.Sprintf("%q", roots[0])
		if c.b.start == "" {
			from = "any step without incoming edges"
		}
		c.add(RuleUnreachable, d.at, []string{d.name}, "step %q is unreachable from %s; add an edge or DependsOn that leads to it, or remove it", d.name, from)
	}
}

// mapSources resolves each map step's source and checks it where the Go
// types tell. It returns the source step of each map step ("" = input).
func (c *checker) mapSources(byName map[string]*stepDef, edges []edgeDecl, r *reach) map[string]string {
	preds := predecessors(edges)
	// Whether each map step's chosen source leads to it, asked at once.
	var qs [][2]string
	for _, d := range c.b.steps {
		if d.kind == KindMap && byName[d.name] == d && d.overSet && d.overStep != "" && byName[d.overStep] != nil {
			qs = append(qs, [2]string{d.overStep, d.name})
		}
	}
	leads := r.leads(qs)
	src := map[string]string{}
	for _, d := range c.b.steps {
		if d.kind != KindMap || byName[d.name] != d {
			continue
		}
		source, field := "", d.overField
		switch {
		case d.overSet:
			source = d.overStep
			if source == "" {
				break
			}
			if byName[source] == nil {
				c.add(RuleMapSource, d.at, []string{d.name, source}, "map step %q iterates over %q, which is not a step of the flow%s", d.name, source, suggestOrFix(source, byName))
				continue
			}
			// Any ancestor: its output is in the map step's context. With a
			// cycle (reported elsewhere) only a direct predecessor is sure.
			if !slices.Contains(preds[d.name], source) && !leads[[2]string{source, d.name}] {
				c.add(RuleMapSource, d.at, []string{d.name, source}, "map step %q iterates over %q, which does not lead to it; add DependsOn(%q) or an edge from %q", d.name, source, source, source)
				continue
			}
		case len(preds[d.name]) == 1:
			source = preds[d.name][0]
		case len(preds[d.name]) > 1:
			c.add(RuleMapSource, d.at, []string{d.name}, "map step %q has several predecessors (%s); choose the array it iterates over with flow.Over", d.name, strings.Join(preds[d.name], ", "))
			continue
		}
		src[d.name] = source
		var t reflect.Type
		what := "the run input"
		if source == "" {
			t = c.b.inputType
		} else {
			s := byName[source]
			what = fmt.Sprintf("the output of %q", source)
			t = s.outType // a map step's is the array of results
		}
		if field != "" {
			what = fmt.Sprintf("field %q of %s", field, what)
			t = fieldType(t, field)
		}
		if known, isArray := arrayType(t); known && !isArray {
			c.add(RuleMapSource, d.at, []string{d.name}, "map step %q iterates over %s, which is %s, not an array; map over a slice", d.name, what, t)
		}
	}
	return src
}

// predecessors maps each step to the steps with an edge to it, once each,
// in declaration order.
func predecessors(edges []edgeDecl) map[string][]string {
	preds := map[string][]string{}
	seen := map[[2]string]bool{}
	for _, e := range edges {
		for _, t := range e.to {
			if k := [2]string{e.from, t}; t != Done && !seen[k] {
				seen[k] = true
				preds[t] = append(preds[t], e.from)
			}
		}
	}
	return preds
}

// reach answers whether a path of edges leads from one step to another in
// an acyclic flow, by search on demand (package dag): no sets of
// ancestors, which grow with the square of the steps.
type reach struct {
	idx map[string]int
	g   *dag.Graph
}

func newReach(byName map[string]*stepDef, succ map[string][]string) *reach {
	r := &reach{idx: make(map[string]int, len(byName))}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		r.idx[n] = i
	}
	out := make([][]int, len(names))
	for i, n := range names {
		for _, t := range succ[n] {
			if j, ok := r.idx[t]; ok {
				out[i] = append(out[i], j)
			}
		}
	}
	r.g = dag.New(out)
	return r
}

// leads answers, for each pair {from, to} of steps, whether a path of
// edges leads from from to to; every answer is false when r is nil (the
// flow has a cycle).
func (r *reach) leads(qs [][2]string) map[[2]string]bool {
	out := map[[2]string]bool{}
	if r == nil || len(qs) == 0 {
		return out
	}
	dq := make([]dag.Query, len(qs))
	for i, q := range qs {
		dq[i] = dag.Query{From: r.idx[q[0]], To: r.idx[q[1]]}
	}
	for i, ok := range r.g.Leads(dq) {
		out[qs[i]] = ok
	}
	return out
}

// reads checks the steps each step declares it reads: each must be a step
// of the flow from which a path of edges leads to the reader, or the read
// could never succeed. r is nil when the flow has a cycle.
func (c *checker) reads(byName map[string]*stepDef, r *reach) {
	var qs [][2]string
	for _, d := range c.b.steps {
		if d.readsSet && byName[d.name] == d {
			for _, rd := range d.reads {
				if byName[rd] != nil {
					qs = append(qs, [2]string{rd, d.name})
				}
			}
		}
	}
	leads := r.leads(qs)
	for _, d := range c.b.steps {
		if !d.readsSet || byName[d.name] != d {
			continue
		}
		for _, rd := range d.reads {
			switch {
			case byName[rd] == nil:
				c.add(RuleUnknownStep, d.at, []string{d.name, rd}, "step %q reads %q, which is not a step of the flow%s", d.name, rd, suggestOrFix(rd, byName))
			case r != nil && !leads[[2]string{rd, d.name}]:
				c.add(RuleNotAncestor, d.at, []string{d.name, rd}, "step %q reads the output of step %q, which is not an ancestor of %q: no path of edges leads from %q to %q, so its output is never in the context of %q; add an edge or DependsOn on the way from %q to %q, or drop it from Reads", d.name, rd, d.name, rd, d.name, d.name, rd, d.name)
			}
		}
	}
}

// fieldType returns the type of the JSON field name of t, or nil when it is
// not known.
func fieldType(t reflect.Type, name string) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		if t.Key().Kind() == reflect.String {
			return t.Elem()
		}
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
				return f.Type
			}
		}
	}
	return nil
}

// arrayType tells whether t is known to encode as a JSON array.
func arrayType(t reflect.Type) (known, isArray bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || t == reflect.TypeFor[json.RawMessage]() {
		return false, false
	}
	if t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Marshaler]()) {
		return false, false
	}
	switch t.Kind() {
	case reflect.Slice:
		return true, t.Elem().Kind() != reflect.Uint8
	case reflect.Array:
		return true, true
	}
	return true, false
}

// convergence checks, in a flow that ends in Done, that the branches of
// every fan-out share a step they all lead to.
func (c *checker) convergence(byName map[string]*stepDef, edges []edgeDecl, r *reach) {
	// A fan-out is every target of one step's event, whether declared in
	// one Edge call, in several, or through DependsOn.
	type fanOut struct {
		from, event, at string
		targets         []string
	}
	var fans []*fanOut
	byEvent := map[[2]string]*fanOut{}
	seen := map[[3]string]bool{}
	for _, e := range edges {
		k := [2]string{e.from, e.event}
		fo := byEvent[k]
		if fo == nil {
			fo = &fanOut{from: e.from, event: e.event, at: e.at}
			byEvent[k] = fo
			fans = append(fans, fo)
		}
		for _, t := range e.to {
			if t != Done && byName[t] != nil && !seen[[3]string{e.from, e.event, t}] {
				seen[[3]string{e.from, e.event, t}] = true
				fo.targets = append(fo.targets, t)
			}
		}
	}
	for _, e := range fans {
		targets := e.targets
		if len(targets) < 2 || byName[e.from] == nil {
			continue
		}
		starts := make([]int, len(targets))
		for i, t := range targets {
			starts[i] = r.idx[t]
		}
		// Some step that every branch leads to (a branch leads to itself).
		if !r.g.Common(starts) {
			c.add(RuleNoConvergence, e.at, append([]string{e.from}, targets...),
				"fan-out from %q on %q to %s never converges: the branches reach Done separately; add a join step that every branch leads to (e.g. with DependsOn(%s))",
				e.from, e.event, strings.Join(targets, ", "), quoteAll(targets))
		}
	}
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// suggest proposes a step name close to a misspelt one.
func suggest(name string, byName map[string]*stepDef) string {
	best, bestD := "", 3
	for n := range byName {
		if d := fuzzy.Distance(strings.ToLower(name), strings.ToLower(n)); d < bestD || (d == bestD && n < best) {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// suggestOrFix is suggest, or a generic hint when no name is close.
func suggestOrFix(name string, byName map[string]*stepDef) string {
	if s := suggest(name, byName); s != "" {
		return s
	}
	return "; declare the step or fix the name"
}

// compile turns the validated definition into a Flow and its engine graph.
func (b *Builder) compile(byName map[string]*stepDef, edges []edgeDecl, roots []string, mapSrc map[string]string) *Flow {
	f := &Flow{
		name: b.name, version: b.version, key: b.key, scope: b.scope,
		tags: slices.Clone(b.tags), start: b.start, inputType: b.inputType, inputName: b.inputName,
		steps: b.steps, byName: byName, byKey: map[string]*stepDef{}, metadata: map[string]json.RawMessage{},
		schedules:   slices.Clone(b.schedules),
		concurrency: b.concurrency, timeout: b.timeout, attrs: maps.Clone(b.attrs),
	}
	for _, d := range byName {
		f.byKey[d.contextKey()] = d
	}
	for k, v := range b.metadata {
		f.metadata[k], _ = json.Marshal(v)
	}
	idx := map[string]int{}
	for i, d := range b.steps {
		idx[d.name] = i
	}
	g := &engine.Graph{Steps: make([]engine.Step, len(b.steps))}
	for i, d := range b.steps {
		spec := b.resolve(d)
		spec.Events = declared(d)
		if d.kind == KindMap {
			spec.MapSource, spec.MapField = mapSrc[d.name], d.overField
		}
		f.specs = append(f.specs, spec)
		gs := engine.Step{
			Name: d.name, Key: spec.Key, Events: slices.Clone(spec.Events),
			MaxAttempts: spec.Retry.MaxAttempts, WaitTimeout: d.waitTimeout,
			Map: d.kind == KindMap, MapSource: engine.InputSource, MapField: d.overField,
		}
		if s := mapSrc[d.name]; s != "" {
			gs.MapSource = idx[s]
		}
		if d.readsSet {
			gs.ReadsDeclared = true
			for _, r := range d.reads {
				if !slices.Contains(gs.Reads, idx[r]) {
					gs.Reads = append(gs.Reads, idx[r])
				}
			}
		}
		g.Steps[i] = gs
	}
	for _, e := range edges {
		from := idx[e.from]
		gs := &g.Steps[from]
		if e.event == EventFailed && !gs.Declares(EventFailed) {
			gs.Events = append(gs.Events, EventFailed)
			f.specs[from].Events = append(f.specs[from].Events, EventFailed)
		}
		var set *engine.EdgeSet
		for k := range gs.Out {
			if gs.Out[k].Event == e.event {
				set = &gs.Out[k]
			}
		}
		if set == nil {
			gs.Out = append(gs.Out, engine.EdgeSet{Event: e.event})
			set = &gs.Out[len(gs.Out)-1]
		}
		for _, t := range e.to {
			f.edges = append(f.edges, Edge{From: e.from, Event: e.event, To: t})
			if t == Done {
				set.To = append(set.To, engine.Done)
			} else {
				set.To = append(set.To, idx[t])
			}
		}
	}
	for _, r := range roots {
		g.Roots = append(g.Roots, idx[r])
	}
	g.Finish()
	f.graph = g
	f.shape = shapeOf(f)
	return f
}
