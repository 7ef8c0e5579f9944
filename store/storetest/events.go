package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func (h *harness) send(id, name, data string, when time.Time) (*store.EventRecord, bool) {
	h.t.Helper()
	var raw json.RawMessage
	if data != "" {
		raw = json.RawMessage(data)
	}
	e, existed, err := h.s.SendEvent(h.t.Context(), &store.SendEventParams{Event: &store.EventRecord{ID: id, Name: name, Data: raw, At: when}})
	if err != nil {
		h.t.Fatalf("SendEvent %s: %v", id, err)
	}
	return e, existed
}

func (h *harness) eventIDs(p store.ListEventsParams) string {
	h.t.Helper()
	es, err := h.s.ListEvents(h.t.Context(), &p)
	if err != nil {
		h.t.Fatalf("ListEvents %+v: %v", p, err)
	}
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	return strings.Join(ids, ",")
}

// testEvents: a send stores once per id (a re-send returns the first and
// stores nothing), events list newest first under every filter and page
// with the cursor, bad input names what is wrong, and PruneEvents
// deletes the oldest before a time, up to its limit.
func testEvents(t *testing.T, h *harness) {
	ctx := t.Context()
	a, existed := h.send("e1", "order.paid", `{"order":1,"amount":120,"customer":{"id":"c-7"},"vip":true}`, at(0))
	if existed || a.Seq <= 0 || a.ID != "e1" || a.Name != "order.paid" || !a.At.Equal(at(0)) {
		t.Fatalf("first send: %+v existed=%v", a, existed)
	}
	b, existed := h.send("e1", "other", `2`, at(time.Minute))
	if !existed || b.Seq != a.Seq || b.Name != "order.paid" || !strings.Contains(string(b.Data), `"c-7"`) || !b.At.Equal(at(0)) {
		t.Fatalf("re-send: %+v existed=%v", b, existed)
	}
	h.send("e2", "order.paid", `{"order":2,"amount":120.0,"customer":{"id":"c-8"},"vip":false}`, at(time.Minute))
	h.send("e3", "invoice.paid", `{"amount":"120"}`, at(2*time.Minute))
	h.send("e4", "invoice.paid", ``, at(3*time.Minute))
	e5, _ := h.send("e5", "order.paid", `{"order":5,"amount":7}`, at(4*time.Minute))
	got, err := h.s.GetEvent(ctx, "e5")
	if err != nil || got.Seq != e5.Seq || string(got.Data) != `{"order": 5, "amount": 7}` && string(got.Data) != `{"order":5,"amount":7}` {
		t.Errorf("GetEvent e5: %+v, %v", got, err)
	}
	if _, err := h.s.GetEvent(ctx, "none"); !errors.Is(err, store.ErrEventNotFound) {
		t.Errorf("GetEvent none: %v", err)
	}

	for _, c := range []struct {
		p    store.ListEventsParams
		want string
	}{
		{store.ListEventsParams{}, "e5,e4,e3,e2,e1"},
		{store.ListEventsParams{Name: "order.paid"}, "e5,e2,e1"},
		{store.ListEventsParams{After: at(time.Minute), Before: at(3 * time.Minute)}, "e3,e2"},
		{store.ListEventsParams{Limit: 2}, "e5,e4"},
		{store.ListEventsParams{Limit: 2, BeforeSeq: e5.Seq - 1}, "e3,e2"},
		{store.ListEventsParams{Field: "amount", Value: json.RawMessage(`120`)}, "e2,e1"},
		{store.ListEventsParams{Field: "amount", Value: json.RawMessage(`"120"`)}, "e3"},
		{store.ListEventsParams{Field: "customer.id", Value: json.RawMessage(`"c-7"`)}, "e1"},
		{store.ListEventsParams{Field: "vip", Value: json.RawMessage(`false`)}, "e2"},
		{store.ListEventsParams{Field: "vip", Value: json.RawMessage(`true`), Name: "order.paid"}, "e1"},
		{store.ListEventsParams{Field: "order.none", Value: json.RawMessage(`1`)}, ""},
	} {
		if c.p.Field != "" && h.encoded {
			if err := listErr(h, c.p); !errors.Is(err, hephtype.ErrInvalidInput) {
				t.Errorf("ListEvents %+v on encoded payloads: %v, want ErrInvalidInput", c.p, err)
			}
			continue
		}
		if got := h.eventIDs(c.p); got != c.want {
			t.Errorf("ListEvents %+v = %q, want %q", c.p, got, c.want)
		}
	}

	bad := []struct {
		name string
		err  error
	}{
		{"empty name", sendErr(h, &store.EventRecord{ID: "x", At: at(0)})},
		{"long name", sendErr(h, &store.EventRecord{ID: "x", Name: strings.Repeat("n", store.MaxEventNameBytes+1), At: at(0)})},
		{"bad data", sendErr(h, &store.EventRecord{ID: "x", Name: "n", Data: json.RawMessage(`{`), At: at(0)})},
		{"empty id", sendErr(h, &store.EventRecord{Name: "n", At: at(0)})},
		{"bad segment", listErr(h, store.ListEventsParams{Field: "a..b", Value: json.RawMessage(`1`)})},
		{"object value", listErr(h, store.ListEventsParams{Field: "a", Value: json.RawMessage(`{}`)})},
		{"value without field", listErr(h, store.ListEventsParams{Value: json.RawMessage(`1`)})},
	}
	for _, c := range bad {
		if !errors.Is(c.err, hephtype.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", c.name, c.err)
		}
	}
	if got := h.eventIDs(store.ListEventsParams{}); got != "e5,e4,e3,e2,e1" {
		t.Errorf("after the refused sends: %q", got)
	}

	// Prune: the oldest before the cutoff, at most the limit.
	n, err := h.s.PruneEvents(ctx, &store.PruneEventsParams{Before: at(3 * time.Minute), Limit: 2})
	if err != nil || n != 2 {
		t.Fatalf("PruneEvents limit 2: %d, %v", n, err)
	}
	if n, err = h.s.PruneEvents(ctx, &store.PruneEventsParams{Before: at(3 * time.Minute)}); err != nil || n != 1 {
		t.Fatalf("PruneEvents again: %d, %v", n, err)
	}
	if got := h.eventIDs(store.ListEventsParams{}); got != "e5,e4" {
		t.Errorf("after the prune: %q", got)
	}
	// A pruned id may be sent again.
	if _, existed := h.send("e1", "order.paid", ``, at(5*time.Minute)); existed {
		t.Error("e1 after its prune: still there")
	}
}

