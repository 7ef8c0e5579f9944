package flowdoc

import (
	"slices"
	"testing"
)

// route sets the events a step emits, and allowedEvents the ones its on
// routes may name, for each kind of step.
func TestRouteEventsAndAllowedEvents(t *testing.T) {
	cases := []struct {
		name, step      string
		events, allowed []string
	}{
		{"action", "{action: echo, done: true}", nil, []string{"failed", "ok"}},
		{"branch with else", "{action: echo, branch: [{if: result == 1, then: done}, {else: done}]}", []string{"branch-0", "else"}, []string{"failed", "branch-0", "else"}},
		{"wait", "{wait: true, done: true}", []string{"ok"}, []string{"failed", "ok"}},
		{"wait with events and timeout", "{wait: {events: [paid, void], timeout: 1h}, on: {paid: done, void: done, timeout: done}}", []string{"paid", "void"}, []string{"failed", "paid", "void", "timeout"}},
		{"approval with deadline", "{approval: {deadline: 1h}, on: {approved: done, rejected: done, expired: done}}", []string{"approved", "rejected"}, []string{"failed", "approved", "rejected", "expired"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, c := parse("t.yaml", []byte("name: t\nsteps:\n  a: "+tc.step+"\n"))
			if d == nil || len(c.list) > 0 {
				t.Fatalf("parse: %v", c.err())
			}
			k := newCompiler(d, NewRegistry(), c)
			s := d.byName["a"]
			k.route(s)
			if err := c.err(); err != nil {
				t.Fatalf("route: %v", err)
			}
			if got := k.rts["a"].events; !slices.Equal(got, tc.events) {
				t.Errorf("events = %q, want %q", got, tc.events)
			}
			if got := allowedEvents(s, k.rts["a"].events); !slices.Equal(got, tc.allowed) {
				t.Errorf("allowedEvents = %q, want %q", got, tc.allowed)
			}
		})
	}
}
