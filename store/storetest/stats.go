package storetest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// testListRunsVersionParentIDs: the filters by version, parent and ids.
func testListRunsVersionParentIDs(t *testing.T, h *harness) {
	p := newRun("p")
	p.Kind, p.Workflow = hephtype.KindWorkflow, "parent"
	c1, c2, c3 := newRun("c1"), newRun("c2"), newRun("c3")
	c1.ParentID, c2.ParentID, c3.ParentID = "p", "p", "other"
	c2.Version = 2
	v2 := newRun("v2")
	v2.Version = 2
	h.create(at(0), p)
	h.create(at(time.Second), c1)
	h.create(at(2*time.Second), c2)
	h.create(at(3*time.Second), c3)
	h.create(at(4*time.Second), v2)
	for _, tc := range []struct {
		name string
		p    store.ListRunsParams
		want []string
	}{
		{"version", store.ListRunsParams{Version: 2}, []string{"v2", "c2"}},
		{"version of a workflow", store.ListRunsParams{Version: 2, Workflow: "wf"}, []string{"v2", "c2"}},
		{"version none has", store.ListRunsParams{Version: 7}, nil},
		{"parent", store.ListRunsParams{ParentID: "p"}, []string{"c2", "c1"}},
		{"parent and version", store.ListRunsParams{ParentID: "p", Version: 1}, []string{"c1"}},
		{"parent without children", store.ListRunsParams{ParentID: "c1"}, nil},
		{"ids", store.ListRunsParams{IDs: []string{"c1", "v2", "p", "nope"}}, []string{"v2", "c1", "p"}},
		{"ids and status", store.ListRunsParams{IDs: []string{"c1", "v2"}, Version: 2}, []string{"v2"}},
		{"ids none stored", store.ListRunsParams{IDs: []string{"x", "y"}}, nil},
		{"ids in the window", store.ListRunsParams{IDs: []string{"p", "c1", "c2"}, CreatedBefore: at(2 * time.Second)}, []string{"c1", "p"}},
	} {
		diff(t, tc.name, tc.want, ids(h.list(tc.p).Runs))
	}
	// The ids filter pages like the others.
	var got []string
	lp := store.ListRunsParams{IDs: []string{"p", "c1", "c2", "c3", "v2"}, Limit: 2}
	for range 10 {
		page := h.list(lp)
		got = append(got, ids(page.Runs)...)
		if page.Next == "" {
			break
		}
		lp.Cursor = page.Next
	}
	diff(t, "pages", []string{"v2", "c3", "c2", "c1", "p"}, got)

	many := make([]string, store.MaxListIDs)
	for i := range many {
		many[i] = fmt.Sprintf("id-%d", i)
	}
	many[len(many)-1] = "c3"
	diff(t, "the most ids", []string{"c3"}, ids(h.list(store.ListRunsParams{IDs: many}).Runs))
	for _, bad := range []store.ListRunsParams{{IDs: append(many, "one more")}, {Version: -1}, {Limit: -1}} {
		_, err := h.s.ListRuns(t.Context(), &bad)
		if !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Fatalf("ListRuns(%d ids, version %d, limit %d): error %v, want one that wraps ErrInvalidInput", len(bad.IDs), bad.Version, bad.Limit, err)
		}
	}
}