func sendErr(h *harness, e *store.EventRecord) error {
	_, _, err := h.s.SendEvent(h.t.Context(), &store.SendEventParams{Event: e})
	return err
}

func listErr(h *harness, p store.ListEventsParams) error {
	_, err := h.s.ListEvents(h.t.Context(), &p)
	return err
}

// testConcurrentEventSends: eight sends of one id at once store it once.
func testConcurrentEventSends(t *testing.T, h *harness) {
	const n = 8
	var wg sync.WaitGroup
	seqs, stored := make([]int64, n), make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			e, existed, err := h.s.SendEvent(t.Context(), &store.SendEventParams{Event: &store.EventRecord{
				ID: "same", Name: "race", Data: json.RawMessage(fmt.Sprint(i)), At: at(0)}})
			if err == nil {
				seqs[i], stored[i] = e.Seq, !existed
			}
			errs[i] = err
		})
	}
	wg.Wait()
	count := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("send %d: %v", i, errs[i])
		}
		if seqs[i] != seqs[0] {
			t.Errorf("send %d got seq %d, send 0 %d", i, seqs[i], seqs[0])
		}
		if stored[i] {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d sends stored the event, want 1", count)
	}
	if got := h.eventIDs(store.ListEventsParams{}); got != "same" {
		t.Errorf("events: %q", got)
	}
}

