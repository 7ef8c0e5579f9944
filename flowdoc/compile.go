package flowdoc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/dag"
	"github.com/hephaestus-go/hephaestus/internal/secrets"
	"github.com/hephaestus-go/hephaestus/internal/triggers"
)

// ElseEvent is the event of a branch step whose cases all failed to match
// and that has an else case; case i of a branch emits "branch-<i>".
const ElseEvent = "else"

// BranchEvent returns the event of case i of a branch.
func BranchEvent(i int) string { return "branch-" + strconv.Itoa(i) }

// Load parses a document and compiles it with the actions of reg.
func Load(name string, data []byte, reg *Registry) (*flow.Flow, error) {
	d, c := parse(name, data)
	if d == nil {
		return nil, c.err()
	}
	if len(c.list) == 0 {
		return Compile(d, reg)
	}
	// Report the compiler's findings too, all at once.
	f, err := compile(d, reg, c)
	if err == nil && f != nil {
		err = c.err()
	}
	return nil, err
}

// stepRT is what a compiled step needs when it runs.
type stepRT struct {
	doc    *stepDoc
	action *Action
	args   *value
	conds  []*condition // per branch case; nil for else
	reads  []string     // steps whose outputs its templates and conditions read
	events []string
	until  *value // the template of a wait_until, or nil
}

// Compile turns a parsed document into a flow definition, run by the
// actions of reg: the same *flow.Flow the Go API builds, validated by
// flow.Builder.Build. Every problem, the builder's included, is reported
// at once as an *Error pointing into the document.
func Compile(d *Document, reg *Registry) (*flow.Flow, error) {
	return compile(d, reg, &errs{doc: d.src})
}

func compile(d *Document, reg *Registry, c *errs) (*flow.Flow, error) {
	if reg == nil {
		reg = NewRegistry()
	}
	k := newCompiler(d, reg, c)
	k.setStart()
	// Edges, and the graph for the ancestor checks of templates.
	for _, s := range d.steps {
		k.route(s)
	}
	// Actions, arguments, templates and conditions.
	var pending []pendingRef
	for _, s := range d.steps {
		pending = k.checkStep(s, pending)
	}
	c.refsLead(d, k.preds, pending)
	k.recordGates()
	if c.err() != nil {
		return nil, c.err()
	}
	return k.build()
}

// compiler is the state of one document's compilation: the builder it
// fills, the steps' runtimes, and the graph of its edges.
type compiler struct {
	d        *Document
	reg      *Registry
	c        *errs
	b        *flow.Builder
	stepList string              // the steps' names, for fixes
	preds    map[string][]string // the steps each step is routed from
	rts      map[string]*stepRT
}

// newCompiler starts the builder with the document's flow-wide settings.
func newCompiler(d *Document, reg *Registry, c *errs) *compiler {
	b := flow.New(d.name).Version(d.version)
	if d.key != "" {
		b.BusinessKey(d.key, d.scope)
	}
	if d.ckey != "" {
		b.ConcurrencyKeyFrom(d.ckey)
	}
	if d.timeout > 0 {
		b.ExecutionTimeout(d.timeout)
	}
	for name, t := range d.attrs {
		b.SearchAttribute(name, t)
	}
	if len(d.tags) > 0 {
		b.Tags(d.tags...)
	}
	if d.metadata != nil {
		b.Metadata(d.metadata)
	}
	b.Defaults(optionsOf(d.defaults)...)
	names := make([]string, len(d.steps))
	rts := make(map[string]*stepRT, len(d.steps))
	for i, s := range d.steps {
		names[i] = s.name
		rts[s.name] = &stepRT{doc: s}
	}
	return &compiler{d: d, reg: reg, c: c, b: b, stepList: strings.Join(names, ", "), preds: map[string][]string{}, rts: rts}
}

// known reports whether t names a step or done.
func (k *compiler) known(t string) bool { return t == flow.Done || k.d.byName[t] != nil }

