package storetest

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func testCreateAndGet(t *testing.T, h *harness) {
	now := at(0)
	nr := &store.NewRun{
		ID: "run-1", Workflow: "orders", Version: 3, Kind: hephtype.KindWorkflow,
		Status: hephtype.StatusRunning, Input: raw(`{"n":1,"s":"x"}`),
		BusinessID: "order::1", KeyScope: businesskey.ScopeActive, ParentID: "parent-0",
		Tags:     []string{"blue", "green"},
		Metadata: map[string]json.RawMessage{"team": raw(`"pay"`), "cfg": raw(`{"x":[1,2]}`)},
		State:    raw(`{"step":"a"}`), Output: raw(`{"partial":true}`), Error: "not yet",
		History: []store.NewEvent{
			{Kind: hephtype.EventRunStarted, Data: raw(`{"n":1}`)},
			{Kind: hephtype.EventStepScheduled, Step: "a", Index: 2, Attempt: 1, Name: "go", Error: "e"},
		},
		Tasks: []store.NewTask{
			{Queue: "q", Kind: store.TaskStep, Step: "a", Index: 2, Attempt: 1, Payload: raw(`{"p":1}`), Item: raw(`[1]`), Priority: 7, ReadyAt: at(time.Minute)},
			{Queue: "timers", Kind: store.TaskTimer, Step: "b", Index: -1}, // ReadyAt zero: now
		},
	}
	res := h.create(now, nr)[0]
	want := &store.Run{
		ID: "run-1", Workflow: "orders", Version: 3, Kind: hephtype.KindWorkflow,
		Status: hephtype.StatusRunning, Input: nr.Input, Output: nr.Output, Error: "not yet",
		BusinessID: "order::1", KeyScope: businesskey.ScopeActive, ParentID: "parent-0",
		Tags: nr.Tags, Metadata: nr.Metadata, State: nr.State, Seq: 2,
		CreatedAt: now, UpdatedAt: now,
	}
	diff(t, "Apply result run", want, res.Run)
	diff(t, "GetRun", want, h.get("run-1"))

	wantTasks := []*store.Task{
		{RunID: "run-1", Queue: "q", Kind: store.TaskStep, Workflow: "orders", Version: 3, Step: "a", Index: 2, Attempt: 1,
			Payload: raw(`{"p":1}`), Item: raw(`[1]`), Priority: 7, ReadyAt: at(time.Minute), CreatedAt: now,
			Tags: nr.Tags, Metadata: nr.Metadata},
		{RunID: "run-1", Queue: "timers", Kind: store.TaskTimer, Workflow: "orders", Version: 3, Step: "b", Index: -1,
			ReadyAt: now, CreatedAt: now, Tags: nr.Tags, Metadata: nr.Metadata},
	}
	if len(res.Tasks) != 2 || res.Tasks[0].ID == 0 || res.Tasks[1].ID == 0 || res.Tasks[0].ID == res.Tasks[1].ID {
		t.Fatalf("tasks ids: %v", res.Tasks)
	}
	ignore := cmpopts.IgnoreFields(store.Task{}, "ID", "Token")
	if d := gocmp.Diff(wantTasks, res.Tasks, opts, ignore); d != "" {
		t.Fatalf("Apply result tasks (-want +got):\n%s", d)
	}
	// The tasks as stored, through a claim.
	claimed := h.claim(at(time.Hour), "w", 10, time.Minute, "q", "timers")
	for _, wt := range wantTasks {
		wt.Owner, wt.LeaseUntil, wt.Claims = "w", at(time.Hour+time.Minute), 1
	}
	slices.SortFunc(claimed, func(a, b *store.Task) int { return cmp.Compare(a.ID, b.ID) })
	if d := gocmp.Diff(wantTasks, claimed, opts, ignore); d != "" {
		t.Fatalf("claimed tasks (-want +got):\n%s", d)
	}
	if d := gocmp.Diff(taskIDs(res.Tasks), taskIDs(claimed)); d != "" {
		t.Fatalf("claimed task ids (-want +got):\n%s", d)
	}

	wantHist := []store.Event{
		{RunID: "run-1", Seq: 1, Kind: hephtype.EventRunStarted, Data: raw(`{"n":1}`), At: now},
		{RunID: "run-1", Seq: 2, Kind: hephtype.EventStepScheduled, Step: "a", Index: 2, Attempt: 1, Name: "go", Error: "e", At: now},
	}
	diff(t, "History", wantHist, h.history("run-1"))

	// A minimal run: defaults.
	minimal := h.create(at(time.Second), &store.NewRun{ID: "run-2", Workflow: "w", Kind: hephtype.KindFlow})[0].Run
	if minimal.Status != hephtype.StatusPending || minimal.Seq != 0 || !minimal.FinishedAt.IsZero() {
		t.Fatalf("minimal run = %+v, want pending, seq 0, unfinished", minimal)
	}
	diff(t, "GetRun minimal", minimal, h.get("run-2"))
	if evs := h.history("run-2"); len(evs) != 0 {
		t.Fatalf("history of a run created without = %v", evs)
	}
}