// testTriggers: a send writes one firing per trigger of its name (none
// for triggers put after it); claims lease pending firings oldest first,
// give each a run id that later claims keep, and never hand one firing to
// two claimers; EndFiring is fenced by the token; DeleteTrigger drops
// pending firings only.
func testTriggers(t *testing.T, h *harness) {
	ctx := t.Context()
	put := func(now time.Time, ts ...*store.Trigger) {
		t.Helper()
		if err := h.s.PutTriggers(ctx, &store.PutTriggersParams{Triggers: ts, Now: now}); err != nil {
			t.Fatalf("PutTriggers: %v", err)
		}
	}
	trig := func(name, event string) *store.Trigger {
		return &store.Trigger{Name: name, Event: event, TargetKind: store.TargetFlow, TargetName: "fulfil", Filter: "event.data.n > 0"}
	}
	h.send("before", "order.paid", `{"n":0}`, at(0))
	put(at(0), trig("fulfil", "order.paid"), trig("audit", "order.paid"), trig("bill", "invoice.paid"))
	put(at(time.Minute), &store.Trigger{Name: "audit", Event: "order.paid", TargetKind: store.TargetJob, TargetName: "audit", Declared: true,
		BusinessKey: "event.data.order", ConcurrencyKey: `"tenant-" + event.data.tenant`})
	ts, err := h.s.ListTriggers(ctx)
	if err != nil || len(ts) != 3 || ts[0].Name != "audit" || ts[0].TargetKind != store.TargetJob || !ts[0].Declared ||
		!ts[0].CreatedAt.Equal(at(0)) || !ts[0].UpdatedAt.Equal(at(time.Minute)) || ts[2].Filter != "event.data.n > 0" ||
		ts[0].BusinessKey != "event.data.order" || ts[0].ConcurrencyKey != `"tenant-" + event.data.tenant` || ts[1].BusinessKey != "" {
		t.Fatalf("ListTriggers: %+v, %v", ts, err)
	}
	if err := h.s.PutTriggers(ctx, &store.PutTriggersParams{Triggers: []*store.Trigger{trig("ok", "x"), {Name: "bad", Event: "x", TargetKind: "nope", TargetName: "y"}}, Now: at(0)}); !errors.Is(err, hephtype.ErrInvalidInput) {
		t.Errorf("PutTriggers with a bad target kind: %v", err)
	}
	if ts, _ := h.s.ListTriggers(ctx); len(ts) != 3 {
		t.Errorf("a refused put stored %d triggers, want 3", len(ts))
	}

	h.send("o1", "order.paid", `{"n":1}`, at(time.Minute))
	h.send("o1", "order.paid", `{"n":1}`, at(time.Minute)) // a re-send writes no firing
	h.send("i1", "invoice.paid", `{"n":2}`, at(2*time.Minute))
	h.send("x1", "other", `{}`, at(2*time.Minute))
	if fs, err := h.s.Firings(ctx, "before"); err != nil || len(fs) != 0 {
		t.Errorf("firings of an event sent before the triggers: %+v, %v", fs, err)
	}
	fs, err := h.s.Firings(ctx, "o1")
	if err != nil || len(fs) != 2 || fs[0].Trigger != "audit" || fs[1].Trigger != "fulfil" || fs[0].Status != store.FiringPending {
		t.Fatalf("firings of o1: %+v, %v", fs, err)
	}

	claim := func(owner string, now time.Time, limit int, ids ...string) []*store.Firing {
		t.Helper()
		fs, err := h.s.ClaimFirings(ctx, &store.ClaimFiringsParams{Triggers: []string{"fulfil", "audit", "bill"}, Owner: owner,
			Now: now, LeaseFor: time.Minute, RunIDs: ids, Limit: limit})
		if err != nil {
			t.Fatalf("ClaimFirings: %v", err)
		}
		return fs
	}
	// One run id for three firings: one is claimed.
	c1 := claim("p1", at(3*time.Minute), 10, "r1")
	if len(c1) != 1 || c1[0].EventID != "o1" || c1[0].Trigger != "audit" || c1[0].RunID != "r1" || c1[0].Token != 1 ||
		c1[0].Event == nil || c1[0].Event.Name != "order.paid" || !strings.Contains(string(c1[0].Event.Data), `"n"`) {
		t.Fatalf("claim with one run id: %+v", c1)
	}
	c2 := claim("p2", at(3*time.Minute), 10, "r2", "r3", "r4")
	if len(c2) != 2 || c2[0].Trigger != "fulfil" || c2[1].EventID != "i1" || c2[0].RunID != "r2" || c2[1].RunID != "r3" {
		t.Fatalf("second claim: %+v", c2)
	}
	if c := claim("p3", at(3*time.Minute), 10, "r9"); len(c) != 0 {
		t.Fatalf("a claim while all are leased: %+v", c)
	}
	// p1's lease ends; p3 claims the firing again and keeps its run id.
	c3 := claim("p3", at(5*time.Minute), 10, "r9")
	if len(c3) != 3 {
		t.Fatalf("claims after the leases ended: %+v", c3)
	}
	var again *store.Firing
	for _, f := range c3 {
		if f.Trigger == "audit" {
			again = f
		}
	}
	if again == nil || again.RunID != "r1" || again.Token != 2 || again.Owner != "p3" {
		t.Fatalf("claimed again: %+v", again)
	}
	// p1's token is stale.
	end := func(f *store.Firing, token int64, status string) error {
		return h.s.EndFiring(ctx, &store.EndFiringParams{EventID: f.EventID, Trigger: f.Trigger, Token: token, Status: status, Now: at(6 * time.Minute)})
	}
	if err := end(c1[0], 1, store.FiringStarted); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("EndFiring with a stale token: %v", err)
	}
	if err := end(again, 2, store.FiringStarted); err != nil {
		t.Fatalf("EndFiring: %v", err)
	}
	if err := end(again, 2, store.FiringStarted); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("EndFiring twice: %v", err)
	}
	if err := h.s.EndFiring(ctx, &store.EndFiringParams{EventID: "none", Trigger: "audit", Token: 1, Status: store.FiringSkipped, Now: at(0)}); !errors.Is(err, store.ErrFiringNotFound) {
		t.Errorf("EndFiring of no firing: %v", err)
	}
	fs, _ = h.s.Firings(ctx, "o1")
	if fs[0].Status != store.FiringStarted || fs[0].RunID != "r1" || fs[0].Owner != "" || !fs[0].EndedAt.Equal(at(6*time.Minute)) || !fs[0].LeaseUntil.IsZero() {
		t.Errorf("an ended firing: %+v", fs[0])
	}
	if c := claim("p4", at(time.Hour), 10, "r10"); len(c) != 2 {
		t.Errorf("an ended firing is claimed no more: %+v", c)
	}
	testTriggerDeletes(t, h)
}