// setStart sets the start step: the one the document names, or its first.
func (k *compiler) setStart() {
	d := k.d
	start := d.start
	if start == "" && len(d.steps) > 0 {
		start = d.steps[0].name
	}
	if d.start != "" && !k.known(d.start) {
		k.c.add(d.startNode, "start", "name one of the steps: "+k.stepList, "unknown step %q", d.start)
	} else if start != "" {
		k.b.Start(start)
	}
}

// edge routes event of step from to the steps to, those that exist, and
// records them in the graph.
func (k *compiler) edge(from, event string, to []string, n *node, path string) {
	var ok []string
	for _, t := range to {
		if !k.known(t) {
			k.c.add(n, path, "name one of the steps ("+k.stepList+") or done", "unknown step %q", t)
			continue
		}
		ok = append(ok, t)
		k.preds[t] = append(k.preds[t], from)
	}
	if len(ok) > 0 {
		k.b.Edge(from, event, ok...)
	}
}

// routesOK reports whether the step routes its event ok with next,
// parallel, join or done.
func routesOK(s *stepDoc) bool {
	return len(s.next) > 0 || len(s.parallel) > 0 || s.join != "" || s.done
}

// route adds the edges of step s: its ok route, its branch cases and its
// on routes; it sets the events the step emits.
func (k *compiler) route(s *stepDoc) {
	rt := k.rts[s.name]
	okEv := flow.EventOK
	if s.approval == nil && s.wait != nil && len(s.wait.events) > 0 && !slices.Contains(s.wait.events, okEv) && routesOK(s) {
		k.c.add(s.nextN, s.path, "route the wait's events with on: {<event>: <step>}", "the wait declares events %s, so next (parallel, join, done) routes nothing", strings.Join(s.wait.events, ", "))
	}
	switch {
	case len(s.next) > 0:
		k.edge(s.name, okEv, s.next, s.nextN, join(s.path, "next"))
	case len(s.parallel) > 0:
		k.edge(s.name, okEv, s.parallel, s.nextN, join(s.path, "parallel"))
	case s.join != "":
		k.edge(s.name, okEv, []string{s.join}, s.nextN, join(s.path, "join"))
	case s.done:
		k.edge(s.name, okEv, []string{flow.Done}, s.key, join(s.path, "done"))
	}
	for i, bc := range s.branch {
		ev := BranchEvent(i)
		p := join(bc.path, "then")
		if bc.isElse {
			ev, p = ElseEvent, join(bc.path, "else")
		}
		rt.events = append(rt.events, ev)
		k.edge(s.name, ev, bc.then, bc.thenN, p)
	}
	if s.wait != nil {
		rt.events = s.wait.events
		if len(rt.events) == 0 {
			rt.events = []string{flow.EventOK}
		}
	}
	k.routeOn(s, allowedEvents(s, rt.events))
	if s.approval != nil {
		checkGate(k.c, s)
	} else if s.wait != nil && s.wait.timeout > 0 && !slices.ContainsFunc(s.on, func(r route) bool { return r.event == flow.EventTimeout }) {
		k.c.add(s.key, join(s.path, "on"), "add on: {timeout: <step or done>}", "the wait has a timeout, but nothing routes its event \"timeout\"")
	}
}

// allowedEvents lists the events a step with the given declared events
// (branch cases, a wait's) may route with on: failed, those events or
// ok, and the end of a wait's timeout (expired for an approval gate).
func allowedEvents(s *stepDoc, events []string) []string {
	allowed := append([]string{flow.EventFailed}, events...)
	if len(events) == 0 {
		allowed = append(allowed, flow.EventOK)
	}
	if s.wait != nil && s.wait.timeout > 0 {
		if s.approval != nil {
			allowed = append(allowed, EventExpired)
		} else {
			allowed = append(allowed, flow.EventTimeout)
		}
	}
	return allowed
}