func testNotFound(t *testing.T, h *harness) {
	ctx := t.Context()
	h.create(at(0), newRun("exists"))
	_, err := h.s.GetRun(ctx, "nope")
	wantErr(t, "GetRun", err, store.ErrRunNotFound)
	if err.Error() != "run nope not found" {
		t.Errorf("GetRun(nope) says %q, want %q (store.RunNotFound: callers add no prefix)", err, "run nope not found")
	}
	_, err = h.s.FindRun(ctx, &store.FindRunParams{BusinessID: "order::404"})
	wantErr(t, "FindRun", err, store.ErrRunNotFound)
	_, err = h.s.History(ctx, &store.HistoryParams{RunID: "nope"})
	wantErr(t, "History", err, store.ErrRunNotFound)
	called := false
	res := h.apply(at(time.Second), store.Change{RunID: "nope", Decide: func(*store.Run) (*store.Update, error) {
		called = true
		return &store.Update{Status: hephtype.StatusCompleted}, nil
	}})[0]
	wantErr(t, "Apply update", res.Err, store.ErrRunNotFound)
	if res.Run != nil || called {
		t.Fatalf("refused change: run %v, Decide called %v", res.Run, called)
	}
}

func testFindRunNewest(t *testing.T, h *harness) {
	mk := func(id, bid string) *store.NewRun {
		r := newRun(id)
		r.BusinessID, r.KeyScope = bid, businesskey.ScopeNone
		return r
	}
	h.create(at(0), mk("a", "k::1"))
	h.create(at(2*time.Second), mk("b", "k::1"))
	h.create(at(time.Second), mk("c", "k::1"))
	h.create(at(3*time.Second), mk("d", "k::2"))
	r, err := h.s.FindRun(t.Context(), &store.FindRunParams{BusinessID: "k::1"})
	if err != nil || r.ID != "b" {
		t.Fatalf("FindRun = %v, %v; want run b", r, err)
	}
	diff(t, "FindRun", h.get("b"), r)
	// Same creation time: the greater id is newer.
	h.create(at(5*time.Second), mk("f", "k::1"), mk("e", "k::1"))
	if r, err := h.s.FindRun(t.Context(), &store.FindRunParams{BusinessID: "k::1"}); err != nil || r.ID != "f" {
		t.Fatalf("FindRun on a tie = %v, %v; want run f", r, err)
	}
}

// listFixture creates five runs, a minute apart.
func listFixture(h *harness) {
	mk := func(id, wf string, st hephtype.RunStatus, bid string, tags ...string) *store.NewRun {
		r := newRun(id)
		r.Workflow, r.Status, r.Tags = wf, st, tags
		if bid != "" {
			r.BusinessID, r.KeyScope = bid, businesskey.ScopeNone
		}
		return r
	}
	h.create(at(0), mk("r1", "a", hephtype.StatusRunning, "k::1", "x", "y"))
	h.create(at(1*time.Minute), mk("r2", "b", hephtype.StatusCompleted, "", "x"))
	h.create(at(2*time.Minute), mk("r3", "a", hephtype.StatusFailed, "", "y"))
	h.create(at(3*time.Minute), mk("r4", "a", hephtype.StatusWaiting, "k::2"))
	h.create(at(4*time.Minute), mk("r5", "b", hephtype.StatusRunning, "k::1", "x", "y", "z"))
}

