package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func eventWaitFixture(id string) *store.EventWait {
	return &store.EventWait{ID: id, RunID: "run-" + id, Kind: store.EventWaitStep, Step: "pay", ResumeWith: "received", Event: "invoice.paid",
		Match: "event.data.invoice == input.invoice", Input: []byte(`{"invoice":7}`),
		From: at(time.Minute), Until: at(3 * time.Minute), CreatedAt: at(2 * time.Minute)}
}

// testEventWaits: a wait is put once per id (a re-put returns the stored
// one), its candidates are the events of its name in [From, Until) oldest
// first, the first MatchEventWait wins and later ones return it,
// DeliveredEventWait closes it (OpenEventWaits no longer lists it), the
// reads by run and by event find it, and bad waits name the field.
func testEventWaits(t *testing.T, h *harness) {
	ctx := t.Context()
	w := eventWaitFixture("w1")
	got, err := h.s.PutEventWait(ctx, w)
	if err != nil {
		t.Fatalf("PutEventWait: %v", err)
	}
	if got.ID != "w1" || got.RunID != "run-w1" || got.Step != "pay" || got.ResumeWith != "received" || got.Kind != store.EventWaitStep || got.Match != w.Match || string(got.Input) != `{"invoice":7}` && !strings.Contains(string(got.Input), `"invoice": 7`) ||
		!got.From.Equal(w.From) || !got.Until.Equal(w.Until) || !got.CreatedAt.Equal(w.CreatedAt) || got.MatchedEventID != "" || !got.DeliveredAt.IsZero() {
		t.Fatalf("put: %+v", got)
	}
	again := eventWaitFixture("w1")
	again.Event, again.Match = "other", "false"
	if got, err = h.s.PutEventWait(ctx, again); err != nil || got.Event != "invoice.paid" || got.Match != w.Match {
		t.Fatalf("re-put: %+v %v", got, err)
	}
	h.send("before", "invoice.paid", `{"invoice":7}`, at(0))
	h.send("c1", "invoice.paid", `{"invoice":1}`, at(time.Minute))
	h.send("other", "order.paid", `{"invoice":7}`, at(90*time.Second))
	h.send("c2", "invoice.paid", `{"invoice":7}`, at(2*time.Minute))
	h.send("after", "invoice.paid", `{"invoice":7}`, at(3*time.Minute))
	es, err := h.s.WaitCandidates(ctx, w)
	if err != nil {
		t.Fatalf("WaitCandidates: %v", err)
	}
	var ids []string
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "c1,c2" {
		t.Errorf("candidates: %v, want c1,c2", ids)
	}
	open := w.Until
	w.Until = time.Time{}
	if es, _ = h.s.WaitCandidates(ctx, w); len(es) != 3 {
		t.Errorf("candidates without until: %d, want 3", len(es))
	}
	w.Until = open
	m, err := h.s.MatchEventWait(ctx, "w1", "c2", at(4*time.Minute))
	if err != nil || m.MatchedEventID != "c2" || !m.MatchedAt.Equal(at(4*time.Minute)) {
		t.Fatalf("match: %+v %v", m, err)
	}
	if m, err = h.s.MatchEventWait(ctx, "w1", "c1", at(5*time.Minute)); err != nil || m.MatchedEventID != "c2" || !m.MatchedAt.Equal(at(4*time.Minute)) {
		t.Fatalf("second match: %+v %v", m, err)
	}
	if _, err := h.s.MatchEventWait(ctx, "nope", "c1", at(5*time.Minute)); !errors.Is(err, store.ErrEventWaitNotFound) {
		t.Errorf("match of a missing wait: %v", err)
	}
	if _, err := h.s.PutEventWait(ctx, eventWaitFixture("w2")); err != nil {
		t.Fatal(err)
	}
	if ws, err := h.s.OpenEventWaits(ctx, 10); err != nil || len(ws) != 2 || ws[0].ID != "w2" && ws[0].ID != "w1" {
		t.Fatalf("open: %v %v", ws, err)
	}
	for range 2 {
		if err := h.s.DeliveredEventWait(ctx, "w1", at(6*time.Minute)); err != nil {
			t.Fatalf("delivered: %v", err)
		}
	}
	ws, err := h.s.OpenEventWaits(ctx, 10)
	if err != nil || len(ws) != 1 || ws[0].ID != "w2" {
		t.Fatalf("open after delivery: %v %v", ws, err)
	}
	if ws, err = h.s.EventWaitsOf(ctx, "run-w1"); err != nil || len(ws) != 1 || !ws[0].DeliveredAt.Equal(at(6*time.Minute)) || ws[0].MatchedEventID != "c2" {
		t.Fatalf("waits of run: %v %v", ws, err)
	}
	if ws, err = h.s.EventWaitsMatched(ctx, "c2"); err != nil || len(ws) != 1 || ws[0].ID != "w1" {
		t.Fatalf("waits matched: %v %v", ws, err)
	}
	if ws, err = h.s.EventWaitsMatched(ctx, "c1"); err != nil || len(ws) != 0 {
		t.Fatalf("waits matched by c1: %v %v", ws, err)
	}
	for field, mod := range map[string]func(w *store.EventWait){
		"id":    func(w *store.EventWait) { w.ID = strings.Repeat("x", store.MaxEventWaitIDBytes+1) },
		"match": func(w *store.EventWait) { w.Match = strings.Repeat("x", store.MaxEventWaitMatchBytes+1) },
		"input": func(w *store.EventWait) {
			w.Input = []byte(`"` + strings.Repeat("x", store.MaxEventWaitInputBytes) + `"`)
		},
		"kind": func(w *store.EventWait) { w.Kind = "job" },
		"name": func(w *store.EventWait) { w.Event = "" },
	} {
		bad := eventWaitFixture("bad")
		mod(bad)
		if _, err := h.s.PutEventWait(ctx, bad); !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), field) {
			t.Errorf("bad %s: %v", field, err)
		}
	}
}

// testConcurrentEventWaitMatches: eight matches of one wait by different
// events race; every one returns the same winner.
func testConcurrentEventWaitMatches(t *testing.T, h *harness) {
	if _, err := h.s.PutEventWait(t.Context(), eventWaitFixture("race")); err != nil {
		t.Fatal(err)
	}
	const n = 8
	winners, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			w, err := h.s.MatchEventWait(t.Context(), "race", fmt.Sprint("e", i), at(time.Minute))
			if err == nil {
				winners[i] = w.MatchedEventID
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("match %d: %v", i, errs[i])
		}
		if winners[i] == "" || winners[i] != winners[0] {
			t.Errorf("match %d saw winner %q, match 0 %q", i, winners[i], winners[0])
		}
	}
}
