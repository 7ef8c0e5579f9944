package flowdoc_test

import (
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// One case per validation rule: the first error's line, column, path,
// message and fix.
func TestValidationRules(t *testing.T) {
	cases := []struct {
		rule      string
		doc       string
		line, col int
		path      string
		msg, fix  string
	}{
		{"syntax", "name: v\nsteps:\n  a: b\n c\n", 3, 1, "(document)", "not valid YAML or JSON", "correct the syntax"},
		{"two documents", "name: v\n---\nname: w\n", 2, 1, "(document)", "more than one YAML document", "keep one flow per document"},
		{"alias", "name: v\nx: &a 1\ny: *a\n", 3, 1, "(document)", "aliases", "correct the value"},
		{"duplicate key", "name: v\nname: w\n", 2, 1, "(document)", `the key "name" appears twice`, "correct the value"},
		{"not a mapping", "- a\n", 1, 1, "(document)", "expected a mapping, found a list", "write a mapping"},
		{"unknown key", "name: v\nstep: {}\nsteps: {a: {action: echo, done: true}}\n", 2, 1, "step", `unknown key "step"`, "use one of: $schema, name"},
		{"no name", "steps: {a: {action: echo, done: true}}\n", 1, 1, "name", "the document has no name", `add a top-level "name`},
		{"no steps", "name: v\n", 1, 1, "steps", "the document has no steps", `add a mapping "steps"`},
		{"empty steps", "name: v\nsteps: {}\n", 2, 8, "steps", "the document has no steps", "add at least one step"},
		{"version", "name: v\nversion: one\nsteps: {a: {action: echo, done: true}}\n", 2, 10, "version", "expected an integer, found a string", "write a whole number"},
		{"scope", "name: v\nbusiness_key: {name: k, scope: never}\nsteps: {a: {action: echo, done: true}}\n", 2, 32, "business_key.scope", `unknown scope "never"`, `use "active", "forever" or "none"`},
		{"unknown step key", "name: v\nsteps:\n  a:\n    action: echo\n    nxt: b\n    done: true\n", 5, 5, "steps.a.nxt", `unknown key "nxt"`, "use one of: description, action"},
		{"two transitions", "name: v\nsteps:\n  a:\n    action: echo\n    next: b\n    done: true\n  b: {action: echo, done: true}\n", 3, 3, "steps.a", "the step has next and done", "keep one of them"},
		{"no transition", "name: v\nsteps:\n  a:\n    action: echo\n", 3, 3, "steps.a", "the step has no transition", "add next: <step>"},
		{"no action", "name: v\nsteps:\n  a:\n    done: true\n", 3, 3, "steps.a.action", "the step calls no action", "add action:"},
		{"wait with action", "name: v\nsteps:\n  a:\n    action: echo\n    wait: true\n    done: true\n", 4, 13, "steps.a.action", "a waiting step calls no action", "move the action"},
		{"args without action", "name: v\nsteps:\n  a:\n    wait: true\n    args: {x: 1}\n    done: true\n", 5, 5, "steps.a.args", "arguments without an action", "add an action"},
		{"done not true", "name: v\nsteps:\n  a: {action: echo, done: false}\n", 3, 27, "steps.a.done", "expected true", "write done: true"},
		{"duration", "name: v\nsteps:\n  a: {action: echo, timeout: soon, done: true}\n", 3, 30, "steps.a.timeout", `"soon" is not a duration`, `write a non-negative Go duration`},
		{"zero timeout", "name: v\nsteps:\n  a: {action: echo, timeout: 0s, done: true}\n", 3, 30, "steps.a.timeout", "the timeout is zero", "write a positive duration"},
		{"concurrency key", "name: v\nconcurrency_key: tenant\nsteps: {a: {action: echo, done: true}}\n", 2, 18, "concurrency_key", `"tenant" is not a template of an input path`, `write one input path as a template, such as "{{input.tenant}}"`},
		{"retry key", "name: v\ndefaults: {retry: {attempts: 3}}\nsteps: {a: {action: echo, done: true}}\n", 2, 20, "defaults.retry.attempts", `unknown key "attempts"`, "use one of: max_attempts"},
		{"else not last", "name: v\nsteps:\n  a:\n    action: echo\n    branch:\n      - else: b\n      - if: result\n        then: b\n  b: {action: echo, done: true}\n", 6, 9, "steps.a.branch[0].else", "cases after else never match", "move the else case to the end"},
		{"case without then", "name: v\nsteps:\n  a:\n    action: echo\n    branch:\n      - if: result\n  b: {action: echo, done: true}\n", 6, 9, "steps.a.branch[0].then", "the case has no target", "add then: <step>"},
		{"wait event timeout", "name: v\nsteps:\n  a:\n    wait: {events: [ok, timeout]}\n    done: true\n", 4, 25, "steps.a.wait.events[1]", `the event "timeout" is reserved`, "route it with on: {timeout"},
		{"unknown start", "name: v\nstart: b\nsteps: {a: {action: echo, done: true}}\n", 2, 8, "start", `unknown step "b"`, "name one of the steps: a"},
		{"unknown target", "name: v\nsteps:\n  a:\n    action: echo\n    next: sumarize\n  summarize: {action: echo, done: true}\n", 5, 11, "steps.a.next", `unknown step "sumarize"`, "name one of the steps (a, summarize) or done"},
		{"unknown branch target", "name: v\nsteps:\n  a:\n    action: echo\n    branch:\n      - if: result\n        then: x\n      - else: done\n", 7, 15, "steps.a.branch[0].then", `unknown step "x"`, "name one of the steps"},
		{"unrouted event", "name: v\nsteps:\n  a:\n    action: echo\n    done: true\n    on: {approved: done}\n", 6, 10, "steps.a.on.approved", `never emits the event "approved"`, "route one of the step's events: failed, ok"},
		{"ok routed twice", "name: v\nsteps:\n  a:\n    action: echo\n    done: true\n    on: {ok: done}\n", 6, 10, "steps.a.on.ok", `"ok" is routed twice`, "either with next"},
		{"wait events and next", "name: v\nsteps:\n  a:\n    wait: {events: [yes, no]}\n    next: b\n  b: {action: echo, done: true}\n", 5, 11, "steps.a", "routes nothing", "on: {<event>: <step>}"},
		{"timeout not routed", "name: v\nsteps:\n  a:\n    wait: {timeout: 1h}\n    done: true\n", 3, 3, "steps.a.on", `nothing routes its event "timeout"`, "add on: {timeout:"},
		{"unknown action", "name: v\nsteps:\n  a: {action: serch, done: true}\n", 3, 15, "steps.a.action", `unknown action "serch"`, "use one of: echo, fail"},
		{"unknown argument", "name: v\nsteps:\n  a:\n    action: search\n    args: {query: x, limt: 3}\n    done: true\n", 5, 22, "steps.a.args.limt", `action "search" takes no argument "limt"`, "pass only the action's arguments: limit, query"},
		{"argument type", "name: v\nsteps:\n  a:\n    action: search\n    args: {query: x, limit: many}\n    done: true\n", 5, 29, "steps.a.args.limit", `does not accept "many" for "limit"`, "pass a value of the argument's type"},
		{"template syntax", "name: v\nsteps:\n  a:\n    action: echo\n    args: {q: \"{{input.topic\"}\n    done: true\n", 5, 15, "steps.a.args.q", "opening {{ without a closing }}", "write {{input.<field>}}"},
		{"template root", "name: v\nsteps:\n  a:\n    action: echo\n    args: {q: \"{{inptu.topic}}\"}\n    done: true\n", 5, 15, "steps.a.args.q", "a reference starts with input, steps, run, item or secret", "write {{input.<field>}}"},
		{"template run field", "name: v\nsteps:\n  a:\n    action: echo\n    args: {q: \"{{run.user}}\"}\n    done: true\n", 5, 15, "steps.a.args.q", `run has no field "user"`, "write {{input.<field>}}"},
		{"template unknown step", "name: v\nsteps:\n  a:\n    action: echo\n    args: {q: \"{{steps.serch.output}}\"}\n    done: true\n", 5, 15, "steps.a.args.q", `reads unknown step "serch"`, "name one of the steps: a"},
		{"template not ancestor", "name: v\nsteps:\n  a:\n    action: echo\n    args: {q: \"{{steps.b.output.x}}\"}\n    next: b\n  b: {action: echo, done: true}\n", 5, 15, "steps.a.args.q", `which does not lead to step "a"`, `read a step that runs before "a"`},
		{"item outside map", "name: v\nsteps:\n  a:\n    action: echo\n    args: {q: \"{{item}}\"}\n    done: true\n", 5, 15, "steps.a.args.q", "item exists only in map steps", "use item only in a step with map"},
		{"condition syntax", "name: v\nsteps:\n  a:\n    action: echo\n    branch:\n      - if: result ==\n        then: done\n", 6, 13, "steps.a.branch[0].if", `the condition "result ==" does not compile`, "write a CEL expression"},
		{"condition variable", "name: v\nsteps:\n  a:\n    action: echo\n    branch:\n      - if: reslt == true\n        then: done\n", 6, 13, "steps.a.branch[0].if", "undeclared reference to 'reslt'", "write a CEL expression"},
		{"condition type", "name: v\nsteps:\n  a:\n    action: echo\n    branch:\n      - if: 1 + 2\n        then: done\n", 6, 13, "steps.a.branch[0].if", "not a boolean", "that gives a boolean"},
		{"condition step", "name: v\nsteps:\n  a:\n    action: echo\n    branch:\n      - if: steps.z.output == 1\n        then: done\n", 6, 13, "steps.a.branch[0].if", `reads unknown step "z"`, "name one of the steps"},
		{"map expression", "name: v\nsteps:\n  a:\n    map: input.items[0]\n    action: echo\n    done: true\n", 4, 10, "steps.a.map", "is not an array expression", "write input, input.<field>"},
		{"map branch", "name: v\nsteps:\n  a:\n    map: input\n    action: echo\n    branch:\n      - else: done\n", 7, 7, "steps.a.branch", "a map step cannot branch", "branch in a step after the map step"},
		{"cycle", "name: v\nsteps:\n  a: {action: echo, next: b}\n  b: {action: echo, next: c}\n  c: {action: echo, next: b}\n", 4, 3, "steps.b", "cycle", "break the cycle"},
		{"unreachable", "name: v\nsteps:\n  a: {action: echo, done: true}\n  b: {action: echo, done: true}\n", 4, 3, "steps.b", "unreachable", "route a transition to the step"},
		{"approval unknown key", "name: v\nsteps:\n  a:\n    approval: {asignees: {users: [ann]}}\n    on: {approved: done, rejected: done}\n", 4, 16, "steps.a.approval.asignees", `unknown key "asignees"`, "use one of: prompt, assignees, deadline"},
		{"approval assignee key", "name: v\nsteps:\n  a:\n    approval: {assignees: {people: [ann]}}\n    on: {approved: done, rejected: done}\n", 4, 28, "steps.a.approval.assignees.people", `unknown key "people"`, "use one of: users, groups"},
		{"approval no assignees", "name: v\nsteps:\n  a:\n    approval: {assignees: {users: []}}\n    on: {approved: done, rejected: done}\n", 4, 27, "steps.a.approval.assignees", "the gate has no assignees", "name at least one user"},
		{"approval users not a list", "name: v\nsteps:\n  a:\n    approval: {assignees: {users: ann}}\n    on: {approved: done, rejected: done}\n", 4, 35, "steps.a.approval.assignees.users", "expected a list, found a string", "write a list of names"},
		{"approval user twice", "name: v\nsteps:\n  a:\n    approval: {assignees: {users: [ann, ann]}}\n    on: {approved: done, rejected: done}\n", 4, 41, "steps.a.approval.assignees.users[1]", `"ann" is named twice`, "remove the repeated name"},
		{"approval deadline", "name: v\nsteps:\n  a:\n    approval: {deadline: tomorrow}\n    on: {approved: done, rejected: done}\n", 4, 26, "steps.a.approval.deadline", `"tomorrow" is not a duration`, "write a non-negative Go duration"},
		{"approval zero deadline", "name: v\nsteps:\n  a:\n    approval: {deadline: 0s}\n    on: {approved: done, rejected: done}\n", 4, 26, "steps.a.approval.deadline", "the deadline is zero", "write a positive duration"},
		{"approval and wait", "name: v\nsteps:\n  a:\n    wait: true\n    approval: true\n    on: {ok: done}\n", 5, 5, "steps.a.approval", "the step has wait and approval", "keep one of them"},
		{"approval with action", "name: v\nsteps:\n  a:\n    action: echo\n    approval: true\n    on: {approved: done, rejected: done}\n", 4, 13, "steps.a.action", "a waiting step calls no action", "move the action"},
		{"approval with next", "name: v\nsteps:\n  a:\n    approval: true\n    next: b\n  b: {action: echo, done: true}\n", 5, 11, "steps.a", "an approval gate leaves by its events, not by next", "route the gate's events with on: {approved"},
		{"approval not routed", "name: v\nsteps:\n  a:\n    approval: true\n    on: {approved: done}\n", 3, 3, "steps.a.on", `the approval gate does not route its event "rejected"`, "add on: {rejected: <step or done>}"},
		{"approval expired not routed", "name: v\nsteps:\n  a:\n    approval: {deadline: 1h}\n    on: {approved: done, rejected: done}\n", 4, 15, "steps.a.on", `nothing routes its event "expired"`, "add on: {expired: <step or done>}"},
		{"approval expired without deadline", "name: v\nsteps:\n  a:\n    approval: true\n    on: {approved: done, rejected: done, expired: done}\n", 5, 42, "steps.a.on.expired", `never emits the event "expired"`, "route one of the step's events: failed, approved, rejected"},
		{"approval timeout event", "name: v\nsteps:\n  a:\n    approval: {deadline: 1h}\n    on: {approved: done, rejected: done, expired: done, timeout: done}\n", 5, 57, "steps.a.on.timeout", `never emits the event "timeout"`, "route one of the step's events: failed, approved, rejected, expired"},
		{"approval metadata key", "name: v\nmetadata: {flowdoc.approvals: x}\nsteps:\n  a: {approval: true, on: {approved: done, rejected: done}}\n", 2, 11, "metadata.flowdoc.approvals", `the metadata key "flowdoc.approvals" is reserved`, "rename the key"},
		{"step name", "name: v\nsteps:\n  a: {action: echo, next: \"b c\"}\n  \"b c\": {action: echo, done: true}\n", 4, 3, "steps.b c", "not valid", "use letters, digits"},
	}
	reg := tools(t)
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			_, err := flowdoc.Load("v.yaml", []byte(tc.doc), reg)
			errs := flowdoc.Errors(err)
			if len(errs) == 0 {
				t.Fatalf("no *Error: %v", err)
			}
			var e *flowdoc.Error
			for _, x := range errs {
				if x.Path == tc.path {
					e = x
					break
				}
			}
			if e == nil {
				t.Fatalf("no error at path %q: %v", tc.path, err)
			}
			if e.Doc != "v.yaml" || e.Line != tc.line || e.Column != tc.col {
				t.Errorf("at %s:%d:%d, want v.yaml:%d:%d (%v)", e.Doc, e.Line, e.Column, tc.line, tc.col, e)
			}
			if !strings.Contains(e.Message, tc.msg) {
				t.Errorf("message %q lacks %q", e.Message, tc.msg)
			}
			if !strings.Contains(e.Fix, tc.fix) {
				t.Errorf("fix %q lacks %q", e.Fix, tc.fix)
			}
			s := e.Error()
			if !strings.HasPrefix(s, "v.yaml:") || !strings.Contains(s, tc.path) || !strings.Contains(s, "fix: ") {
				t.Errorf("Error() %q lacks position, path or fix", s)
			}
		})
	}
}