func testListRunsFilters(t *testing.T, h *harness) {
	listFixture(h)
	for _, tc := range []struct {
		name string
		p    store.ListRunsParams
		want []string
	}{
		{"all", store.ListRunsParams{}, []string{"r5", "r4", "r3", "r2", "r1"}},
		{"workflow", store.ListRunsParams{Workflow: "a"}, []string{"r4", "r3", "r1"}},
		{"workflow none", store.ListRunsParams{Workflow: "zz"}, nil},
		{"statuses", store.ListRunsParams{Statuses: []hephtype.RunStatus{hephtype.StatusRunning, hephtype.StatusFailed}}, []string{"r5", "r3", "r1"}},
		{"one status", store.ListRunsParams{Statuses: []hephtype.RunStatus{hephtype.StatusCompleted}}, []string{"r2"}},
		{"business id", store.ListRunsParams{BusinessID: "k::1"}, []string{"r5", "r1"}},
		{"tag", store.ListRunsParams{Tags: []string{"x"}}, []string{"r5", "r2", "r1"}},
		{"every tag", store.ListRunsParams{Tags: []string{"x", "y"}}, []string{"r5", "r1"}},
		{"rare tag", store.ListRunsParams{Tags: []string{"z"}}, []string{"r5"}},
		{"unknown tag", store.ListRunsParams{Tags: []string{"x", "nope"}}, nil},
		{"created after (inclusive)", store.ListRunsParams{CreatedAfter: at(time.Minute)}, []string{"r5", "r4", "r3", "r2"}},
		{"created before (exclusive)", store.ListRunsParams{CreatedBefore: at(3 * time.Minute)}, []string{"r3", "r2", "r1"}},
		{"created between", store.ListRunsParams{CreatedAfter: at(time.Minute), CreatedBefore: at(3 * time.Minute)}, []string{"r3", "r2"}},
		{"combined", store.ListRunsParams{Workflow: "a", Tags: []string{"y"}, Statuses: []hephtype.RunStatus{hephtype.StatusRunning, hephtype.StatusFailed}}, []string{"r3", "r1"}},
	} {
		page := h.list(tc.p)
		diff(t, tc.name, tc.want, ids(page.Runs))
		if page.Next != "" {
			t.Errorf("%s: Next = %q on the only page", tc.name, page.Next)
		}
	}
	// The listed runs are whole.
	page := h.list(store.ListRunsParams{BusinessID: "k::2"})
	diff(t, "listed run", []*store.Run{h.get("r4")}, page.Runs)
}

func testListRunsPagination(t *testing.T, h *harness) {
	// 23 runs, three to a creation time, created out of id order.
	var all []*store.Run
	for i := range 23 {
		r := newRun(name((i * 7) % 23))
		if i%2 == 0 {
			r.Workflow = "even"
		}
		all = append(all, h.create(at(time.Duration(i/3)*time.Second), r)[0].Run)
	}
	newestFirst := func(rs []*store.Run) []string {
		rs = slices.Clone(rs)
		slices.SortFunc(rs, func(a, b *store.Run) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return cmp.Compare(b.ID, a.ID)
		})
		return ids(rs)
	}
	pages := func(p store.ListRunsParams, insertAfterFirst func()) []string {
		var got []string
		for n := 0; ; n++ {
			page := h.list(p)
			if len(page.Runs) > p.Limit {
				t.Fatalf("page of %d runs, limit %d", len(page.Runs), p.Limit)
			}
			got = append(got, ids(page.Runs)...)
			if page.Next == "" {
				return got
			}
			if len(page.Runs) == 0 {
				t.Fatal("empty page with a Next cursor")
			}
			if n == 0 && insertAfterFirst != nil {
				insertAfterFirst()
			}
			if n > 30 {
				t.Fatal("too many pages")
			}
			p.Cursor = page.Next
		}
	}
	diff(t, "all pages", newestFirst(all), pages(store.ListRunsParams{Limit: 5}, nil))
	diff(t, "pages of one", newestFirst(all), pages(store.ListRunsParams{Limit: 1}, nil))
	var even []*store.Run
	for _, r := range all {
		if r.Workflow == "even" {
			even = append(even, r)
		}
	}
	diff(t, "filtered pages", newestFirst(even), pages(store.ListRunsParams{Workflow: "even", Limit: 4}, nil))
	// A page boundary inside a group sharing a creation time, and a run
	// created between pages: keyset pagination neither repeats nor skips.
	want := newestFirst(all)
	got := pages(store.ListRunsParams{Limit: 4}, func() { h.create(at(time.Hour), newRun("late")) })
	diff(t, "pages with an insert", want, got)
	// Exactly one full page: Next may be set, but the next page is empty.
	got = pages(store.ListRunsParams{Limit: 24}, nil)
	if len(got) != 24 {
		t.Fatalf("got %d runs, want 24", len(got))
	}

	// A cursor that is not base64, or base64 that does not hold a
	// cursor, is invalid input (an API answers 400), never a failure.
	b64 := base64.RawURLEncoding.EncodeToString
	for _, c := range []string{"not a cursor!", "garbage", "MTIz", b64([]byte("abc,run-1")), b64([]byte("123,")), b64([]byte("123")),
		b64([]byte("99999999999999999999,run-1")), b64([]byte("1,\x00")), b64([]byte("1,\xff"))} {
		_, err := h.s.ListRuns(t.Context(), &store.ListRunsParams{Cursor: c})
		wantErr(t, "ListRuns with the cursor "+strconv.Quote(c), err, hephtype.ErrInvalidInput)
	}
}

