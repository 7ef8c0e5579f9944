package triggers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// DispatchWaits: a wait gets the oldest event its match accepts (not a
// non-matching or an erroring one), delivered once and marked; a delivery
// the run is not ready for is tried again; a wait whose deadline passed
// an interval ago, or whose run does not exist well after it was made,
// is closed without a delivery; a bad match is refused.
func TestDispatchWaits(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "w.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	start := time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	var delivered []string
	notYet := 1
	s := New(&Config{Store: st, Triggers: st, Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Interval: time.Second, LeaseFor: time.Minute,
		Deliver: func(ctx context.Context, w *store.EventWait, e *store.EventRecord) error {
			if w.ID == "a" && notYet > 0 {
				notYet--
				return ErrNotYet
			}
			delivered = append(delivered, w.ID+"="+e.ID)
			return nil
		}})
	put := func(id string, until time.Time) {
		t.Helper()
		if _, err := st.PutEventWait(ctx, &store.EventWait{ID: id, RunID: "run-" + id, Kind: store.EventWaitWorkflow, Event: "paid",
			Match: "event.data.invoice == input.invoice", Input: json.RawMessage(`{"invoice":7}`), From: start, Until: until, CreatedAt: start}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(id, data string) {
		t.Helper()
		clk.Advance(time.Millisecond)
		if _, _, err := st.SendEvent(ctx, &store.SendEventParams{Event: &store.EventRecord{ID: id, Name: "paid", Data: json.RawMessage(data), At: clk.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	put("a", time.Time{})
	put("late", start.Add(10*time.Second))
	send("other", `{"invoice":8}`)
	send("broken", `{"nope":1}`)
	send("m1", `{"invoice":7}`)
	send("m2", `{"invoice":7}`)
	if _, err := s.DispatchWaits(ctx); err != nil { // a is not ready yet; late matched m1 and delivered
		t.Fatal(err)
	}
	if len(delivered) != 1 || delivered[0] != "late=m1" {
		t.Fatalf("first pass delivered %v, want late=m1", delivered)
	}
	for range 2 {
		if _, err := s.DispatchWaits(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(delivered) != 2 || delivered[1] != "a=m1" {
		t.Fatalf("delivered %v, want late=m1 then a=m1, once each", delivered)
	}

	// Windows without a matching event: quiet's ends a second after
	// start; orphan's has no end, and its run does not exist.
	for _, w := range []*store.EventWait{
		{ID: "quiet", RunID: "run-quiet", Until: start.Add(time.Second)},
		{ID: "orphan", RunID: "run-orphan"},
	} {
		w.Kind, w.Event, w.From, w.CreatedAt = store.EventWaitWorkflow, "quiet", start, start
		if _, err := st.PutEventWait(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(1500 * time.Millisecond) // 0.5 s past quiet's deadline: not an interval yet
	if _, err := s.DispatchWaits(ctx); err != nil {
		t.Fatal(err)
	}
	if w := eventWait(t, st, "run-quiet"); !w.DeliveredAt.IsZero() {
		t.Fatalf("quiet closed %v after its deadline, before an interval passed", clk.Now().Sub(w.Until))
	}
	if w := eventWait(t, st, "run-orphan"); !w.DeliveredAt.IsZero() {
		t.Fatal("orphan closed before a lease passed (its run may not be committed yet)")
	}
	clk.Advance(2 * time.Minute)
	if _, err := s.DispatchWaits(ctx); err != nil {
		t.Fatal(err)
	}
	if w := eventWait(t, st, "run-quiet"); w.DeliveredAt.IsZero() || w.MatchedEventID != "" {
		t.Errorf("quiet after its deadline: %+v, want closed unmatched", w)
	}
	if w := eventWait(t, st, "run-orphan"); w.DeliveredAt.IsZero() || w.MatchedEventID != "" {
		t.Errorf("orphan a lease after it was made: %+v, want closed unmatched", w)
	}
	if len(delivered) != 2 {
		t.Errorf("closed waits were delivered: %v", delivered)
	}
	if _, err := CompileMatch("event.data.invoice =="); err == nil {
		t.Error("a bad match compiled")
	}
	if _, err := CompileMatch("event.data.invoice"); err != nil {
		t.Errorf("a dyn match is refused: %v", err)
	}
	if _, err := CompileMatch("1 + 2"); err == nil {
		t.Error("an int match compiled")
	}
}

func eventWait(t *testing.T, st store.Store, runID string) *store.EventWait {
	t.Helper()
	ws, err := st.EventWaitsOf(t.Context(), runID)
	if err != nil || len(ws) != 1 {
		t.Fatalf("waits of %s: %v %v", runID, ws, err)
	}
	return ws[0]
}
