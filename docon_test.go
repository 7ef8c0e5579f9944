package hephaestus_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/store"
)

// Versions of document "orders": v1 starts on order.paid (filtered and
// mapped) and on order.refunded; v2 drops order.paid; v3 drops "on".
const (
	ordersV1 = `name: orders
on:
  - event: order.paid
    filter: event.data.amount > 100
    input: '{"order": event.data.order, "via": event.name}'
  - event: order.refunded
    name: refunds
steps:
  s: {action: noop, done: true}
`
	ordersV2 = `name: orders
on:
  - {event: order.refunded, name: refunds, filter: event.data.full == true}
steps:
  s: {action: noop, done: true}
`
	ordersV3 = `name: orders
steps:
  s: {action: noop, done: true}
`
)

// A stored document's "on" list declares its triggers when documents are
// registered: a matching event starts one run of the document with the
// mapped input, another is skipped; a new version that drops an entry
// deletes its trigger (an event of it then starts nothing), and a
// trigger that is not the document's own stays.
func TestDocumentOnTriggers(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c, err := heph.New(&heph.Config{Store: st, Clock: clock.NewFake(time.Date(2032, 5, 1, 0, 0, 0, 0, time.UTC))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		reg := flowdoc.NewRegistry()
		if err := reg.Register(flowdoc.RemoteAction("noop")); err != nil {
			t.Fatal(err)
		}
		// Not the document's own: declared in code for the document.
		if err := c.DeclareTriggers(ctx, &heph.Trigger{Name: "manual", Event: "order.paid", Target: heph.TargetDocument, TargetName: "orders", Filter: "false"}); err != nil {
			t.Fatal(err)
		}
		docOnPut(t, c, reg, ordersV1)
		paid := flowdoc.TriggerName("orders", "order.paid")
		got := docOnTriggers(t, c)
		if len(got) != 3 || got["manual"] == nil || got["orders:on:refunds"] == nil {
			t.Fatalf("triggers after v1: %v", got)
		}
		want := heph.Trigger{Name: "orders:on:order.paid", Event: "order.paid", Target: heph.TargetDocument, TargetName: "orders",
			Filter: "event.data.amount > 100", Input: `{"order": event.data.order, "via": event.name}`}
		if tr := got[paid]; tr == nil || tr.Trigger != want || !tr.Declared {
			t.Fatalf("trigger %s: %+v, want %+v (declared)", paid, tr, want)
		}

		docOnSend(t, c, "order.paid", "p-big", map[string]any{"order": 7, "amount": 150})
		docOnSend(t, c, "order.paid", "p-small", map[string]any{"order": 8, "amount": 50})
		if n, err := c.DispatchTriggers(ctx); err != nil || n != 4 { // two events, two triggers of order.paid
			t.Fatalf("dispatch: %d, %v", n, err)
		}
		if st := docOnFiring(t, c, "p-small", paid); st.Status != heph.FiringSkipped {
			t.Errorf("the small payment's firing: %+v, want skipped", st)
		}
		f := docOnFiring(t, c, "p-big", paid)
		if f.Status != heph.FiringStarted {
			t.Fatalf("the big payment's firing: %+v, want started", f)
		}
		r, err := c.GetRun(ctx, f.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var in map[string]any
		if err := json.Unmarshal(r.Input, &in); err != nil || len(in) != 2 || in["order"] != 7.0 || in["via"] != "order.paid" {
			t.Errorf("run %s: input %s, want {order: 7, via: order.paid} (%v)", r.ID, r.Input, err)
		}
		if ref, ok := r.Document(); !ok || ref.Name != "orders" || ref.Version != 1 || string(r.Metadata["trigger"]) != `"`+paid+`"` {
			t.Errorf("run %s: document %+v (%v), metadata %v", r.ID, ref, ok, r.Metadata)
		}
		if n := docOnRuns(t, c); n != 1 {
			t.Fatalf("%d runs of orders, want 1", n)
		}

		docOnPut(t, c, reg, ordersV2)
		got = docOnTriggers(t, c)
		if len(got) != 2 || got[paid] != nil || got["manual"] == nil || got["orders:on:refunds"].Filter != "event.data.full == true" {
			t.Fatalf("triggers after v2: %v", got)
		}
		docOnSend(t, c, "order.paid", "p-late", map[string]any{"order": 9, "amount": 500})
		if fs, err := c.EventFirings(ctx, "p-late"); err != nil || len(fs) != 1 || fs[0].Trigger != "manual" {
			t.Fatalf("firings of an order.paid after v2: %+v, %v", fs, err)
		}
		if n, err := c.DispatchTriggers(ctx); err != nil || n != 1 { // manual's, skipped
			t.Fatalf("dispatch after v2: %d, %v", n, err)
		}
		if n := docOnRuns(t, c); n != 1 {
			t.Fatalf("%d runs of orders after v2, want 1", n)
		}

		docOnPut(t, c, reg, ordersV3)
		if got = docOnTriggers(t, c); len(got) != 1 || got["manual"] == nil {
			t.Fatalf("triggers after v3: %v", got)
		}
	})
}

// docOnPut stores a new version of "orders" and registers the
// documents again, as a process does at its start.
func docOnPut(t *testing.T, c *heph.Client, reg *flowdoc.Registry, content string) {
	t.Helper()
	if _, err := c.PutDocument(t.Context(), "orders", heph.DocumentYAML, []byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(t.Context(), reg); err != nil {
		t.Fatal(err)
	}
}

func docOnTriggers(t *testing.T, c *heph.Client) map[string]*heph.StoredTrigger {
	t.Helper()
	ts, err := c.ListTriggers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*heph.StoredTrigger{}
	for _, tr := range ts {
		out[tr.Name] = tr
	}
	return out
}

func docOnSend(t *testing.T, c *heph.Client, name, id string, data any) {
	t.Helper()
	if _, err := c.SendEvent(t.Context(), name, data, &heph.SendEventOptions{ID: id}); err != nil {
		t.Fatal(err)
	}
}

func docOnFiring(t *testing.T, c *heph.Client, event, trigger string) *heph.TriggerFiring {
	t.Helper()
	fs, err := c.EventFirings(t.Context(), event)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(fs, func(f *heph.TriggerFiring) bool { return f.Trigger == trigger })
	if i < 0 {
		t.Fatalf("event %s has no firing of %s: %+v", event, trigger, fs)
	}
	return fs[i]
}

func docOnRuns(t *testing.T, c *heph.Client) int {
	t.Helper()
	l, err := c.ListRuns(t.Context(), &heph.ListOptions{Flow: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Runs)
}