func testListRunsLimits(t *testing.T, h *harness) {
	var rs []*store.NewRun
	for i := range 1003 {
		rs = append(rs, newRun(name(i)))
	}
	h.create(at(0), rs...)
	page := h.list(store.ListRunsParams{})
	if len(page.Runs) != 100 || page.Next == "" {
		t.Fatalf("default limit: %d runs, next %q; want 100 and a cursor", len(page.Runs), page.Next)
	}
	page = h.list(store.ListRunsParams{Limit: 5000})
	if len(page.Runs) != 1000 || page.Next == "" {
		t.Fatalf("limit 5000: %d runs, next %q; want 1000 and a cursor", len(page.Runs), page.Next)
	}
	page = h.list(store.ListRunsParams{Limit: 1000, Cursor: page.Next})
	if len(page.Runs) != 3 || page.Next != "" {
		t.Fatalf("last page: %d runs, next %q; want 3 and none", len(page.Runs), page.Next)
	}
}

func testHistory(t *testing.T, h *harness) {
	r := newRun("h")
	r.History = []store.NewEvent{{Kind: hephtype.EventRunStarted}, {Kind: hephtype.EventStepScheduled, Step: "a"}}
	h.create(at(0), r)
	h.mustUpdate(at(1*time.Second), "h", nil, &store.Update{History: []store.NewEvent{{Kind: hephtype.EventStepStarted, Step: "a", Attempt: 1}}})
	h.mustUpdate(at(2*time.Second), "h", nil, &store.Update{State: raw(`{}`)})
	res := h.mustUpdate(at(3*time.Second), "h", nil, &store.Update{History: []store.NewEvent{
		{Kind: hephtype.EventStepCompleted, Step: "a", Name: "ok", Data: raw(`{"out":1}`)},
		{Kind: hephtype.EventRunCompleted},
	}})
	if res.Run.Seq != 5 {
		t.Fatalf("run seq = %d, want 5", res.Run.Seq)
	}
	want := []store.Event{
		{RunID: "h", Seq: 1, Kind: hephtype.EventRunStarted, At: at(0)},
		{RunID: "h", Seq: 2, Kind: hephtype.EventStepScheduled, Step: "a", At: at(0)},
		{RunID: "h", Seq: 3, Kind: hephtype.EventStepStarted, Step: "a", Attempt: 1, At: at(time.Second)},
		{RunID: "h", Seq: 4, Kind: hephtype.EventStepCompleted, Step: "a", Name: "ok", Data: raw(`{"out":1}`), At: at(3 * time.Second)},
		{RunID: "h", Seq: 5, Kind: hephtype.EventRunCompleted, At: at(3 * time.Second)},
	}
	diff(t, "History", want, h.history("h"))
	for _, tc := range []struct {
		after int64
		limit int
		want  []store.Event
	}{
		{2, 0, want[2:]},
		{0, 2, want[:2]},
		{4, 10, want[4:]},
		{1, 3, want[1:4]},
		{5, 0, nil},
	} {
		got, err := h.s.History(t.Context(), &store.HistoryParams{RunID: "h", AfterSeq: tc.after, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		diff(t, "History after "+strconv.Itoa(int(tc.after)), tc.want, got)
	}
	// Another run's history is its own.
	h.create(at(0), newRun("other"))
	if evs := h.history("other"); len(evs) != 0 {
		t.Fatalf("history of other = %v", evs)
	}
}
