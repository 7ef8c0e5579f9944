package flowdoc

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/suggest"
	"github.com/hephaestus-go/hephaestus/internal/triggers"
)

// MaxDocumentSize bounds the size of a document, in bytes.
const MaxDocumentSize = 1 << 20

// Document is a parsed flow document. Compile turns it into a flow.
type Document struct {
	src       string
	name      string
	version   int
	start     string
	startNode *node
	key       string
	scope     flow.KeyScope
	// ckey is the input path of concurrency_key ("{{input.tenant}}").
	ckey string
	// timeout is execution_timeout: the runs' default execution timeout.
	timeout time.Duration
	// attrs are search_attributes: the runs' declared search attributes.
	attrs     map[string]flow.AttrType
	tags      []string
	metadata  map[string]any
	defaults  options
	schedules []Schedule
	triggers  []Trigger
	steps     []*stepDoc
	byName    map[string]*stepDoc
	root      *node
}

// Name returns the flow name the document declares.
func (d *Document) Name() string { return d.name }

type options struct {
	retry    *flow.RetryPolicy
	timeout  *time.Duration
	queue    *string
	priority *int
}

type stepDoc struct {
	name     string
	key      *node // the step's key in steps
	path     string
	action   string
	actionN  *node
	args     *node // a mapping, or nil
	next     []string
	nextN    *node
	done     bool
	parallel []string
	join     string
	branch   []branchCase
	branchN  *node
	over     string
	overN    *node
	wait     *waitSpec
	until    *untilSpec
	approval *approvalSpec
	on       []route
	opts     options
}

type branchCase struct {
	cond   string
	condN  *node
	then   []string
	thenN  *node
	isElse bool
	path   string
}

type waitSpec struct {
	events  []string
	timeout time.Duration
	// event, when set, is the event the step waits for (resumed with
	// "received" by the first one match accepts, looking back lookBack).
	event    string
	match    string
	lookBack time.Duration
}

// approvalSpec is an approval gate: a wait for the events approved and
// rejected (and expired, after the deadline) decided by a person.
type approvalSpec struct {
	n        *node
	prompt   string
	users    []string
	groups   []string
	deadline time.Duration
}

type route struct {
	event string
	to    []string
	n     *node
}

var (
	docKeys      = []string{"$schema", "name", "version", "description", "start", "business_key", "concurrency_key", "execution_timeout", "search_attributes", "tags", "metadata", "defaults", "schedules", "on", "steps"}
	stepKeys     = []string{"description", "action", "args", "next", "branch", "parallel", "join", "done", "map", "wait", "wait_until", "approval", "on", "retry", "timeout", "queue", "priority"}
	optKeys      = []string{"retry", "timeout", "queue", "priority"}
	retryKeys    = []string{"max_attempts", "initial_backoff", "max_backoff", "multiplier", "jitter"}
	approvalKeys = []string{"prompt", "assignees", "deadline"}
	assigneeKeys = []string{"users", "groups"}
)

// Parse reads a flow document in YAML or JSON (JSON is read by the same
// decoder, so positions are those of the text). name names the document
// in errors, e.g. its file name. Every problem is reported at once, each
// an *Error.
func Parse(name string, data []byte) (*Document, error) {
	d, c := parse(name, data)
	if err := c.err(); err != nil {
		return nil, err
	}
	return d, nil
}

// parse returns the document, nil when its text does not parse, and the
// problems found.
func parse(name string, data []byte) (*Document, *errs) {
	c := &errs{doc: name}
	if len(data) > MaxDocumentSize {
		c.add(nil, "(document)", fmt.Sprintf("split the flow or shrink it below %d bytes", MaxDocumentSize), "the document is %d bytes, more than the limit of %d", len(data), MaxDocumentSize)
		return nil, c
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var y yaml.Node
	if err := dec.Decode(&y); err != nil {
		c.add(lineOf(err), "(document)", "correct the syntax at the line named", "not valid YAML or JSON: %v", err)
		return nil, c
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		c.add(&node{line: extra.Line, col: extra.Column}, "(document)", "keep one flow per document; remove the '---' separator and what follows", "the text holds more than one YAML document")
		return nil, c
	}
	root, err := fromYAML(&y, 0)
	if err != nil {
		c.add(lineOf(err), "(document)", "correct the value the message names", "%v", err)
		return nil, c
	}
	d := &Document{src: name, root: root, version: 1, scope: flow.ScopeActive, byName: map[string]*stepDoc{}}
	p := &parser{c: c}
	p.document(d, root)
	return d, c
}

var lineRE = regexp.MustCompile(`line (\d+)(?: column (\d+))?`)

// lineOf finds the position a decoder's message names.
func lineOf(err error) *node {
	m := lineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	n := &node{col: 1}
	n.line, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		n.col, _ = strconv.Atoi(m[2])
	}
	return n
}