func TestAllErrorsAtOnce(t *testing.T) {
	doc := "name: v\nsteps:\n  a:\n    action: nope\n    next: b\n  b:\n    action: echo\n    args: {q: \"{{steps.zz.output}}\"}\n    nxt: c\n    done: true\n"
	_, err := flowdoc.Load("v.yaml", []byte(doc), tools(t))
	errs := flowdoc.Errors(err)
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Path)
	}
	if strings.Join(paths, " ") != "steps.a.action steps.b.args.q steps.b.nxt" {
		t.Errorf("paths %v, want every problem: %v", paths, err)
	}
	if len(errs) < 2 {
		t.Errorf("got %d errors, want them all", len(errs))
	}
}

func TestDocumentSizeLimit(t *testing.T) {
	big := "name: v\n# " + strings.Repeat("x", flowdoc.MaxDocumentSize) + "\n"
	_, err := flowdoc.Parse("big.yaml", []byte(big))
	if err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("oversized document: %v", err)
	}
}

// JSON, tab-indented as editors write it, reads with positions too.
func TestJSONPositions(t *testing.T) {
	doc := "{\n\t\"name\": \"v\",\n\t\"steps\": {\n\t\t\"a\": {\"action\": \"nope\", \"done\": true}\n\t}\n}\n"
	_, err := flowdoc.Load("v.json", []byte(doc), tools(t))
	errs := flowdoc.Errors(err)
	if len(errs) != 1 || errs[0].Line != 4 || errs[0].Column != 19 || errs[0].Path != "steps.a.action" {
		t.Errorf("errors %v, want one at v.json:4:19 steps.a.action", err)
	}
}
