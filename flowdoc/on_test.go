package flowdoc_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flowdoc"
)

const triggeredDoc = `name: orders
on:
  - event: order.paid
    filter: event.data.amount > 100
    input: '{"order": event.data.order}'
  - {event: order.paid, name: all-paid, business_key: event.data.order, concurrency_key: '"c-" + event.data.customer'}
  - event: order.refunded
    filter: event.data.full
  - {event: cart.changed, key: event.data.cart, debounce: 30s}
  - {event: page.viewed, name: views, throttle: {limit: 10, period: 1m}}
  - event: comment.added
    key: event.data.thread
    batch: {size: 50, window: 5m}
steps:
  a: {action: echo, done: true}
`

func TestDocumentTriggers(t *testing.T) {
	d, err := flowdoc.Parse("orders.yaml", []byte(triggeredDoc))
	if err != nil {
		t.Fatal(err)
	}
	want := []flowdoc.Trigger{
		{Name: "order.paid", Event: "order.paid", Filter: "event.data.amount > 100", Input: `{"order": event.data.order}`},
		{Name: "all-paid", Event: "order.paid", BusinessKey: "event.data.order", ConcurrencyKey: `"c-" + event.data.customer`},
		{Name: "order.refunded", Event: "order.refunded", Filter: "event.data.full"}, // dyn: accepted, checked per event
		{Name: "cart.changed", Event: "cart.changed", Key: "event.data.cart", Debounce: 30 * time.Second},
		{Name: "views", Event: "page.viewed", ThrottleLimit: 10, ThrottlePeriod: time.Minute},
		{Name: "comment.added", Event: "comment.added", Key: "event.data.thread", BatchSize: 50, BatchWindow: 5 * time.Minute},
	}
	got := d.Triggers()
	if len(got) != len(want) {
		t.Fatalf("triggers = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("trigger %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if n := flowdoc.TriggerName("orders", got[1].Name); n != "orders:on:all-paid" || !strings.HasPrefix(n, flowdoc.TriggerPrefix("orders")) {
		t.Errorf("TriggerName = %q", n)
	}
	if d, err := flowdoc.Parse("v.yaml", []byte("name: v\nsteps: {a: {action: echo, done: true}}\n")); err != nil || len(d.Triggers()) != 0 {
		t.Errorf("a document without on: %v, %v", d, err)
	}
}

// Each error names the line and the field at fault.
func TestDocumentTriggerErrors(t *testing.T) {
	head := "name: v\nsteps: {a: {action: echo, done: true}}\non:\n"
	long := strings.Repeat("e", 197)
	cases := []struct {
		name, on  string
		line      int
		path, msg string
	}{
		{"not a list", "  event: x\n", 4, "on", "expected a list, found a mapping"},
		{"not a mapping", "  - order.paid\n", 4, "on[0]", "expected a mapping, found a string"},
		{"no event", "  - {filter: 'true'}\n", 4, "on[0].event", "the trigger has no event"},
		{"event not a string", "  - {event: [a]}\n", 4, "on[0].event", "expected a string, found a list"},
		{"event control char", "  - {event: \"a\\tb\"}\n", 4, "on[0].event", "holds a control character"},
		{"unknown key", "  - {event: x, when: now}\n", 4, "on[0].when", `unknown key "when"`},
		{"filter syntax", "  - event: x\n    filter: event.data.n >\n", 5, "on[0].filter", "Syntax error"},
		{"filter unknown var", "  - event: x\n    filter: evnt.data.n > 1\n", 5, "on[0].filter", "undeclared reference to 'evnt'"},
		{"filter not boolean", "  - event: x\n    filter: 1 + 2\n", 5, "on[0].filter", "the filter gives int, not a boolean"},
		{"filter not a string", "  - event: x\n    filter: true\n", 5, "on[0].filter", "expected a CEL expression as a string, found a boolean"},
		{"input syntax", "  - event: x\n    input: '{'\n", 5, "on[0].input", "Syntax error"},
		{"input a mapping", "  - event: x\n    input: {order: 1}\n", 5, "on[0].input", "expected a CEL expression as a string, found a mapping"},
		{"business key syntax", "  - event: x\n    business_key: 'event.data.'\n", 5, "on[0].business_key", "Syntax error"},
		{"concurrency key a number", "  - event: x\n    concurrency_key: 12\n", 5, "on[0].concurrency_key", "expected a CEL expression as a string"},
		{"same event twice", "  - {event: x}\n  - {event: x, filter: 'true'}\n", 5, "on[1].event", `trigger "x" is declared twice`},
		{"same name twice", "  - {event: x, name: n}\n  - {event: y, name: n}\n", 5, "on[1].name", `trigger "n" is declared twice`},
		{"name like an event", "  - {event: x}\n  - {event: y, name: x}\n", 5, "on[1].name", `trigger "x" is declared twice`},
		{"empty name", "  - {event: x, name: ''}\n", 4, "on[0].name", "expected a string"},
		{"name too long", "  - {event: x, name: " + long + "}\n", 4, "on[0].name", "more than the limit of 200"},
		{"key syntax", "  - {event: x, debounce: 1s, key: 'event.data.'}\n", 4, "on[0].key", "Syntax error"},
		{"key alone", "  - event: x\n    key: event.data.k\n", 5, "on[0].key", "key is set without debounce"},
		{"debounce not a duration", "  - event: x\n    debounce: soon\n", 5, "on[0].debounce", `"soon" is not a duration`},
		{"throttle not a mapping", "  - event: x\n    throttle: 10\n", 5, "on[0].throttle", "expected a mapping"},
		{"throttle without period", "  - event: x\n    throttle: {limit: 2}\n", 5, "on[0].throttle.period", "the throttle has no period"},
		{"throttle unknown key", "  - event: x\n    throttle: {limit: 2, period: 1m, burst: 3}\n", 5, "on[0].throttle.burst", `unknown key "burst"`},
		{"batch too big", "  - event: x\n    batch: {size: 5000, window: 1m}\n", 5, "on[0].batch", "batch size 5000 must be from 1 to 1000"},
		{"two controls", "  - event: x\n    debounce: 1s\n    batch: {size: 2, window: 1m}\n", 6, "on[0].batch", "at most one of them"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := flowdoc.Parse("v.yaml", []byte(head+c.on))
			var fe *flowdoc.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Parse = %v, want a *flowdoc.Error", err)
			}
			if fe.Line != c.line || fe.Path != c.path || !strings.Contains(fe.Message, c.msg) {
				t.Errorf("error at %d %s: %q; want line %d, path %s, message containing %q", fe.Line, fe.Path, fe.Message, c.line, c.path, c.msg)
			}
		})
	}
	// Every error at once, each at its own field.
	_, err := flowdoc.Parse("v.yaml", []byte(head+"  - {filter: '1', input: '{'}\n  - {event: x, filter: 'x >'}\n"))
	var paths []string
	for _, e := range flowdoc.Errors(err) {
		paths = append(paths, e.Path)
	}
	if strings.Join(paths, " ") != "on[0].event on[0].filter on[0].input on[1].filter" {
		t.Errorf("errors at %v: %v", paths, err)
	}
}
