package storetest

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// testExpiredRuns: a run's Deadline is stored as given (to the
// microsecond) and read back by GetRun and ListRuns; ExpiredRuns lists the
// active runs whose deadline is not after Now, earliest first, up to
// Limit, and leaves out runs without one, runs due later and finished
// runs (also one that finished after its deadline passed).
func testExpiredRuns(t *testing.T, h *harness) {
	ctx := t.Context()
	withDeadline := func(id string, d time.Duration, st hephtype.RunStatus) *store.NewRun {
		r := newRun(id)
		r.Status = st
		if d != 0 {
			r.Deadline = at(d).Add(123 * time.Nanosecond) // kept to the microsecond
		}
		return r
	}
	h.create(at(0),
		withDeadline("a-late", 2*time.Hour, hephtype.StatusRunning),
		withDeadline("b-first", time.Hour, hephtype.StatusWaiting),
		withDeadline("c-pending", time.Hour+time.Minute, hephtype.StatusPending),
		withDeadline("d-none", 0, hephtype.StatusRunning),
		withDeadline("e-done", time.Minute, hephtype.StatusCompleted),
		withDeadline("f-ends", time.Minute, hephtype.StatusRunning),
	)
	if got, want := h.get("b-first").Deadline, at(time.Hour); !got.Equal(want) {
		t.Fatalf("GetRun: Deadline %v, want %v", got, want)
	}
	if got := h.get("d-none").Deadline; !got.IsZero() {
		t.Fatalf("GetRun of a run without a deadline: Deadline %v, want zero", got)
	}
	page, err := h.s.ListRuns(ctx, &store.ListRunsParams{})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	for _, r := range page.Runs {
		if r.ID == "a-late" && !r.Deadline.Equal(at(2*time.Hour)) {
			t.Fatalf("ListRuns: a-late's Deadline %v, want %v", r.Deadline, at(2*time.Hour))
		}
	}
	// f-ends finishes before anyone looks: it is never listed.
	h.mustUpdate(at(time.Second), "f-ends", nil, &store.Update{Status: hephtype.StatusCompleted})

	expired := func(now time.Time, limit int) []string {
		t.Helper()
		ids, err := h.s.ExpiredRuns(ctx, &store.ExpiredRunsParams{Now: now, Limit: limit})
		if err != nil {
			t.Fatalf("ExpiredRuns(%v): %v", now, err)
		}
		return ids
	}
	diff(t, "ExpiredRuns before any deadline", []string(nil), expired(at(59*time.Minute), 10))
	diff(t, "ExpiredRuns at b-first's deadline", []string{"b-first"}, expired(at(time.Hour), 10))
	diff(t, "ExpiredRuns later", []string{"b-first", "c-pending", "a-late"}, expired(at(3*time.Hour), 10))
	diff(t, "ExpiredRuns with a limit", []string{"b-first", "c-pending"}, expired(at(3*time.Hour), 2))

	// A run that ended (here: cancelled) is no longer listed.
	h.mustUpdate(at(2*time.Hour), "b-first", nil, &store.Update{Status: hephtype.StatusCancelled})
	diff(t, "ExpiredRuns after b-first ended", []string{"c-pending", "a-late"}, expired(at(3*time.Hour), 10))

	_, err = h.s.ExpiredRuns(ctx, &store.ExpiredRunsParams{Now: at(0), Limit: 0})
	wantErr(t, "ExpiredRuns with Limit 0", err, hephtype.ErrInvalidInput)
	_, err = h.s.ExpiredRuns(ctx, &store.ExpiredRunsParams{Limit: 1})
	wantErr(t, "ExpiredRuns with a zero Now", err, hephtype.ErrInvalidInput)
}