// routeOn adds the edges of the step's on routes, each of an event in
// allowed and not routed otherwise.
func (k *compiler) routeOn(s *stepDoc, allowed []string) {
	for _, r := range s.on {
		if !slices.Contains(allowed, r.event) {
			k.c.add(r.n, join(s.path, "on."+r.event), "route one of the step's events: "+strings.Join(allowed, ", "), "the step never emits the event %q", r.event)
			continue
		}
		if r.event == flow.EventOK && routesOK(s) {
			k.c.add(r.n, join(s.path, "on.ok"), "route ok either with next (parallel, join, done) or with on.ok", "the event \"ok\" is routed twice")
			continue
		}
		ev := r.event
		if s.approval != nil && ev == EventExpired {
			ev = flow.EventTimeout // the deadline is the wait's timeout
		}
		k.edge(s.name, ev, r.to, r.n, join(s.path, "on."+r.event))
	}
}

// checkStep resolves the action of step s and checks its map expression,
// arguments, conditions and the references of its templates. It returns
// pending with the references whose step must lead to s appended.
func (k *compiler) checkStep(s *stepDoc, pending []pendingRef) []pendingRef {
	rt := k.rts[s.name]
	k.lookupAction(s, rt)
	k.checkMap(s)
	var refs []refAt
	if s.args != nil {
		rt.args = compileValue(s.args, join(s.path, "args"), k.c, &refs)
		k.checkArgs(s, rt)
	}
	refs = k.compileConds(s, rt, refs)
	refs = k.compileUntil(s, rt, refs)
	for _, r := range refs {
		switch {
		case r.r.root == "secret":
			checkSecretRef(k.c, s.name, rt.action, join(s.path, "args"), r)
		case r.r.root == "item" && s.over == "":
			k.c.add(r.n, r.path, "use item only in a step with map, or read input or steps.<step>.output", "{{%s}}: item exists only in map steps", r.r.text)
		case r.r.root == "steps":
			if k.d.byName[r.r.step] == nil {
				k.c.add(r.n, r.path, "name one of the steps: "+k.stepList, "%s reads unknown step %q", r.r.text, r.r.step)
			} else {
				// Whether the step leads here is asked of all
				// references at once, by refsLead.
				pending = append(pending, pendingRef{ref: r, step: s, rt: rt, at: len(k.c.list)})
			}
		}
	}
	return pending
}

// lookupAction finds the step's action in the registry.
func (k *compiler) lookupAction(s *stepDoc, rt *stepRT) {
	if s.action == "" {
		return
	}
	a, err := k.reg.Lookup(s.action)
	if err != nil {
		fix := "register it with flowdoc.RegisterAction, or use one of: " + strings.Join(k.reg.Names(), ", ")
		if len(k.reg.Names()) == 0 {
			fix = "register it with flowdoc.RegisterAction before compiling"
		}
		k.c.add(s.actionN, join(s.path, "action"), fix, "unknown action %q", s.action)
	}
	rt.action = a
}

// checkMap checks the step's map expression and the step it reads.
func (k *compiler) checkMap(s *stepDoc) {
	if s.over == "" {
		return
	}
	if _, _, ok := mapSource(s.over); !ok {
		k.c.add(s.overN, join(s.path, "map"), "write input, input.<field>, steps.<step>.output or steps.<step>.output.<field>", "%q is not an array expression", s.over)
	} else if st, _, _ := mapSource(s.over); st != "" && k.d.byName[st] == nil {
		k.c.add(s.overN, join(s.path, "map"), "name one of the steps: "+k.stepList, "%q reads unknown step %q", s.over, st)
	}
}

// checkArgs checks the step's arguments against its action's parameters:
// each must be one, and a literal value must pass the parameter's check.
func (k *compiler) checkArgs(s *stepDoc, rt *stepRT) {
	if rt.action == nil || rt.action.Params == nil {
		return
	}
	params := make([]string, 0, len(rt.action.Params))
	for p := range rt.action.Params {
		params = append(params, p)
	}
	slices.Sort(params)
	for i, key := range s.args.keys {
		check, ok := rt.action.Params[key.value]
		p := join(s.path, "args."+key.value)
		if !ok {
			k.c.add(key, p, "pass only the action's arguments: "+strings.Join(params, ", "), "action %q takes no argument %q", s.action, key.value)
			continue
		}
		v := rt.args.obj[key.value]
		if check != nil && v.static() {
			lit, _ := v.resolve(&scope{})
			j, _ := json.Marshal(lit)
			if err := check(j); err != nil {
				k.c.add(s.args.vals[i], p, "pass a value of the argument's type", "action %q does not accept %s for %q: %v", s.action, j, key.value, err)
			}
		}
	}
}

