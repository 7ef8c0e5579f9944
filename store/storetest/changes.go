package storetest

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// testListRunsChanged: ChangedAfter lists the runs created or changed
// after a point, in the order of their last change (then id), with the
// other filters, and pages without loss or repeat.
func testListRunsChanged(t *testing.T, h *harness) {
	a, b, c, d := newRun("c-a"), newRun("c-b"), newRun("c-c"), newRun("c-d")
	d.Workflow = "other"
	h.create(at(time.Second), a, b)
	h.create(at(2*time.Second), c)
	h.create(at(3*time.Second), d)
	// b changes last, a in between: the order is that of the changes.
	h.mustUpdate(at(4*time.Second), "c-a", nil, &store.Update{Status: hephtype.StatusWaiting})
	h.mustUpdate(at(5*time.Second), "c-b", nil, &store.Update{Status: hephtype.StatusCompleted})

	for _, tc := range []struct {
		name string
		p    store.ListRunsParams
		want []string
	}{
		{"from the start", store.ListRunsParams{ChangedAfter: at(0)}, []string{"c-c", "c-d", "c-a", "c-b"}},
		{"from a time, no id: the time is included", store.ListRunsParams{ChangedAfter: at(3 * time.Second)}, []string{"c-d", "c-a", "c-b"}},
		{"after a time and an id", store.ListRunsParams{ChangedAfter: at(2 * time.Second), ChangedAfterID: "c-c"}, []string{"c-d", "c-a", "c-b"}},
		{"after a time and a smaller id", store.ListRunsParams{ChangedAfter: at(2 * time.Second), ChangedAfterID: "c-b"}, []string{"c-c", "c-d", "c-a", "c-b"}},
		{"after the last change", store.ListRunsParams{ChangedAfter: at(5 * time.Second), ChangedAfterID: "c-b"}, nil},
		{"with a workflow", store.ListRunsParams{ChangedAfter: at(0), Workflow: "wf"}, []string{"c-c", "c-a", "c-b"}},
		{"with a status", store.ListRunsParams{ChangedAfter: at(0), Statuses: []hephtype.RunStatus{hephtype.StatusRunning}}, []string{"c-c", "c-d"}},
	} {
		diff(t, tc.name, tc.want, ids(h.list(tc.p).Runs))
	}
	// The updated time of the listed runs is their last change's.
	page := h.list(store.ListRunsParams{ChangedAfter: at(4 * time.Second), ChangedAfterID: "c-a"})
	if len(page.Runs) != 1 || !page.Runs[0].UpdatedAt.Equal(at(5*time.Second)) {
		t.Fatalf("changed after 4s: %+v, want c-b updated at 5s", page.Runs)
	}

	// Pages of one, continued from the last run of each page (the way a
	// follower reads), with a run that changes between pages: each change
	// is listed once, in order, and the changed run comes again at its
	// new place.
	var got []string
	p := store.ListRunsParams{ChangedAfter: at(0), Limit: 1}
	for n := 0; ; n++ {
		pg := h.list(p)
		if len(pg.Runs) == 0 {
			break
		}
		if n > 20 {
			t.Fatal("too many pages")
		}
		last := pg.Runs[len(pg.Runs)-1]
		got = append(got, ids(pg.Runs)...)
		if n == 0 {
			h.mustUpdate(at(6*time.Second), "c-c", nil, &store.Update{Status: hephtype.StatusFailed, Error: "x"})
		}
		if pg.Next != "" {
			nt, nid, err := store.DecodeRunCursor(pg.Next)
			if err != nil || !nt.Equal(last.UpdatedAt) || nid != last.ID {
				t.Fatalf("Next = %q (%v, %q, %v), want the cursor of %s at %v", pg.Next, nt, nid, err, last.ID, last.UpdatedAt)
			}
		}
		p.ChangedAfter, p.ChangedAfterID = last.UpdatedAt, last.ID
	}
	diff(t, "pages with a change", []string{"c-c", "c-d", "c-a", "c-b", "c-c"}, got)

	// With a Cursor it is invalid input.
	_, err := h.s.ListRuns(t.Context(), &store.ListRunsParams{ChangedAfter: at(0), Cursor: store.EncodeRunCursor(at(0), "x")})
	wantErr(t, "ListRuns with Cursor and ChangedAfter", err, hephtype.ErrInvalidInput)
}
