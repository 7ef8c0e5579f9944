package flowdoc

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The schema lists exactly the keys the parser accepts.
func TestSchemaMatchesParser(t *testing.T) {
	var s struct {
		ID         string                     `json:"$id"`
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(Schema, &s); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	if s.ID != SchemaID {
		t.Errorf("$id %q, want %q", s.ID, SchemaID)
	}
	same := func(what string, props map[string]json.RawMessage, keys []string) {
		t.Helper()
		var got []string
		for k := range props {
			got = append(got, k)
		}
		slices.Sort(got)
		want := slices.Clone(keys)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the schema has %v, the parser %v", what, got, want)
		}
	}
	same("document", s.Properties, docKeys)
	var on struct {
		Items struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"items"`
	}
	if err := json.Unmarshal(s.Properties["on"], &on); err != nil {
		t.Fatal(err)
	}
	same("on", on.Items.Properties, onKeys)
	same("step", s.Defs["step"].Properties, stepKeys)
	same("options", s.Defs["options"].Properties, optKeys)
	same("retry", s.Defs["retry"].Properties, retryKeys)
	var step struct {
		Properties struct {
			Approval struct {
				OneOf []struct {
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"oneOf"`
			} `json:"approval"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(mustDef(t, "step"), &step); err != nil || len(step.Properties.Approval.OneOf) != 2 {
		t.Fatalf("the schema's approval is not {const: true} or an object: %v", err)
	}
	gate := step.Properties.Approval.OneOf[1].Properties
	same("approval", gate, approvalKeys)
	var as struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(gate["assignees"], &as); err != nil {
		t.Fatal(err)
	}
	same("approval.assignees", as.Properties, assigneeKeys)
}

func mustDef(t *testing.T, name string) json.RawMessage {
	t.Helper()
	var s struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(Schema, &s); err != nil || s.Defs[name] == nil {
		t.Fatalf("the schema has no $defs.%s: %v", name, err)
	}
	return s.Defs[name]
}

// Documents the compiler accepts pass the schema, and the schema refuses
// what it can see is wrong.
func TestSchemaValidatesDocuments(t *testing.T) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	research, err := os.ReadFile("../examples/documents/research.yaml")
	if err != nil {
		t.Fatal(err)
	}
	instance := func(t *testing.T, text string) any {
		t.Helper()
		var y yaml.Node
		if err := yaml.Unmarshal([]byte(text), &y); err != nil {
			t.Fatal(err)
		}
		n, err := fromYAML(&y, 0)
		if err != nil {
			t.Fatal(err)
		}
		v, err := n.toAny()
		if err != nil {
			t.Fatal(err)
		}
		j, _ := json.Marshal(v)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	valid := []string{
		string(research),
		"$schema: " + SchemaID + "\nname: v\nversion: 2\nbusiness_key: k\ntags: [a]\nmetadata: {x: 1}\ndefaults: {timeout: 1m30s, retry: {max_attempts: 2, jitter: -1}}\nsteps:\n  a:\n    action: x\n    args: {q: \"{{input.q}}\"}\n    parallel: [b, c]\n  b: {action: x, join: d, on: {failed: done}}\n  c: {map: input.items, action: x, join: d}\n  d:\n    wait: {events: [approved], timeout: 1h}\n    on: {approved: e, timeout: done}\n  e:\n    action: x\n    branch:\n      - if: result == true\n        then: [done]\n      - else: done\n",
		"name: v\nbusiness_key: {name: k, scope: forever}\nsteps:\n  a: {wait: true, next: done, queue: q, priority: -1}\n",
		"name: v\nsteps:\n  a:\n    approval: {prompt: \"Write it?\", assignees: {users: [ann], groups: [admins]}, deadline: 24h}\n    on: {approved: b, rejected: done, expired: done}\n  b: {action: x, done: true}\n",
		"name: v\nsteps:\n  a: {approval: true, on: {approved: done, rejected: done}}\n",
		"name: v\non:\n  - event: order.paid\n    filter: event.data.amount > 100\n    input: '{\"order\": event.data.order}'\n  - {event: order.paid, name: all}\nsteps: {a: {action: x, done: true}}\n",
	}
	for i, text := range valid {
		if _, c := parse("v.yaml", []byte(text)); len(c.list) > 0 {
			t.Errorf("valid document %d does not parse: %v", i, c.err())
		}
		if err := sch.Validate(instance(t, text)); err != nil {
			t.Errorf("valid document %d fails the schema: %v", i, err)
		}
	}
	invalid := []string{
		"name: v\nsteps:\n  a: {action: x, nxt: b}\n",
		"name: v\nsteps:\n  a: {action: x, done: false}\n",
		"name: v\nsteps:\n  a: {action: x, timeout: soon, done: true}\n",
		"name: v\nsteps:\n  a: {action: x, branch: [{else: done, if: x}]}\n",
		"name: v\nbusiness_key: {name: k, scope: never}\nsteps: {a: {action: x, done: true}}\n",
		"steps: {a: {action: x, done: true}}\n",
		"name: v\nsteps:\n  a: {approval: {asignees: {users: [ann]}}, on: {approved: done, rejected: done}}\n",
		"name: v\nsteps:\n  a: {approval: {assignees: {people: [ann]}}, on: {approved: done, rejected: done}}\n",
		"name: v\nsteps:\n  a: {approval: {assignees: {}}, on: {approved: done, rejected: done}}\n",
		"name: v\nsteps:\n  a: {approval: {deadline: tomorrow}, on: {approved: done, rejected: done}}\n",
		"name: v\non: [{filter: \"true\"}]\nsteps: {a: {action: x, done: true}}\n",
		"name: v\non: [{event: x, when: now}]\nsteps: {a: {action: x, done: true}}\n",
		"name: v\non: [{event: x, input: {order: 1}}]\nsteps: {a: {action: x, done: true}}\n",
		"name: v\non: {event: x}\nsteps: {a: {action: x, done: true}}\n",
	}
	for i, text := range invalid {
		if err := sch.Validate(instance(t, text)); err == nil {
			t.Errorf("invalid document %d passes the schema", i)
		}
	}
}
