package triggers

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// evaluate: the filter decides, the input maps (compact JSON), no input
// passes the data through, and an expression that fails at evaluation
// says which and why.
func TestEvaluate(t *testing.T) {
	ev := &store.EventRecord{ID: "e1", Name: "order.paid", Data: json.RawMessage(`{"amount":120,"items":["a","b"],"who":{"id":"c-7"}}`),
		At: time.Date(2032, 1, 2, 3, 4, 5, 0, time.UTC), Seq: 7}
	for _, c := range []struct {
		filter, input string
		want          string // "skip", an error's text, or the input
	}{
		{"event.data.amount > 100", "", `{"amount":120,"items":["a","b"],"who":{"id":"c-7"}}`},
		{"event.data.amount > 200", "", "skip"},
		{"", `{"who": event.data.who.id, "n": size(event.data.items), "seq": event.seq, "id": event.id}`, `{"id":"e1","n":2,"seq":7,"who":"c-7"}`},
		{"event.name == 'order.paid' && int(event.data.amount) % 2 == 0", `int(event.data.amount) + 1`, `121`},
		{"event.at > timestamp('2032-01-01T00:00:00Z')", `"at " + string(event.at)`, `"at 2032-01-02T03:04:05Z"`},
		{"event.data.missing > 1", "", "no such key"},
		{"event.data.who", "", "not a boolean"},
		{"", "event.data.amount + 1", "no such overload"},
	} {
		f, in, err := Compile(&store.Trigger{Name: "t", Event: "order.paid", TargetKind: store.TargetFlow, TargetName: "f", Filter: c.filter, Input: c.input})
		if err != nil {
			t.Fatalf("compile %q / %q: %v", c.filter, c.input, err)
		}
		tr := &compiled{t: &store.Trigger{Filter: c.filter, Input: c.input}, filter: f, input: in}
		out, ok, err := tr.evaluate(ev)
		var got string
		switch {
		case err != nil:
			got = err.Error()
		case !ok:
			got = "skip"
		default:
			got = string(out.Input)
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("filter %q input %q: %s, want %s", c.filter, c.input, got, c.want)
		}
	}
}

// Business and concurrency keys: strings as they are, integral numbers
// without a fraction; anything else, or an empty key, is an error that
// names the expression.
func TestKeys(t *testing.T) {
	ev := &store.EventRecord{ID: "e1", Name: "order.paid", Data: []byte(`{"order": 42, "ratio": 1.5, "tenant": "acme", "ok": true, "none": ""}`)}
	for _, c := range []struct{ bk, ck, want string }{
		{"event.data.order", `"tenant-" + event.data.tenant`, "42 / tenant-acme"},
		{"event.data.ratio", "", "1.5 / "},
		{"event.id + ':' + event.data.tenant", "int(event.data.order)", "e1:acme / 42"},
		{"event.data.ok", "", `business key "event.data.ok" gave true, not a string or a number`},
		{"", "event.data.none", `concurrency key "event.data.none" is empty`},
		{"event.data.nope", "", `business key "event.data.nope": no such key`},
	} {
		tr, err := compile(&store.Trigger{Name: "t", Event: "order.paid", TargetKind: store.TargetFlow, TargetName: "f", BusinessKey: c.bk, ConcurrencyKey: c.ck})
		if err != nil {
			t.Fatalf("compile %q / %q: %v", c.bk, c.ck, err)
		}
		p, ok, err := tr.evaluate(ev)
		got := ""
		if err != nil {
			got = err.Error()
		} else if ok {
			got = p.BusinessKey + " / " + p.ConcurrencyKey
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("keys %q / %q: %s, want %s", c.bk, c.ck, got, c.want)
		}
	}
	if _, _, err := Compile(&store.Trigger{Name: "t", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", BusinessKey: "event.data."}); err == nil || !strings.Contains(err.Error(), `trigger "t": business key`) {
		t.Errorf("a business key that does not compile: %v", err)
	}
}

// Compile refuses what does not compile or check, naming the trigger and
// the expression.
func TestCompileRefuses(t *testing.T) {
	for _, c := range []struct {
		t    store.Trigger
		want string
	}{
		{store.Trigger{Name: "t", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", Filter: "1 +"}, `trigger "t": filter "1 +"`},
		{store.Trigger{Name: "t", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", Filter: "'a'"}, "not a boolean"},
		{store.Trigger{Name: "t", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", Input: "nope.x"}, `input "nope.x"`},
		{store.Trigger{Name: "t", Event: "e", TargetKind: "job2", TargetName: "f"}, `target kind "job2"`},
		{store.Trigger{Name: "", Event: "e", TargetKind: store.TargetFlow, TargetName: "f"}, "trigger name must be"},
		{store.Trigger{Name: "t", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", Filter: strings.Repeat("1 == 1 && ", 500) + "true"}, "at most 4096 bytes"},
	} {
		_, _, err := Compile(&c.t)
		if !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalidInput naming %q", c.t, err, c.want)
		}
	}
}