type parser struct{ c *errs }

func (p *parser) keys(n *node, path string, allowed []string) {
	for _, k := range n.keys {
		if !slices.Contains(allowed, k.value) {
			p.c.add(k, join(path, k.value), "use one of: "+strings.Join(allowed, ", "), "unknown key %q", k.value)
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func (p *parser) mapping(n *node, path string) bool {
	if n == nil || n.kind != yaml.MappingNode {
		p.c.add(n, path, "write a mapping of keys to values", "expected a mapping, found %s", n.kindName())
		return false
	}
	return true
}

func (p *parser) str(n *node, path string) (string, bool) {
	if n == nil || n.kind != yaml.ScalarNode || n.tag != "!!str" || n.value == "" {
		p.c.add(n, path, "write a non-empty string", "expected a string, found %s", n.kindName())
		return "", false
	}
	return n.value, true
}

func (p *parser) integer(n *node, path string) (int, bool) {
	v, err := n.toAny()
	i, ok := v.(int64)
	if err != nil || n.kind != yaml.ScalarNode || !ok || int64(int(i)) != i {
		p.c.add(n, path, "write a whole number", "expected an integer, found %s", n.kindName())
		return 0, false
	}
	return int(i), true
}

func (p *parser) number(n *node, path string) (float64, bool) {
	v, err := n.toAny()
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		if err == nil {
			return x, true
		}
	}
	p.c.add(n, path, "write a number", "expected a number, found %s", n.kindName())
	return 0, false
}

func (p *parser) duration(n *node, path string) (time.Duration, bool) {
	s, ok := p.str(n, path)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		p.c.add(n, path, `write a non-negative Go duration such as "30s", "5m" or "1h30m"`, "%q is not a duration", s)
		return 0, false
	}
	return d, true
}

// targets reads a step name or a list of them.
func (p *parser) targets(n *node, path string) []string {
	if n != nil && n.kind == yaml.SequenceNode {
		var out []string
		for i, c := range n.vals {
			if s, ok := p.str(c, fmt.Sprintf("%s[%d]", path, i)); ok {
				out = append(out, s)
			}
		}
		if len(out) == 0 && len(n.vals) == 0 {
			p.c.add(n, path, "name at least one step", "the list of steps is empty")
		}
		return out
	}
	if s, ok := p.str(n, path); ok {
		return []string{s}
	}
	return nil
}

func (p *parser) document(d *Document, root *node) {
	if !p.mapping(root, "(document)") {
		return
	}
	p.keys(root, "", docKeys)
	if v, k := root.get("name"); k != nil {
		d.name, _ = p.str(v, "name")
	} else {
		p.c.add(root, "name", `add a top-level "name: <flow name>"`, "the document has no name")
	}
	if v, k := root.get("version"); k != nil {
		if i, ok := p.integer(v, "version"); ok {
			d.version = i
		}
	}
	if v, k := root.get("$schema"); k != nil {
		p.str(v, "$schema")
	}
	if v, k := root.get("description"); k != nil {
		p.str(v, "description")
	}
	if v, k := root.get("start"); k != nil {
		d.start, _ = p.str(v, "start")
		d.startNode = v
	}
	if v, k := root.get("business_key"); k != nil {
		p.businessKey(d, v)
	}
	if v, k := root.get("concurrency_key"); k != nil {
		p.concurrencyKey(d, v)
	}
	if v, k := root.get("execution_timeout"); k != nil {
		d.timeout, _ = p.duration(v, "execution_timeout")
	}
	if v, k := root.get("search_attributes"); k != nil && p.mapping(v, "search_attributes") {
		p.searchAttributes(d, v)
	}
	if v, k := root.get("tags"); k != nil {
		if v.kind != yaml.SequenceNode {
			p.c.add(v, "tags", "write a list of strings", "expected a list, found %s", v.kindName())
		} else {
			for i, t := range v.vals {
				if s, ok := p.str(t, fmt.Sprintf("tags[%d]", i)); ok {
					d.tags = append(d.tags, s)
				}
			}
		}
	}
	if v, k := root.get("metadata"); k != nil && p.mapping(v, "metadata") {
		m, err := v.toAny()
		if err != nil {
			p.c.add(v, "metadata", "write plain JSON values", "%v", err)
		} else {
			d.metadata = m.(map[string]any)
		}
	}
	if v, k := root.get("defaults"); k != nil && p.mapping(v, "defaults") {
		p.keys(v, "defaults", optKeys)
		p.options(&d.defaults, v, "defaults")
	}
	if v, k := root.get("schedules"); k != nil {
		p.schedules(d, v)
	}
	if v, k := root.get("on"); k != nil {
		p.eventTriggers(d, v)
	}
	steps, k := root.get("steps")
	if k == nil {
		p.c.add(root, "steps", "add a mapping \"steps\" of step names to steps", "the document has no steps")
		return
	}
	if !p.mapping(steps, "steps") {
		return
	}
	if len(steps.keys) == 0 {
		p.c.add(steps, "steps", "add at least one step", "the document has no steps")
	}
	if n := len(steps.keys); n > flow.MaxSteps {
		// Refused before anything is built over the steps.
		p.c.add(steps, "steps", "split the flow into smaller flows", "the document has %d steps, more than the limit of %d (flow.MaxSteps)", n, flow.MaxSteps)
		return
	}
	for i, kn := range steps.keys {
		s := &stepDoc{name: kn.value, key: kn, path: "steps." + kn.value}
		p.step(s, steps.vals[i])
		d.steps = append(d.steps, s)
		d.byName[s.name] = s
	}
}

// concurrencyKeyRe is the form of concurrency_key: a template of one
// input path.
var concurrencyKeyRe = regexp.MustCompile(`^\{\{\s*input\.([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\s*\}\}$`)

// concurrencyKey reads concurrency_key: the run's key for flow control is
// the value at an input path (flow.Builder.ConcurrencyKeyFrom).
func (p *parser) concurrencyKey(d *Document, v *node) {
	s, ok := p.str(v, "concurrency_key")
	if !ok {
		return
	}
	m := concurrencyKeyRe.FindStringSubmatch(s)
	if m == nil {
		p.c.add(v, "concurrency_key", `write one input path as a template, such as "{{input.tenant}}"`, "%q is not a template of an input path", s)
		return
	}
	d.ckey = m[1]
}

func (p *parser) businessKey(d *Document, v *node) {
	if v.kind == yaml.ScalarNode {
		d.key, _ = p.str(v, "business_key")
		return
	}
	if !p.mapping(v, "business_key") {
		return
	}
	p.keys(v, "business_key", []string{"name", "scope"})
	if n, k := v.get("name"); k != nil {
		d.key, _ = p.str(n, "business_key.name")
	} else {
		p.c.add(v, "business_key.name", "add the key's name", "the business key has no name")
	}
	if n, k := v.get("scope"); k != nil {
		if s, ok := p.str(n, "business_key.scope"); ok {
			switch flow.KeyScope(s) {
			case flow.ScopeActive, flow.ScopeForever, flow.ScopeNone:
				d.scope = flow.KeyScope(s)
			default:
				p.c.add(n, "business_key.scope", fmt.Sprintf("use %q, %q or %q", flow.ScopeActive, flow.ScopeForever, flow.ScopeNone), "unknown scope %q", s)
			}
		}
	}
}

func (p *parser) options(o *options, n *node, path string) {
	if v, k := n.get("retry"); k != nil && p.mapping(v, join(path, "retry")) {
		rp := join(path, "retry")
		p.keys(v, rp, retryKeys)
		r := &flow.RetryPolicy{}
		if x, k := v.get("max_attempts"); k != nil {
			r.MaxAttempts, _ = p.integer(x, join(rp, "max_attempts"))
		}
		if x, k := v.get("initial_backoff"); k != nil {
			r.InitialBackoff, _ = p.duration(x, join(rp, "initial_backoff"))
		}
		if x, k := v.get("max_backoff"); k != nil {
			r.MaxBackoff, _ = p.duration(x, join(rp, "max_backoff"))
		}
		if x, k := v.get("multiplier"); k != nil {
			r.Multiplier, _ = p.number(x, join(rp, "multiplier"))
		}
		if x, k := v.get("jitter"); k != nil {
			r.Jitter, _ = p.number(x, join(rp, "jitter"))
		}
		o.retry = r
	}
	if v, k := n.get("timeout"); k != nil {
		if d, ok := p.duration(v, join(path, "timeout")); ok {
			if d == 0 {
				p.c.add(v, join(path, "timeout"), `write a positive duration such as "30s"`, "the timeout is zero")
			} else {
				o.timeout = &d
			}
		}
	}
	if v, k := n.get("queue"); k != nil {
		if s, ok := p.str(v, join(path, "queue")); ok {
			o.queue = &s
		}
	}
	if v, k := n.get("priority"); k != nil {
		if i, ok := p.integer(v, join(path, "priority")); ok {
			o.priority = &i
		}
	}
}

func (p *parser) step(s *stepDoc, n *node) {
	if !p.mapping(n, s.path) {
		return
	}
	p.keys(n, s.path, stepKeys)
	if v, k := n.get("description"); k != nil {
		p.str(v, join(s.path, "description"))
	}
	if v, k := n.get("action"); k != nil {
		s.action, _ = p.str(v, join(s.path, "action"))
		s.actionN = v
	}
	if v, k := n.get("args"); k != nil && p.mapping(v, join(s.path, "args")) {
		s.args = v
		if s.action == "" && k != nil {
			p.c.add(k, join(s.path, "args"), "add an action for the arguments, or remove args", "arguments without an action")
		}
	}
	if v, k := n.get("next"); k != nil {
		s.next = p.targets(v, join(s.path, "next"))
		s.nextN = v
	}
	if v, k := n.get("parallel"); k != nil {
		path := join(s.path, "parallel")
		if v.kind != yaml.SequenceNode {
			p.c.add(v, path, "write a list of the steps to run in parallel", "expected a list, found %s", v.kindName())
		} else {
			s.parallel = p.targets(v, path)
		}
		if s.nextN == nil {
			s.nextN = v
		}
	}
	if v, k := n.get("join"); k != nil {
		s.join, _ = p.str(v, join(s.path, "join"))
		if s.nextN == nil {
			s.nextN = v
		}
	}
	if v, k := n.get("done"); k != nil {
		b, err := v.toAny()
		if bv, ok := b.(bool); err != nil || !ok || !bv {
			p.c.add(v, join(s.path, "done"), "write done: true, or remove it", "expected true, found %s", v.kindName())
		} else {
			s.done = true
		}
	}
	if v, k := n.get("branch"); k != nil {
		p.branch(s, v)
	}
	if v, k := n.get("map"); k != nil {
		s.over, _ = p.str(v, join(s.path, "map"))
		s.overN = v
	}
	if v, k := n.get("wait"); k != nil {
		p.wait(s, v)
	}
	if v, k := n.get("approval"); k != nil {
		if s.wait != nil {
			p.c.add(k, join(s.path, "approval"), "keep one of them: an approval is a wait of its own", "the step has wait and approval")
		} else {
			p.approval(s, v)
		}
	}
	if v, k := n.get("wait_until"); k != nil {
		p.waitUntil(s, k, v)
	}
	if v, k := n.get("on"); k != nil && p.mapping(v, join(s.path, "on")) {
		for i, kn := range v.keys {
			s.on = append(s.on, route{event: kn.value, to: p.targets(v.vals[i], join(s.path, "on."+kn.value)), n: kn})
		}
	}
	p.options(&s.opts, n, s.path)
	// One way out on "ok".
	var ways []string
	for _, w := range []struct {
		name string
		set  bool
	}{{"next", len(s.next) > 0}, {"parallel", len(s.parallel) > 0}, {"join", s.join != ""}, {"done", s.done}, {"branch", len(s.branch) > 0}} {
		if w.set {
			ways = append(ways, w.name)
		}
	}
	if len(ways) > 1 {
		p.c.add(s.key, s.path, "keep one of them: a step leaves by exactly one of next, parallel, join, branch or done", "the step has %s", strings.Join(ways, " and "))
	}
	if s.approval != nil && len(ways) > 0 {
		at := s.nextN
		if at == nil {
			at = s.key
		}
		p.c.add(at, s.path, "route the gate's events with on: {approved: <step>, rejected: <step>}", "an approval gate leaves by its events, not by %s", strings.Join(ways, " or "))
	}
	if s.wait != nil {
		if s.action != "" {
			p.c.add(s.actionN, join(s.path, "action"), "move the action to a step before or after the wait", "a waiting step calls no action")
		}
		if len(s.branch) > 0 {
			p.c.add(s.branchN, join(s.path, "branch"), "route the wait's events with on: {<event>: <step>}", "a waiting step has no result to branch on")
		}
	} else if s.action == "" && s.until == nil {
		p.c.add(s.key, join(s.path, "action"), "add action: <name of a registered action>, wait: {...} for a step that waits, or wait_until: <time>", "the step calls no action")
	}
	if s.over != "" && len(s.branch) > 0 {
		p.c.add(s.branchN, join(s.path, "branch"), "branch in a step after the map step, over its output", "a map step cannot branch")
	}
	if s.over != "" && s.wait != nil {
		p.c.add(s.overN, join(s.path, "map"), "map in one step and wait in another", "a map step cannot wait")
	}
	if len(ways) == 0 && len(s.on) == 0 && s.approval == nil { // a gate's routes are checked by the compiler
		p.c.add(s.key, s.path, "add next: <step>, branch, parallel, join: <step>, or done: true", "the step has no transition")
	}
}

func (p *parser) branch(s *stepDoc, v *node) {
	path := join(s.path, "branch")
	s.branchN = v
	if v.kind != yaml.SequenceNode || len(v.vals) == 0 {
		p.c.add(v, path, `write a list of cases: - if: <condition>  then: <step>, ending with - else: <step>`, "expected a non-empty list, found %s", v.kindName())
		return
	}
	for i, c := range v.vals {
		cp := fmt.Sprintf("%s[%d]", path, i)
		if !p.mapping(c, cp) {
			continue
		}
		bc := branchCase{path: cp}
		if e, k := c.get("else"); k != nil {
			p.keys(c, cp, []string{"else"})
			bc.isElse = true
			bc.then = p.targets(e, join(cp, "else"))
			bc.thenN = e
			if i != len(v.vals)-1 {
				p.c.add(k, join(cp, "else"), "move the else case to the end of the list", "cases after else never match")
			}
		} else {
			p.keys(c, cp, []string{"if", "then"})
			cond, k := c.get("if")
			if k == nil {
				p.c.add(c, join(cp, "if"), "add if: <condition>", "the case has no condition")
			} else if cond.kind == yaml.ScalarNode && cond.tag == "!!bool" {
				bc.cond, bc.condN = cond.value, cond
			} else {
				bc.cond, _ = p.str(cond, join(cp, "if"))
				bc.condN = cond
			}
			t, k := c.get("then")
			if k == nil {
				p.c.add(c, join(cp, "then"), "add then: <step> (or done)", "the case has no target")
			} else {
				bc.then = p.targets(t, join(cp, "then"))
				bc.thenN = t
			}
		}
		s.branch = append(s.branch, bc)
	}
}

func (p *parser) wait(s *stepDoc, v *node) {
	path := join(s.path, "wait")
	s.wait = &waitSpec{}
	if v.kind == yaml.ScalarNode && v.tag == "!!bool" && v.value == "true" {
		return
	}
	if !p.mapping(v, path) {
		return
	}
	p.keys(v, path, []string{"events", "timeout", "event", "match", "look_back"})
	if e, k := v.get("events"); k != nil {
		if e.kind != yaml.SequenceNode {
			p.c.add(e, join(path, "events"), "write a list of event names", "expected a list, found %s", e.kindName())
		} else {
			for i, x := range e.vals {
				if ev, ok := p.str(x, fmt.Sprintf("%s.events[%d]", path, i)); ok {
					if ev == flow.EventTimeout {
						p.c.add(x, fmt.Sprintf("%s.events[%d]", path, i), "remove it: a wait with a timeout emits it, route it with on: {timeout: <step>}", "the event %q is reserved", ev)
						continue
					}
					s.wait.events = append(s.wait.events, ev)
				}
			}
		}
	}
	if t, k := v.get("timeout"); k != nil {
		s.wait.timeout, _ = p.duration(t, join(path, "timeout"))
	}
	p.waitEvent(s, v, path)
}

// EventReceived is the event a step that waits for an event (wait:
// {event: ...}) is resumed with.
const EventReceived = "received"

// waitEvent reads the keys of a wait for an event: event, match and
// look_back.
func (p *parser) waitEvent(s *stepDoc, v *node, path string) {
	e, ek := v.get("event")
	if ek != nil {
		s.wait.event, _ = p.str(e, join(path, "event"))
		if s.wait.event != "" && !slices.Contains(s.wait.events, EventReceived) {
			s.wait.events = append(s.wait.events, EventReceived)
		}
	}
	if m, k := v.get("match"); k != nil {
		if ek == nil {
			p.c.add(k, join(path, "match"), "add event: <name> to wait for an event", "match is set without event")
		}
		if src, ok := p.str(m, join(path, "match")); ok {
			s.wait.match = src
			if _, err := triggers.CompileMatch(src); err != nil {
				p.c.add(m, join(path, "match"), "write a CEL expression over event and input that gives a boolean", "%v", err)
			}
		}
	}
	if lb, k := v.get("look_back"); k != nil {
		if ek == nil {
			p.c.add(k, join(path, "look_back"), "add event: <name> to wait for an event", "look_back is set without event")
		}
		s.wait.lookBack, _ = p.duration(lb, join(path, "look_back"))
	}
}

// The events of an approval gate.
const (
	EventApproved = "approved"
	EventRejected = "rejected"
	// EventExpired is the event of a gate whose deadline passed; the
	// compiled flow routes the wait's timeout event (flow.EventTimeout).
	EventExpired = "expired"
)

func (p *parser) approval(s *stepDoc, v *node) {
	path := join(s.path, "approval")
	a := &approvalSpec{n: v}
	s.approval = a
	s.wait = &waitSpec{events: []string{EventApproved, EventRejected}}
	if v.kind == yaml.ScalarNode && v.tag == "!!bool" && v.value == "true" {
		return
	}
	if !p.mapping(v, path) {
		return
	}
	p.keys(v, path, approvalKeys)
	if x, k := v.get("prompt"); k != nil {
		a.prompt, _ = p.str(x, join(path, "prompt"))
	}
	if x, k := v.get("assignees"); k != nil && p.mapping(x, join(path, "assignees")) {
		ap := join(path, "assignees")
		p.keys(x, ap, assigneeKeys)
		list := func(key string) []string {
			l, k := x.get(key)
			if k == nil {
				return nil
			}
			lp := join(ap, key)
			if l.kind != yaml.SequenceNode {
				p.c.add(l, lp, "write a list of names", "expected a list, found %s", l.kindName())
				return nil
			}
			var out []string
			for i, e := range l.vals {
				ep := fmt.Sprintf("%s[%d]", lp, i)
				if name, ok := p.str(e, ep); ok {
					if slices.Contains(out, name) {
						p.c.add(e, ep, "remove the repeated name", "%q is named twice", name)
						continue
					}
					out = append(out, name)
				}
			}
			return out
		}
		a.users, a.groups = list("users"), list("groups")
		if len(a.users) == 0 && len(a.groups) == 0 {
			p.c.add(x, ap, "name at least one user (users: [..]) or group (groups: [..]), or remove assignees so that anyone may decide", "the gate has no assignees")
		}
	}
	if x, k := v.get("deadline"); k != nil {
		if d, ok := p.duration(x, join(path, "deadline")); ok {
			if d == 0 {
				p.c.add(x, join(path, "deadline"), `write a positive duration such as "24h", or remove the deadline`, "the deadline is zero")
			} else {
				a.deadline = d
				s.wait.timeout = d
			}
		}
	}
}

// searchAttributes reads search_attributes: {name: type}, each error at
// its line, naming the attribute.
func (p *parser) searchAttributes(d *Document, v *node) {
	types := make([]string, len(hephtype.AttrTypes))
	for i, t := range hephtype.AttrTypes {
		types[i] = string(t)
	}
	for i, kn := range v.keys {
		path := "search_attributes." + kn.value
		if err := hephtype.CheckAttrName(kn.value); err != nil {
			p.c.add(kn, path, "use letters, digits, _ and . (not first)", "%v", err)
			continue
		}
		s, ok := p.str(v.vals[i], path)
		if !ok {
			continue
		}
		if t := flow.AttrType(s); !t.Valid() {
			p.c.add(v.vals[i], path, "use one of "+strings.Join(types, ", "), "%q is not a search attribute type%s", s,
				suggest.DidYouMean(s, types, true))
			continue
		}
		if d.attrs == nil {
			d.attrs = map[string]flow.AttrType{}
		}
		d.attrs[kn.value] = flow.AttrType(s)
	}
}