// testRunStats: the figures of an overview over runs with known times.
func testRunStats(t *testing.T, h *harness) {
	m := func(n int) time.Time { return at(time.Duration(n) * time.Minute) }
	finish := func(id string, when time.Time, st hephtype.RunStatus) {
		h.mustUpdate(when, id, nil, &store.Update{Status: st})
	}
	mk := func(id string, created time.Time, status hephtype.RunStatus) *store.NewRun {
		r := newRun(id)
		r.Status = status
		h.create(created, r)
		return r
	}
	// Window [0, 60m) in buckets of 10 minutes.
	mk("old", m(-30), hephtype.StatusRunning)
	finish("old", m(5), hephtype.StatusCompleted) // latency 35m, counted in bucket 0
	mk("a1", m(1), hephtype.StatusRunning)
	finish("a1", m(2), hephtype.StatusCompleted) // latency 1m
	mk("a2", m(12), hephtype.StatusRunning)
	finish("a2", m(25), hephtype.StatusFailed)
	mk("a3", m(31), hephtype.StatusRunning)
	finish("a3", m(60).Add(-time.Microsecond), hephtype.StatusCancelled) // the last instant of the window
	mk("a4", m(40), hephtype.StatusRunning)
	finish("a4", m(60), hephtype.StatusCompleted) // at Until: outside
	mk("a5", m(50), hephtype.StatusRunning)       // stale after 5m
	other := newRun("a6")
	other.Workflow, other.Status = "other", hephtype.StatusWaiting
	h.create(m(20), other)
	h.mustUpdate(m(58), "a6", nil, &store.Update{Condition: &store.Condition{Code: "unserved", Message: "no worker", Since: m(57)}})
	mk("a7", m(-120), hephtype.StatusPending) // stale
	mk("a8", m(10), hephtype.StatusRunning)   // the first instant of bucket 1
	finish("a8", m(13), hephtype.StatusCompleted)
	mk("late", m(60), hephtype.StatusRunning) // at Until: outside

	p := store.RunStatsParams{Since: m(0), Until: m(60), Bucket: 10 * time.Minute, StaleAfter: 5 * time.Minute}
	got := h.runStats(p)
	bucket := func(i, started, completed, failed, cancelled int) store.StatsBucket {
		return store.StatsBucket{Start: m(10 * i), Started: started, Completed: completed, Failed: failed, Cancelled: cancelled}
	}
	want := &store.RunStats{
		Buckets: []store.StatsBucket{
			bucket(0, 1, 2, 0, 0), bucket(1, 2, 1, 0, 0), bucket(2, 1, 0, 1, 0),
			bucket(3, 1, 0, 0, 0), bucket(4, 1, 0, 0, 0), bucket(5, 1, 0, 0, 1),
		},
		Latency: store.Latency{Count: 3, Sampled: 3, P50: 3 * time.Minute, P90: 35 * time.Minute, P99: 35 * time.Minute},
		Active:  map[hephtype.RunStatus]int{hephtype.StatusPending: 1, hephtype.StatusRunning: 2, hephtype.StatusWaiting: 1},
		Blocked: store.RunSample{Count: 1, Runs: []*store.Run{h.get("a6")}},
		Stale:   store.RunSample{Count: 2, Runs: []*store.Run{h.get("a7"), h.get("a5")}},
	}
	diff(t, "stats", want, got)
	if c := got.Blocked.Runs[0].Condition; c.Code != "unserved" || c.Message != "no worker" || !c.Since.Equal(m(57)) {
		t.Fatalf("blocked run's condition = %+v", c)
	}

	// One workflow.
	p.Workflow = "other"
	got = h.runStats(p)
	want = &store.RunStats{
		Buckets: []store.StatsBucket{bucket(0, 0, 0, 0, 0), bucket(1, 0, 0, 0, 0), bucket(2, 1, 0, 0, 0),
			bucket(3, 0, 0, 0, 0), bucket(4, 0, 0, 0, 0), bucket(5, 0, 0, 0, 0)},
		Active:  map[hephtype.RunStatus]int{hephtype.StatusPending: 0, hephtype.StatusRunning: 0, hephtype.StatusWaiting: 1},
		Blocked: store.RunSample{Count: 1, Runs: []*store.Run{h.get("a6")}},
	}
	diff(t, "stats of one workflow", want, got)

	// A window that the buckets do not divide: the last bucket counts up
	// to Until only (a2 failed at 25m, after it).
	got = h.runStats(store.RunStatsParams{Since: m(0), Until: m(25), Bucket: 10 * time.Minute, StaleAfter: time.Hour})
	diff(t, "partial bucket", []store.StatsBucket{bucket(0, 1, 2, 0, 0), bucket(1, 2, 1, 0, 0), bucket(2, 1, 0, 0, 0)}, got.Buckets)
	if got.Stale.Count != 1 || len(got.Stale.Runs) != 1 || got.Stale.Runs[0].ID != "a7" {
		t.Fatalf("stale before %v: %d, %v; want a7 only", m(25).Add(-time.Hour), got.Stale.Count, ids(got.Stale.Runs))
	}

	// At most 20 runs are listed; the count counts them all.
	var rs []*store.NewRun
	for i := range store.MaxStatsRuns + 5 {
		rs = append(rs, newRun(fmt.Sprintf("s%02d", i)))
	}
	h.create(m(-60), rs...)
	got = h.runStats(store.RunStatsParams{Since: m(0), Until: m(60), Bucket: time.Hour, StaleAfter: 5 * time.Minute})
	if got.Stale.Count != 27 || len(got.Stale.Runs) != store.MaxStatsRuns || got.Stale.Runs[0].ID != "a7" || got.Stale.Runs[1].ID != "s00" {
		t.Fatalf("many stale: count %d, runs %v", got.Stale.Count, ids(got.Stale.Runs))
	}

	for _, bad := range []store.RunStatsParams{
		{Since: m(0), Until: m(60), Bucket: time.Second, StaleAfter: time.Hour}, // 3600 buckets
		{Since: m(60), Until: m(60), Bucket: time.Minute, StaleAfter: time.Hour},
		{Until: m(60), Bucket: time.Minute, StaleAfter: time.Hour},
		{Since: m(0), Until: m(60), StaleAfter: time.Hour},
		{Since: m(0), Until: m(60), Bucket: time.Minute},
	} {
		_, err := h.s.RunStats(t.Context(), &bad)
		if !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Fatalf("RunStats(%+v): error %v, want one that wraps ErrInvalidInput", bad, err)
		}
	}
	// 500 buckets are fine.
	if got := h.runStats(store.RunStatsParams{Since: m(0), Until: m(500), Bucket: time.Minute, StaleAfter: time.Hour}); len(got.Buckets) != 500 {
		t.Fatalf("%d buckets, want 500", len(got.Buckets))
	}
}