// compileConds compiles the conditions of the step's branch cases (nil
// for else, and for one that does not compile) and returns refs with the
// steps they read appended.
func (k *compiler) compileConds(s *stepDoc, rt *stepRT, refs []refAt) []refAt {
	for _, bc := range s.branch {
		if bc.isElse {
			rt.conds = append(rt.conds, nil)
			continue
		}
		cond, err := compileCondition(bc.cond)
		if err != nil {
			k.c.add(bc.condN, join(bc.path, "if"), "write a CEL expression over input, steps.<step>.output, result and run that gives a boolean, e.g. result == true", "the condition %q does not compile: %v", bc.cond, err)
			rt.conds = append(rt.conds, nil)
			continue
		}
		rt.conds = append(rt.conds, cond)
		for _, st := range cond.steps {
			refs = append(refs, refAt{r: &ref{text: "steps." + st, root: "steps", step: st}, n: bc.condN, path: join(bc.path, "if")})
		}
	}
	return refs
}

// recordGates records the document's approval gates in the flow's
// metadata, under a key the document may not use itself.
func (k *compiler) recordGates() {
	gates := gatesOf(k.d)
	if gates == nil {
		return
	}
	if _, taken := k.d.metadata[GatesKey]; taken {
		v, _ := k.d.root.get("metadata")
		k.c.add(v, "metadata."+GatesKey, "rename the key: the compiler records the document's approval gates under it", "the metadata key %q is reserved", GatesKey)
	}
	k.b.Metadata(map[string]any{GatesKey: gates})
}

// build adds the steps and builds the flow, reporting the builder's
// validation errors at the steps (or the name) they concern.
func (k *compiler) build() (*flow.Flow, error) {
	d, c := k.d, k.c
	for _, s := range d.steps {
		addStep(k.b, k.rts[s.name], c)
	}
	f, err := k.b.Build()
	if err == nil {
		return f, nil
	}
	for _, ve := range flow.ValidationErrors(err) {
		var at *node
		path := "(document)"
		if len(ve.Steps) > 0 && d.byName[ve.Steps[0]] != nil {
			s := d.byName[ve.Steps[0]]
			at, path = s.key, s.path
		} else if ve.Rule == flow.RuleInvalidName || ve.Rule == flow.RuleInvalidBusinessK || ve.Rule == flow.RuleInvalidMetadata {
			if v, _ := d.root.get("name"); v != nil && ve.Rule == flow.RuleInvalidName {
				at, path = v, "name"
			}
		}
		c.add(at, path, fixOf(ve.Rule), "%s", ve.Message)
	}
	if len(flow.ValidationErrors(err)) == 0 {
		c.add(nil, "(document)", "", "%v", err)
	}
	return nil, c.err()
}

// fixOf names the remedy of a flow validation rule; the builder's message
// says it in detail.
func fixOf(r flow.Rule) string {
	switch r {
	case flow.RuleCycle:
		return "break the cycle: a document's steps form a DAG"
	case flow.RuleUnreachable:
		return "route a transition to the step, or remove it"
	case flow.RuleNoConvergence:
		return "join the parallel branches in one step (join: <step>)"
	case flow.RuleUnroutedEvent:
		return "route the event with next, branch or on"
	case flow.RuleInvalidName:
		return "use letters, digits, '_' and '-' only"
	}
	return "see the message"
}

// pendingRef is a template's reference to a step whose answer (does that
// step lead to the referring one?) waits for the others; at is where its
// error goes among the errors found before it.
type pendingRef struct {
	ref  refAt
	step *stepDoc
	rt   *stepRT
	at   int
}