// testTriggerDeletes: DeleteTrigger drops a trigger's pending firings and
// keeps the ended ones; PruneEvents takes firings with their events.
func testTriggerDeletes(t *testing.T, h *harness) {
	ctx := t.Context()
	// DeleteTrigger drops its pending firings, keeps the ended ones.
	if err := h.s.DeleteTrigger(ctx, "audit"); err != nil {
		t.Fatal(err)
	}
	if err := h.s.DeleteTrigger(ctx, "audit"); !errors.Is(err, store.ErrTriggerNotFound) {
		t.Errorf("DeleteTrigger twice: %v", err)
	}
	if err := h.s.DeleteTrigger(ctx, "bill"); err != nil {
		t.Fatal(err)
	}
	if fs, _ := h.s.Firings(ctx, "i1"); len(fs) != 0 {
		t.Errorf("the pending firing of a deleted trigger: %+v", fs)
	}
	if fs, _ := h.s.Firings(ctx, "o1"); len(fs) != 2 {
		t.Errorf("firings of o1 after deleting audit (ended) : %+v", fs)
	}
	// PruneEvents takes the firings with the events.
	if _, err := h.s.PruneEvents(ctx, &store.PruneEventsParams{Before: at(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if fs, _ := h.s.Firings(ctx, "o1"); len(fs) != 0 {
		t.Errorf("firings of a pruned event: %+v", fs)
	}
}

// testConcurrentFiringClaims: claimers racing over 60 firings lease each
// once.
func testConcurrentFiringClaims(t *testing.T, h *harness) {
	ctx := t.Context()
	if err := h.s.PutTriggers(ctx, &store.PutTriggersParams{Triggers: []*store.Trigger{
		{Name: "t", Event: "e", TargetKind: store.TargetFlow, TargetName: "f"}}, Now: at(0)}); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		h.send(fmt.Sprint("e", i), "e", ``, at(0))
	}
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for {
				ids := make([]string, 7)
				for i := range ids {
					ids[i] = fmt.Sprintf("w%d-%d-%d", w, time.Now().UnixNano(), i)
				}
				fs, err := h.s.ClaimFirings(ctx, &store.ClaimFiringsParams{Triggers: []string{"t"}, Owner: fmt.Sprint("w", w),
					Now: at(time.Minute), LeaseFor: time.Hour, RunIDs: ids, Limit: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if len(fs) == 0 {
					return
				}
				mu.Lock()
				for _, f := range fs {
					if prev, ok := seen[f.EventID]; ok {
						t.Errorf("firing of %s claimed twice (run %s, then %s)", f.EventID, prev, f.RunID)
					}
					seen[f.EventID] = f.RunID
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 60 {
		t.Errorf("%d firings claimed, want 60", len(seen))
	}
}