// testRunStatsExact: the counts of RunStats (the active runs by status,
// the blocked runs, the runs started and finished in a window) and the
// lists by an active status stay exact as runs are created, change
// status, finish, are reopened, deleted (forced or not) and pruned. The
// backends read them through indexes of the active and of the finished
// runs (docs/api.md, What the frequent reads cost): each change must move
// a run into or out of them. A few runs stored first, outside the window,
// count in the active figures of all runs.
func testRunStatsExact(t *testing.T, h *harness) {
	others := []*store.NewRun{newRun("o1"), newRun("o2"), newRun("o3")}
	others[1].Status = hephtype.StatusWaiting
	h.create(at(0), others...)
	h.mustUpdate(at(time.Minute), "o3", nil, &store.Update{Condition: &store.Condition{Code: "unserved", Message: "no worker", Since: at(time.Minute)}})
	m := &statsModel{t: t, h: h, t0: at(30 * 24 * time.Hour), status: map[string]hephtype.RunStatus{}, blocked: map[string]bool{}}
	m.before = h.runStats(m.window(""))
	if m.before.Active[hephtype.StatusRunning] != 2 || m.before.Active[hephtype.StatusWaiting] != 1 || m.before.Blocked.Count != 1 {
		t.Fatalf("the runs before: active %v, blocked %d", m.before.Active, m.before.Blocked.Count)
	}
	m.check("none")

	// Created in every active status.
	for i, st := range []hephtype.RunStatus{hephtype.StatusPending, hephtype.StatusPending, hephtype.StatusRunning,
		hephtype.StatusRunning, hephtype.StatusWaiting, hephtype.StatusRunning} {
		r := newRun(fmt.Sprintf("x%d", i+1))
		r.Workflow, r.Status = "exact", st
		h.create(m.t0.Add(time.Duration(i+1)*time.Minute), r)
		m.status[r.ID] = st
	}
	m.check("created")

	// Every change of status, and a condition.
	now := m.t0.Add(10 * time.Minute)
	for id, st := range map[string]hephtype.RunStatus{"x1": hephtype.StatusRunning, "x3": hephtype.StatusWaiting,
		"x5": hephtype.StatusCompleted, "x4": hephtype.StatusFailed, "x2": hephtype.StatusCancelled} {
		h.mustUpdate(now, id, nil, &store.Update{Status: st})
		m.status[id] = st
	}
	h.mustUpdate(now, "x6", nil, &store.Update{Condition: &store.Condition{Code: "unserved", Message: "no worker", Since: now}})
	m.blocked["x6"] = true
	m.check("changed")

	// A failed run reopened.
	h.mustUpdate(now.Add(time.Minute), "x4", nil, &store.Update{Status: hephtype.StatusRunning, Reopen: true})
	m.status["x4"] = hephtype.StatusRunning
	m.check("reopened")

	// Deleted: a finished run, and an active one (forced).
	for _, p := range []store.DeleteRunParams{{ID: "x5"}, {ID: "x6", Force: true}} {
		if _, err := h.s.DeleteRun(t.Context(), &p); err != nil {
			t.Fatalf("DeleteRun(%+v): %v", p, err)
		}
		delete(m.status, p.ID)
	}
	m.check("deleted")

	// Pruned: the finished runs go, the active ones stay.
	h.mustUpdate(now.Add(2*time.Minute), "x4", nil, &store.Update{Status: hephtype.StatusCompleted})
	m.status["x4"] = hephtype.StatusCompleted
	m.check("finished again")
	n, err := h.s.PruneRuns(t.Context(), &store.PruneParams{FinishedBefore: m.t0.Add(time.Hour), Workflows: []string{"exact"}})
	if err != nil || n != 2 {
		t.Fatalf("PruneRuns: %d, %v; want 2 (x2 and x4)", n, err)
	}
	delete(m.status, "x2")
	delete(m.status, "x4")
	m.check("pruned")
}