// refsLead answers whether the step each reference reads leads to the
// step that reads it, all at once (package dag: searches bounded by the
// steps' topological positions, shared between the references to one
// step, so no sets of ancestors). It records the reads, and the errors of
// the references that no path serves, in the order the references came.
func (c *errs) refsLead(d *Document, preds map[string][]string, pending []pendingRef) {
	if len(pending) == 0 {
		return
	}
	idx := make(map[string]int, len(d.steps))
	for i, s := range d.steps {
		idx[s.name] = i
	}
	succ := make([][]int, len(d.steps))
	for t, froms := range preds {
		j, ok := idx[t]
		if !ok {
			continue
		}
		for _, f := range froms {
			succ[idx[f]] = append(succ[idx[f]], j)
		}
	}
	qs := make([]dag.Query, len(pending))
	for i, p := range pending {
		qs[i] = dag.Query{From: idx[p.ref.r.step], To: idx[p.step.name]}
	}
	leads := dag.New(succ).Leads(qs)
	before := c.list
	c.list = make([]*Error, 0, len(before))
	k := 0
	for i, p := range pending {
		c.list = append(c.list, before[k:p.at]...)
		k = p.at
		r, s := p.ref, p.step
		switch {
		case !leads[i]:
			c.add(r.n, r.path, fmt.Sprintf("read a step that runs before %q, or route %q to it", s.name, r.r.step), "%s reads step %q, which does not lead to step %q, so its output is never there", r.r.text, r.r.step, s.name)
		case !slices.Contains(p.rt.reads, r.r.step):
			p.rt.reads = append(p.rt.reads, r.r.step)
		}
	}
	c.list = append(c.list, before[k:]...)
}

