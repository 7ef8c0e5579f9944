package flowdoc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzParse: any text parses or gives *Errors, and never panics; a
// document that parses compiles or gives *Errors.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"name: v\nsteps:\n  a: {action: echo, done: true}\n",
		`{"name": "v", "steps": {"a": {"action": "echo", "args": {"x": "{{input.x}}"}, "branch": [{"if": "result == true", "then": "done"}, {"else": "done"}]}}}`,
		"name: v\nsteps:\n  a:\n    wait: {events: [yes], timeout: 1h}\n    on: {yes: b, timeout: done}\n  b: {map: input.items, action: echo, args: {i: \"{{item}}\"}, done: true}\n",
		"name: v\nsteps:\n  a:\n    approval: {prompt: p, assignees: {users: [ann], groups: [g]}, deadline: 1h}\n    on: {approved: b, rejected: done, expired: done}\n  b: {action: echo, done: true}\n",
		"name: v\nx: &a 1\ny: *a\n", "- a\n", "", "{", "name: [", "steps: !!binary aGk=",
	} {
		f.Add([]byte(s))
	}
	reg := NewRegistry()
	_ = RegisterAction(reg, "echo", func(ctx context.Context, c ActionCall, in json.RawMessage) (json.RawMessage, error) { return in, nil })
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse("fuzz.yaml", data)
		if err != nil {
			if len(Errors(err)) == 0 {
				t.Fatalf("error without position: %v", err)
			}
			return
		}
		if _, err := Compile(d, reg); err != nil && len(Errors(err)) == 0 {
			t.Fatalf("compile error without position: %v", err)
		}
	})
}

// FuzzTemplate: any string parses as a template or gives an error, and a
// parsed template renders or gives an error, without panicking.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"{{input.topic}}", "a {{steps.s.output.id}} b", "{{run.created_by}}", "{{item.0.x}}", "{{", "}}", "{{}}", "{{ input }}x{{input.a.b}}"} {
		f.Add(s)
	}
	sc := &scope{step: "s", input: map[string]any{"topic": "t", "a": []any{1.0, "x"}}, steps: map[string]any{"s": map[string]any{"id": 1.0}}, run: map[string]any{"created_by": "u"}, item: []any{map[string]any{"x": true}}, isMap: true}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := parseTemplate(s)
		if err != nil || tpl == nil {
			return
		}
		v, err := tpl.render(sc)
		if err == nil && !tpl.whole {
			if _, ok := v.(string); !ok {
				t.Fatalf("an interpolated template gave %T", v)
			}
		}
		if err == nil && !strings.Contains(s, "{{") {
			t.Fatalf("rendered %q without a reference", s)
		}
	})
}

// FuzzCondition: any text compiles as a condition or gives an error, and
// a compiled condition evaluates or gives an error, within its cost limit.
func FuzzCondition(f *testing.F) {
	for _, s := range []string{"result == true", "result != nil", "result == x", `result.n > 3 && input.v.startsWith("a")`, "steps.a.output.x == 1", "[1,2,3].map(x, [x, x]).size() > 0", "(", "1 + 2"} {
		f.Add(s)
	}
	sc := &scope{step: "s", input: map[string]any{"v": "abc"}, steps: map[string]any{"a": map[string]any{"x": 1.0}}, run: map[string]any{"id": "r"}}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := compileCondition(s)
		if err != nil {
			return
		}
		_, _ = c.eval(sc, map[string]any{"n": 4.0})
	})
}