// statsModel is what testRunStatsExact expects: the status of each run of
// the workflow "exact" (none once deleted), created in the hour after t0,
// and whether it has a condition; before is RunStats of all runs before
// the first of them.
type statsModel struct {
	t       *testing.T
	h       *harness
	t0      time.Time
	before  *store.RunStats
	status  map[string]hephtype.RunStatus
	blocked map[string]bool
}

// window is the hour after t0, in one bucket, for one workflow or all.
func (m *statsModel) window(wf string) store.RunStatsParams {
	return store.RunStatsParams{Since: m.t0, Until: m.t0.Add(time.Hour), Bucket: time.Hour, Workflow: wf, StaleAfter: 365 * 24 * time.Hour}
}

// want returns the stats the model expects of the workflow (latency but
// its count, the blocked runs but their count, and the stale runs left
// out), the active runs of each status and all the active runs, newest
// first.
func (m *statsModel) want() (*store.RunStats, map[hephtype.RunStatus][]string, []string) {
	want := store.NewRunStats(&store.RunStatsParams{Since: m.t0, Until: m.t0.Add(time.Hour), Bucket: time.Hour})
	b := &want.Buckets[0]
	lists := map[hephtype.RunStatus][]string{}
	var active []string
	for _, id := range slices.Sorted(maps.Keys(m.status)) { // in creation order
		b.Started++
		switch st := m.status[id]; st {
		case hephtype.StatusCompleted:
			b.Completed++
			want.Latency.Count++
		case hephtype.StatusFailed:
			b.Failed++
		case hephtype.StatusCancelled:
			b.Cancelled++
		default:
			want.Active[st]++
			lists[st] = append([]string{id}, lists[st]...)
			active = append([]string{id}, active...)
			if m.blocked[id] {
				want.Blocked.Count++
			}
		}
	}
	return want, lists, active
}

// check compares RunStats and the lists by an active status with the
// model, after step.
func (m *statsModel) check(step string) {
	t := m.t
	t.Helper()
	want, lists, active := m.want()
	got := m.h.runStats(m.window("exact"))
	if got.Latency.Sampled != got.Latency.Count {
		t.Fatalf("%s: latency sampled %d of %d", step, got.Latency.Sampled, got.Latency.Count)
	}
	got.Latency = store.Latency{Count: got.Latency.Count}
	got.Blocked.Runs, got.Stale = nil, store.RunSample{}
	diff(t, step+": the stats of the workflow", want, got)
	all := m.h.runStats(m.window(""))
	diff(t, step+": the buckets of all runs", want.Buckets, all.Buckets)
	for _, s := range store.ActiveStatuses() {
		if all.Active[s] != m.before.Active[s]+want.Active[s] {
			t.Fatalf("%s: %d runs %s in all, want %d before and %d since", step, all.Active[s], s, m.before.Active[s], want.Active[s])
		}
	}
	if all.Blocked.Count != m.before.Blocked.Count+want.Blocked.Count {
		t.Fatalf("%s: %d runs blocked in all, want %d before and %d since", step, all.Blocked.Count, m.before.Blocked.Count, want.Blocked.Count)
	}
	for _, s := range store.ActiveStatuses() {
		diff(t, fmt.Sprintf("%s: the runs %s", step, s), lists[s], m.listAll(step, store.ListRunsParams{Workflow: "exact", Statuses: []hephtype.RunStatus{s}}))
	}
	diff(t, step+": the active runs", active, m.listAll(step, store.ListRunsParams{Workflow: "exact", Statuses: store.ActiveStatuses()}))
	diff(t, step+": the active runs since t0", active, m.listAll(step, store.ListRunsParams{Statuses: store.ActiveStatuses(), CreatedAfter: m.t0}))
}

// listAll lists the runs of p a page of one run at a time.
func (m *statsModel) listAll(step string, p store.ListRunsParams) []string {
	m.t.Helper()
	var out []string
	p.Limit = 1
	for range 20 {
		page := m.h.list(p)
		out = append(out, ids(page.Runs)...)
		if page.Next == "" {
			return out
		}
		p.Cursor = page.Next
	}
	m.t.Fatalf("%s: ListRuns(%+v) did not end", step, p)
	return nil
}

func (h *harness) runStats(p store.RunStatsParams) *store.RunStats {
	h.t.Helper()
	st, err := h.s.RunStats(h.t.Context(), &p)
	if err != nil {
		h.t.Fatalf("RunStats(%+v): %v", p, err)
	}
	return st
}