func optionsOf(o options) []flow.StepOption {
	var out []flow.StepOption
	if o.retry != nil {
		out = append(out, flow.Retry(*o.retry))
	}
	if o.timeout != nil {
		out = append(out, flow.Timeout(*o.timeout))
	}
	if o.queue != nil {
		out = append(out, flow.Queue(*o.queue))
	}
	if o.priority != nil {
		out = append(out, flow.Priority(*o.priority))
	}
	return out
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// mapSource parses a map expression: input, input.<field>,
// steps.<step>.output or steps.<step>.output.<field>.
func mapSource(expr string) (step, field string, ok bool) {
	segs := strings.Split(strings.TrimSpace(expr), ".")
	for _, g := range segs {
		if !identRE.MatchString(g) {
			return "", "", false
		}
	}
	switch {
	case segs[0] == "input" && len(segs) <= 2:
		if len(segs) == 2 {
			field = segs[1]
		}
		return "", field, field != "" || len(segs) == 1
	case segs[0] == "steps" && len(segs) >= 3 && len(segs) <= 4 && segs[2] == "output" && segs[1] != "":
		if len(segs) == 4 {
			field = segs[3]
		}
		return segs[1], field, field != "" || len(segs) == 3
	}
	return "", "", false
}

func addStep(b *flow.Builder, rt *stepRT, c *errs) {
	s := rt.doc
	opts := optionsOf(s.opts)
	if len(rt.events) > 1 || (len(rt.events) == 1 && rt.events[0] != flow.EventOK) {
		opts = append(opts, flow.Events(rt.events...))
	}
	if s.over != "" {
		step, field, ok := mapSource(s.over)
		if !ok {
			c.add(s.overN, join(s.path, "map"), "write input, input.<field>, steps.<step>.output or steps.<step>.output.<field>", "%q is not an array expression", s.over)
			return
		}
		if step != "" {
			rt.reads = append(rt.reads, step)
		}
		opts = append(opts, flow.Over(step, field))
		if rt.action != nil && rt.action.Remote {
			flow.RemoteMap(b, s.name, rt.action.Name, append(opts, rt.remoteHooks(true)...)...)
			return
		}
		flow.Map(b, s.name, func(ctx context.Context, item json.RawMessage) (json.RawMessage, error) {
			in, err := flow.RunInput[json.RawMessage](ctx)
			if err != nil {
				return nil, err
			}
			out, _, err := rt.call(ctx, in, item, true)
			return out, err
		}, opts...)
		return
	}
	if s.until != nil {
		flow.EventStep(b, s.name, rt.waitUntil, opts...)
		return
	}
	if s.wait != nil {
		opts = append(opts, flow.Waits(s.wait.timeout))
		w := s.wait
		flow.EventStep(b, s.name, func(ctx context.Context, in json.RawMessage) (flow.Result[json.RawMessage], error) {
			if w.event != "" {
				input, err := flow.RunInput[json.RawMessage](ctx)
				if err != nil {
					return flow.Result[json.RawMessage]{}, err
				}
				if err := triggers.Await(ctx, &triggers.AwaitRequest{Event: w.event, Match: w.match, Input: input, LookBack: w.lookBack}); err != nil {
					return flow.Result[json.RawMessage]{}, err
				}
			}
			return flow.Wait[json.RawMessage](), nil
		}, opts...)
		return
	}
	if rt.action != nil && rt.action.Remote {
		flow.Remote(b, s.name, rt.action.Name, append(opts, rt.remoteHooks(false)...)...)
		return
	}
	flow.EventStep(b, s.name, func(ctx context.Context, in json.RawMessage) (flow.Result[json.RawMessage], error) {
		out, ev, err := rt.call(ctx, in, nil, false)
		if err != nil {
			return flow.Result[json.RawMessage]{}, err
		}
		return flow.Emit(ev, out), nil
	}, opts...)
}

// call runs the step's action with its resolved arguments and picks the
// event from its branch.
func (rt *stepRT) call(ctx context.Context, in, item json.RawMessage, isMap bool) (json.RawMessage, string, error) {
	sc, call, args, err := rt.prepare(ctx, in, item, isMap)
	if err != nil {
		return nil, "", err
	}
	out, err := rt.action.Invoke(ctx, call, args)
	if err != nil {
		var ae *ArgsError
		if errors.As(err, &ae) {
			return nil, "", flow.NonRetryable(err)
		}
		return nil, "", err
	}
	return rt.finish(sc, out)
}

// prepare resolves the step's arguments in the step's call context: the
// scope its templates and conditions read, the action's call, and the
// arguments. What a step does before it invokes its action, in this
// process or (a remote action) before it hands the task out.
func (rt *stepRT) prepare(ctx context.Context, in, item json.RawMessage, isMap bool) (*scope, ActionCall, json.RawMessage, error) {
	s := rt.doc
	info, _ := flow.CallInfo(ctx)
	sc := &scope{step: s.name, steps: map[string]any{}, isMap: isMap}
	if err := unmarshal(in, &sc.input); err != nil {
		return nil, ActionCall{}, nil, flow.NonRetryable(fmt.Errorf("step %q: the run input is not JSON: %w", s.name, err))
	}
	if isMap {
		if err := unmarshal(item, &sc.item); err != nil {
			return nil, ActionCall{}, nil, flow.NonRetryable(fmt.Errorf("step %q: element %d is not JSON: %w", s.name, info.Index, err))
		}
	}
	// The run's created_by (StartOptions.CreatedBy); a run started without
	// one falls back to its input's "created_by" field.
	createdBy, err := flow.CreatedBy(ctx)
	if err != nil {
		return nil, ActionCall{}, nil, err // the run could not be read: retried
	}
	if m, ok := sc.input.(map[string]any); ok && createdBy == "" {
		createdBy, _ = m["created_by"].(string)
	}
	// The user the run was started on behalf of (StartOptions.OnBehalfOf).
	onBehalfOf, err := flow.OnBehalfOf(ctx)
	if err != nil {
		return nil, ActionCall{}, nil, err
	}
	sc.run = map[string]any{"id": info.RunID, "step": s.name, "attempt": info.Attempt, "created_by": createdBy, "on_behalf_of": onBehalfOf}
	for _, r := range rt.reads {
		raw, err := flow.Output[json.RawMessage](ctx, r)
		if errors.Is(err, flow.ErrSkipped) {
			continue
		}
		if err != nil {
			return nil, ActionCall{}, nil, flow.NonRetryable(err)
		}
		var v any
		if err := unmarshal(raw, &v); err != nil {
			return nil, ActionCall{}, nil, flow.NonRetryable(fmt.Errorf("step %q: the output of %q is not JSON: %w", s.name, r, err))
		}
		sc.steps[r] = v
	}
	args := json.RawMessage("{}")
	var used []secretUse
	if rt.args != nil {
		sc.secret = func(name string) (string, error) {
			v, err := secrets.Value(ctx, name)
			if err == nil {
				used = append(used, secretUse{name: name, value: v})
			}
			return v, err
		}
		v, err := rt.args.resolve(sc)
		var te *TemplateError
		if errors.As(err, &te) {
			return nil, ActionCall{}, nil, flow.NonRetryable(err)
		} else if err != nil {
			return nil, ActionCall{}, nil, err // a secret could not be read: retried
		}
		if args, err = json.Marshal(v); err != nil {
			return nil, ActionCall{}, nil, flow.NonRetryable(fmt.Errorf("step %q: the arguments do not encode: %w", s.name, err))
		}
		if len(args) > MaxTemplateOutput {
			return nil, ActionCall{}, nil, flow.NonRetryable(fmt.Errorf("step %q: the resolved arguments are %d bytes, more than the limit of %d", s.name, len(args), MaxTemplateOutput))
		}
	}
	call := ActionCall{RunID: info.RunID, Step: s.name, Index: info.Index, CreatedBy: createdBy, OnBehalfOf: onBehalfOf, IdempotencyKey: info.IdempotencyKey, secrets: used}
	return sc, call, args, nil
}

// finish picks the event of the action's output from the step's branch:
// what a step does after its action returned, in this process or (a
// remote action) when its worker completes the task.
func (rt *stepRT) finish(sc *scope, out json.RawMessage) (json.RawMessage, string, error) {
	s := rt.doc
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if len(s.branch) == 0 {
		return out, flow.EventOK, nil
	}
	var result any
	if err := unmarshal(out, &result); err != nil {
		return nil, "", flow.NonRetryable(fmt.Errorf("step %q: the action's output is not JSON: %w", s.name, err))
	}
	for i, cond := range rt.conds {
		if cond == nil { // else
			return out, ElseEvent, nil
		}
		ok, err := cond.eval(sc, result)
		if err != nil {
			return nil, "", flow.NonRetryable(err)
		}
		if ok {
			return out, BranchEvent(i), nil
		}
	}
	return nil, "", flow.NonRetryable(fmt.Errorf("step %q: no branch condition matched the result %s; add an else case", s.name, out))
}

// remoteHooks are the hooks of a step whose action workers outside the
// process run: the worker receives the resolved arguments (of the
// element, for a map step), and its output goes through the branch.
func (rt *stepRT) remoteHooks(isMap bool) []flow.StepOption {
	// in is the run input, or the element of a map step.
	scope := func(ctx context.Context, in json.RawMessage) (*scope, ActionCall, json.RawMessage, error) {
		if !isMap {
			return rt.prepare(ctx, in, nil, false)
		}
		run, err := flow.RunInput[json.RawMessage](ctx)
		if err != nil {
			return nil, ActionCall{}, nil, err
		}
		return rt.prepare(ctx, run, in, true)
	}
	return []flow.StepOption{
		flow.RemotePrepare(func(ctx context.Context, in flow.RemoteInput) (json.RawMessage, error) {
			_, _, args, err := scope(ctx, in)
			return args, err
		}),
		flow.RemoteFinish(func(ctx context.Context, in flow.RemoteInput, out json.RawMessage) (flow.Result[json.RawMessage], error) {
			sc, _, _, err := scope(ctx, in)
			if err != nil {
				return flow.Result[json.RawMessage]{}, err
			}
			res, ev, err := rt.finish(sc, out)
			if err != nil {
				return flow.Result[json.RawMessage]{}, err
			}
			return flow.Emit(ev, res), nil
		}),
	}
}

func unmarshal(raw json.RawMessage, v *any) error {
	if len(raw) == 0 {
		*v = nil
		return nil
	}
	return json.Unmarshal(raw, v)
}
