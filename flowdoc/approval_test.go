package flowdoc_test

import (
	"slices"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// An approval compiles to a waiting step declaring approved and rejected,
// whose deadline is the wait's timeout routed as expired, and its gate is
// recorded in the flow's metadata for the client.
func TestApprovalCompiles(t *testing.T) {
	doc := "name: gate\nsteps:\n  ask:\n    approval:\n      prompt: Write it?\n      assignees: {users: [ann], groups: [admins]}\n      deadline: 24h\n    on: {approved: write, rejected: done, expired: escalate}\n  write: {action: echo, done: true}\n  escalate: {action: echo, done: true}\n"
	f, err := flowdoc.Load("gate.yaml", []byte(doc), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	spec, ok := f.Step("ask")
	if !ok {
		t.Fatal("no step ask")
	}
	if !slices.Equal(spec.Events, []string{flowdoc.EventApproved, flowdoc.EventRejected, flow.EventTimeout}) || !spec.Waits || spec.WaitTimeout != 24*time.Hour {
		t.Errorf("step ask: events %v, wait timeout %v", spec.Events, spec.WaitTimeout)
	}
	routes := map[string][]string{}
	for _, e := range f.Edges() {
		if e.From == "ask" {
			routes[e.Event] = append(routes[e.Event], e.To)
		}
	}
	if !slices.Equal(routes[flowdoc.EventApproved], []string{"write"}) || !slices.Equal(routes[flowdoc.EventRejected], []string{flow.Done}) || !slices.Equal(routes[flow.EventTimeout], []string{"escalate"}) || len(routes) != 3 {
		t.Errorf("routes of ask: %v", routes)
	}
	gates, err := flowdoc.Gates(f)
	if err != nil {
		t.Fatal(err)
	}
	g := gates["ask"]
	if len(gates) != 1 || g == nil || g.Prompt != "Write it?" || !slices.Equal(g.Users, []string{"ann"}) || !slices.Equal(g.Groups, []string{"admins"}) || g.Deadline != 24*time.Hour {
		t.Fatalf("gates %+v", gates)
	}
	for _, c := range []struct {
		actor  string
		groups []string
		ok     bool
	}{{"ann", nil, true}, {"bob", nil, false}, {"bob", []string{"ops", "admins"}, true}, {"bob", []string{"ops"}, false}, {"", nil, false}} {
		if got := g.Allows(c.actor, c.groups); got != c.ok {
			t.Errorf("Allows(%q, %v) = %v, want %v", c.actor, c.groups, got, c.ok)
		}
	}
	open := &flowdoc.Gate{Step: "x"}
	if !open.Allows("anyone", nil) {
		t.Error("a gate without assignees refuses an actor")
	}
	// A flow without gates has none.
	plain, err := flowdoc.Load("plain.yaml", []byte("name: plain\nsteps:\n  a: {action: echo, done: true}\n"), tools(t))
	if err != nil {
		t.Fatal(err)
	}
	if gates, err := flowdoc.Gates(plain); gates != nil || err != nil {
		t.Errorf("Gates of a flow without gates: %v, %v", gates, err)
	}
}
