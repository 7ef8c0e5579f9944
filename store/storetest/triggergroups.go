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

// groupHarness steps the firings of grouped triggers by hand.
type groupHarness struct {
	*harness
	triggers map[string]*store.Trigger
}

func newGroupHarness(t *testing.T, h *harness, ts ...*store.Trigger) *groupHarness {
	t.Helper()
	if err := h.s.PutTriggers(t.Context(), &store.PutTriggersParams{Triggers: ts, Now: at(0)}); err != nil {
		t.Fatalf("PutTriggers: %v", err)
	}
	g := &groupHarness{harness: h, triggers: map[string]*store.Trigger{}}
	for _, tr := range ts {
		g.triggers[tr.Name] = tr
	}
	return g
}

// fire sends an event and claims its firing by trigger (token 1).
func (g *groupHarness) fire(trigger, id string, when time.Time) *store.Firing {
	g.t.Helper()
	g.send(id, g.triggers[trigger].Event, `{"id":"`+id+`"}`, when)
	fs, err := g.s.ClaimFirings(g.t.Context(), &store.ClaimFiringsParams{Triggers: []string{trigger}, Owner: "o", Now: when,
		LeaseFor: time.Minute, RunIDs: []string{"run-" + id}, Limit: 1})
	if err != nil || len(fs) != 1 || fs[0].EventID != id {
		g.t.Fatalf("claim the firing of %s: %+v, %v", id, fs, err)
	}
	return fs[0]
}

func (g *groupHarness) join(f *store.Firing, key string, token int64, now time.Time) error {
	return g.s.JoinGroup(g.t.Context(), &store.JoinGroupParams{Trigger: g.triggers[f.Trigger], Key: key, Token: token, Now: now, EventAt: f.Event.At,
		Event: store.GroupEvent{EventID: f.EventID, Seq: f.Seq, Input: []byte(`"in-` + f.EventID + `"`), BusinessKey: "bk-" + f.EventID}})
}

// groups returns a trigger's groups as "key:event,event@due" strings.
func (g *groupHarness) groups(trigger string) []string {
	g.t.Helper()
	gs, err := g.s.ListTriggerGroups(g.t.Context(), &store.ListTriggerGroupsParams{Trigger: trigger, Limit: store.MaxGroupsPage})
	if err != nil {
		g.t.Fatalf("ListTriggerGroups: %v", err)
	}
	out := make([]string, len(gs))
	for i, gr := range gs {
		s := gr.Key + ":"
		for j, e := range gr.Events {
			if j > 0 {
				s += ","
			}
			s += e.EventID
		}
		out[i] = s + "@" + gr.DueAt.Sub(base).String()
	}
	return out
}

func (g *groupHarness) claim(now time.Time, ids ...string) []*store.TriggerGroup {
	g.t.Helper()
	names := make([]string, 0, len(g.triggers))
	for n := range g.triggers {
		names = append(names, n)
	}
	gs, err := g.s.ClaimGroups(g.t.Context(), &store.ClaimGroupsParams{Triggers: names, Owner: "o", Now: now, LeaseFor: time.Minute, RunIDs: ids, Limit: 10})
	if err != nil {
		g.t.Fatalf("ClaimGroups: %v", err)
	}
	return gs
}

func wantGroups(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: groups %q, want %q", what, got, want)
	}
}

// Debounce and batch groups, the fence of a join, the lease and token of
// a group's claim and end, and the trigger's flow control stored.
func testTriggerGroups(t *testing.T, h *harness) {
	ctx := t.Context()
	deb := &store.Trigger{Name: "deb", Event: "typed", TargetKind: store.TargetFlow, TargetName: "f", Key: "event.data.doc", Debounce: 30 * time.Second}
	bat := &store.Trigger{Name: "bat", Event: "item", TargetKind: store.TargetFlow, TargetName: "f", BatchSize: 2, BatchWindow: time.Minute}
	for _, bad := range []*store.Trigger{
		{Name: "x", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", Debounce: time.Second, BatchSize: 2, BatchWindow: time.Second},
		{Name: "x", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", BatchSize: store.MaxBatchSize + 1, BatchWindow: time.Second},
		{Name: "x", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", ThrottleLimit: 1},
	} {
		if err := h.s.PutTriggers(ctx, &store.PutTriggersParams{Triggers: []*store.Trigger{bad}, Now: at(0)}); !errors.Is(err, hephtype.ErrInvalidInput) {
			t.Errorf("PutTriggers %+v: %v, want ErrInvalidInput", bad, err)
		}
	}
	g := newGroupHarness(t, h, deb, bat)
	if ts, err := h.s.ListTriggers(ctx); err != nil || len(ts) != 2 || ts[0].BatchSize != 2 || ts[0].BatchWindow != time.Minute ||
		ts[1].Debounce != 30*time.Second || ts[1].Key != "event.data.doc" {
		t.Fatalf("ListTriggers: %+v, %v", ts, err)
	}

	// A join is fenced by the firing's token and happens once.
	f1 := g.fire("deb", "a1", at(0))
	if err := g.join(f1, "a", f1.Token+1, at(0)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("join with a wrong token: %v", err)
	}
	wantGroups(t, "after a refused join", g.groups("deb"))
	if err := g.join(f1, "a", f1.Token, at(0)); err != nil {
		t.Fatal(err)
	}
	if err := g.join(f1, "a", f1.Token, at(0)); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a second join: %v", err)
	}
	if fs, err := h.s.Firings(ctx, "a1"); err != nil || len(fs) != 1 || fs[0].Status != store.FiringGrouped {
		t.Fatalf("the joined firing: %+v, %v", fs, err)
	}
	if err := g.s.JoinGroup(ctx, &store.JoinGroupParams{Trigger: deb, Key: "a", Token: 1, Now: at(0), Event: store.GroupEvent{EventID: "nope"}}); !errors.Is(err, store.ErrFiringNotFound) {
		t.Fatalf("join of no firing: %v", err)
	}
	// Debounce: each event of a key pushes the deadline; keys are apart.
	f2 := g.fire("deb", "a2", at(10*time.Second))
	f3 := g.fire("deb", "b1", at(10*time.Second))
	for _, f := range []*store.Firing{f2, f3} {
		if err := g.join(f, f.EventID[:1], f.Token, at(15*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	wantGroups(t, "debounce", g.groups("deb"), "a:a1,a2@40s", "b:b1@40s")
	if next, ok, err := h.s.NextGroupDue(ctx, []string{"deb", "bat"}); err != nil || !ok || !next.Equal(at(40*time.Second)) {
		t.Fatalf("NextGroupDue: %v, %v, %v", next, ok, err)
	}
	if gs := g.claim(at(39 * time.Second)); len(gs) != 0 {
		t.Fatalf("claimed before due: %+v", gs)
	}
	gs := g.claim(at(40*time.Second), "r1", "r2")
	if len(gs) != 2 || gs[0].Token != 1 || gs[0].RunID != "r1" || !gs[0].Closed || len(gs[0].Events) != 2 ||
		gs[0].Events[1].EventID != "a2" || string(gs[0].Events[1].Input) != `"in-a2"` || gs[0].Events[1].BusinessKey != "bk-a2" {
		t.Fatalf("claim of the due groups: %+v", gs)
	}
	// Claimed: closed, a later event of the key opens a new group.
	f4 := g.fire("deb", "a3", at(41*time.Second))
	if err := g.join(f4, "a", f4.Token, at(41*time.Second)); err != nil {
		t.Fatal(err)
	}
	wantGroups(t, "after the claim", g.groups("deb"), "a:a1,a2@40s", "b:b1@40s", "a:a3@1m11s")
	// The lease: no second claim while it holds; the next keeps the run id.
	if again := g.claim(at(50 * time.Second)); len(again) != 0 {
		t.Fatalf("claimed while leased: %+v", again)
	}
	again := g.claim(at(100*time.Second), "r9", "r8", "r7")
	if len(again) != 3 || again[0].ID != gs[0].ID || again[0].Token != 2 || again[0].RunID != "r1" || again[2].RunID != "r9" {
		t.Fatalf("claim after the lease: %+v", again)
	}
	end := func(gr *store.TriggerGroup, token int64) error {
		return h.s.EndGroup(ctx, &store.EndGroupParams{ID: gr.ID, Token: token, Status: store.GroupStarted, Now: at(100 * time.Second)})
	}
	if err := end(gs[0], 1); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("end with the old token: %v", err)
	}
	if err := end(gs[0], 2); err != nil {
		t.Fatal(err)
	}
	if err := end(gs[0], 2); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a second end: %v", err)
	}
	if err := end(&store.TriggerGroup{ID: gs[0].ID + 1000}, 1); !errors.Is(err, store.ErrGroupNotFound) {
		t.Fatalf("end of no group: %v", err)
	}
	if later := g.claim(at(time.Hour), "x"); len(later) != 2 || later[0].ID == gs[0].ID {
		t.Fatalf("an ended group claimed again: %+v", later)
	}

	// Batch: full at its size (due at once), else due a window after its
	// first event.
	for i, id := range []string{"i1", "i2", "i3"} {
		f := g.fire("bat", id, at(time.Duration(i)*time.Second))
		if err := g.join(f, "", f.Token, at(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	wantGroups(t, "batch", g.groups("bat"), ":i1,i2@1s", ":i3@1m2s")
	// Deleting the trigger deletes its open groups, not the ended.
	if err := h.s.DeleteTrigger(ctx, "deb"); err != nil {
		t.Fatal(err)
	}
	wantGroups(t, "after the delete", g.groups("deb"), "a:a1,a2@40s")
	testGroupsPruned(t, g)
}

// testGroupsPruned: PruneEvents takes the groups that ended before its
// cutoff, with their events; open groups stay. (The groups are those
// testTriggerGroups leaves: deb's ended at 100s, bat's two open.)
func testGroupsPruned(t *testing.T, g *groupHarness) {
	h := g.harness
	ctx := t.Context()
	prune := func(before time.Time) {
		t.Helper()
		if _, err := h.s.PruneEvents(ctx, &store.PruneEventsParams{Before: before}); err != nil {
			t.Fatalf("PruneEvents: %v", err)
		}
	}
	prune(at(100 * time.Second))
	wantGroups(t, "after a prune before the end", g.groups("deb"), "a:a1,a2@40s")
	// The rows of trigger_group_events are counted through the payload
	// rewriter, where the store is one (the backends are; a wrapper of
	// them may not be).
	rw, counts := h.s.(store.PayloadRewriter)
	var before int
	if counts {
		before = groupEventRows(t, rw)
	}
	prune(at(101 * time.Second))
	wantGroups(t, "after a prune past the end", g.groups("deb"))
	wantGroups(t, "open groups after the prune", g.groups("bat"), ":i1,i2@1s", ":i3@1m2s")
	if !counts {
		return
	}
	if after := groupEventRows(t, rw); after != before-2 {
		t.Fatalf("group events stored: %d before the prune, %d after; want 2 fewer", before, after)
	}
}

// groupEventRows counts the rows of trigger_group_events, through a
// store's payload rewriter (a rewrite that changes nothing).
func groupEventRows(t *testing.T, rw store.PayloadRewriter) int {
	t.Helper()
	n, after := 0, ""
	for {
		res, err := rw.RewritePayloads(t.Context(), &store.RewritePayloadsParams{Table: "trigger_group_events", After: after,
			Rewrite: func(v json.RawMessage) (json.RawMessage, bool, error) { return v, false, nil }})
		if err != nil {
			t.Fatalf("count group events: %v", err)
		}
		n += res.Rows
		if after = res.Next; after == "" {
			return n
		}
	}
}

// Throttle: each event is a group of one, due at the start of the first
// window with room, counted per key.
func testTriggerThrottle(t *testing.T, h *harness) {
	thr := &store.Trigger{Name: "thr", Event: "ping", TargetKind: store.TargetFlow, TargetName: "f", Key: "event.data.k", ThrottleLimit: 2, ThrottlePeriod: time.Minute}
	g := newGroupHarness(t, h, thr)
	now := at(10 * time.Second)
	w0 := store.ThrottleWindow(now, time.Minute)
	for i := range 5 {
		f := g.fire("thr", fmt.Sprint("p", i), now)
		if err := g.join(f, "k", f.Token, now); err != nil {
			t.Fatal(err)
		}
	}
	f := g.fire("thr", "q0", now)
	if err := g.join(f, "other", f.Token, now); err != nil {
		t.Fatal(err)
	}
	gs, err := h.s.ListTriggerGroups(t.Context(), &store.ListTriggerGroupsParams{Trigger: "thr", Limit: store.MaxGroupsPage})
	if err != nil || len(gs) != 6 {
		t.Fatalf("ListTriggerGroups: %+v, %v", gs, err)
	}
	wantDue := []time.Time{w0, w0, w0.Add(time.Minute), w0.Add(time.Minute), w0.Add(2 * time.Minute), w0}
	for i, gr := range gs {
		if !gr.DueAt.Equal(wantDue[i]) || len(gr.Events) != 1 || !gr.Closed {
			t.Errorf("group %d: due %v with %d events (closed %v), want due %v with 1", i, gr.DueAt, len(gr.Events), gr.Closed, wantDue[i])
		}
	}
	if claimed := g.claim(now, "a", "b", "c", "d", "e", "f"); len(claimed) != 3 {
		t.Fatalf("claimed now: %d groups, want 3", len(claimed))
	}
	// A window that passed is forgotten: the next event counts anew.
	later := w0.Add(10 * time.Minute)
	f = g.fire("thr", "p9", later)
	if err := g.join(f, "k", f.Token, later); err != nil {
		t.Fatal(err)
	}
	gs, _ = h.s.ListTriggerGroups(t.Context(), &store.ListTriggerGroupsParams{Trigger: "thr", Limit: store.MaxGroupsPage})
	if last := gs[len(gs)-1]; !last.DueAt.Equal(later) {
		t.Fatalf("the event after a quiet spell: due %v, want %v", last.DueAt, later)
	}
}

// ListTriggerGroups pages a trigger's groups by id, filters them by
// status, keeps other triggers' groups out, and refuses bad parameters,
// naming them.
func testTriggerGroupsPaged(t *testing.T, h *harness) {
	thr := &store.Trigger{Name: "thr", Event: "ping", TargetKind: store.TargetFlow, TargetName: "f", Key: "event.data.k", ThrottleLimit: 100, ThrottlePeriod: time.Minute}
	other := &store.Trigger{Name: "other", Event: "pong", TargetKind: store.TargetFlow, TargetName: "f", Key: "event.data.k", ThrottleLimit: 100, ThrottlePeriod: time.Minute}
	g := newGroupHarness(t, h, thr, other)
	now := at(10 * time.Second)
	for i := range 5 {
		for _, tr := range []string{"other", "thr"} {
			f := g.fire(tr, fmt.Sprint(tr, i), now)
			if err := g.join(f, fmt.Sprint("k", i), f.Token, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	claimed := g.claim(now, "r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9")
	var started int
	for _, gr := range claimed {
		if gr.Trigger == "thr" && started < 2 {
			started++
			if err := h.s.EndGroup(t.Context(), &store.EndGroupParams{ID: gr.ID, Token: gr.Token, Status: store.GroupStarted, Now: now}); err != nil {
				t.Fatal(err)
			}
		}
	}
	list := func(p store.ListTriggerGroupsParams) []string {
		t.Helper()
		gs, err := h.s.ListTriggerGroups(t.Context(), &p)
		if err != nil {
			t.Fatalf("ListTriggerGroups %+v: %v", p, err)
		}
		out := make([]string, len(gs))
		for i, gr := range gs {
			if gr.Trigger != "thr" || len(gr.Events) != 1 {
				t.Fatalf("group %+v of the page of thr", gr)
			}
			out[i] = gr.Events[0].EventID + ":" + gr.Status
		}
		return out
	}
	all := list(store.ListTriggerGroupsParams{Trigger: "thr"})
	if len(all) != 5 {
		t.Fatalf("the groups of thr: %v", all)
	}
	gs, _ := h.s.ListTriggerGroups(t.Context(), &store.ListTriggerGroupsParams{Trigger: "thr", Limit: 2})
	if len(gs) != 2 {
		t.Fatalf("a page of 2: %d groups", len(gs))
	}
	rest := list(store.ListTriggerGroupsParams{Trigger: "thr", AfterID: gs[1].ID})
	wantGroups(t, "after the first page", rest, all[2:]...)
	open, done := list(store.ListTriggerGroupsParams{Trigger: "thr", Status: store.GroupOpen}), list(store.ListTriggerGroupsParams{Trigger: "thr", Status: store.GroupStarted})
	if len(open) != 3 || len(done) != 2 {
		t.Errorf("open %v, started %v; want 3 and 2", open, done)
	}
	for _, bad := range []struct {
		p    store.ListTriggerGroupsParams
		want string
	}{
		{store.ListTriggerGroupsParams{}, "trigger"},
		{store.ListTriggerGroupsParams{Trigger: "thr", Status: "done"}, "status"},
		{store.ListTriggerGroupsParams{Trigger: "thr", AfterID: -1}, "after"},
		{store.ListTriggerGroupsParams{Trigger: "thr", Limit: store.MaxGroupsPage + 1}, "limit"},
		{store.ListTriggerGroupsParams{Trigger: "thr", Limit: -1}, "limit"},
	} {
		_, err := h.s.ListTriggerGroups(t.Context(), &bad.p)
		if !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ListTriggerGroups %+v: %v, want ErrInvalidInput naming %s", bad.p, err, bad.want)
		}
	}
}

// A join whose clock lags behind one that already deleted its window
// (it waited for the key's lock) is counted from the key's earliest
// kept window, not again in the one deleted, which was full.
func testThrottleLaggingJoin(t *testing.T, h *harness) {
	thr := &store.Trigger{Name: "thr", Event: "ping", TargetKind: store.TargetFlow, TargetName: "f", Key: "event.data.k", ThrottleLimit: 2, ThrottlePeriod: time.Minute}
	g := newGroupHarness(t, h, thr)
	now := at(10 * time.Second)
	w0 := store.ThrottleWindow(now, time.Minute)
	for i, when := range []time.Time{now, now, now.Add(time.Minute), now, now} {
		f := g.fire("thr", fmt.Sprint("p", i), when)
		if err := g.join(f, "k", f.Token, when); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := h.s.ListTriggerGroups(t.Context(), &store.ListTriggerGroupsParams{Trigger: "thr", Limit: store.MaxGroupsPage})
	if err != nil || len(gs) != 5 {
		t.Fatalf("ListTriggerGroups: %+v, %v", gs, err)
	}
	wantDue := []time.Time{w0, w0, w0.Add(time.Minute), w0.Add(time.Minute), w0.Add(2 * time.Minute)}
	for i, gr := range gs {
		if !gr.DueAt.Equal(wantDue[i]) {
			t.Errorf("group %d (%s): due %v, want %v", i, gr.Events[0].EventID, gr.DueAt, wantDue[i])
		}
	}
}

// PruneEvents deletes the throttle windows that ended by its cutoff,
// which a key that stops receiving events would keep for good, and keeps
// those that have not, which the next join of their key still counts.
func testThrottleWindowsPruned(t *testing.T, h *harness, c *config) {
	thr := &store.Trigger{Name: "thr", Event: "ping", TargetKind: store.TargetFlow, TargetName: "f", Key: "event.data.k", ThrottleLimit: 1, ThrottlePeriod: time.Minute}
	g := newGroupHarness(t, h, thr)
	join := func(id, key string, now time.Time) {
		t.Helper()
		f := g.fire("thr", id, now)
		if err := g.join(f, key, f.Token, now); err != nil {
			t.Fatal(err)
		}
	}
	prune := func(before time.Time, want int) {
		t.Helper()
		if _, err := h.s.PruneEvents(t.Context(), &store.PruneEventsParams{Before: before}); err != nil {
			t.Fatalf("PruneEvents: %v", err)
		}
		if n := c.rows(t, h.s, "trigger_windows"); n != want {
			t.Fatalf("throttle windows after a prune before %v: %d, want %d", before, n, want)
		}
	}
	now := at(10 * time.Second)
	w0 := store.ThrottleWindow(now, time.Minute)
	for i := range 3 { // "a" fills w0, w0+1m and w0+2m; "b" fills w0
		join(fmt.Sprint("a", i), "a", now)
	}
	join("b0", "b", now)
	prune(w0.Add(time.Minute-time.Microsecond), 4)
	prune(w0.Add(time.Minute), 2)
	prune(w0.Add(3*time.Minute-time.Microsecond), 1)
	// The window left (a's w0+2m) is full, so a's next event goes after it.
	later := w0.Add(2*time.Minute + 30*time.Second)
	join("a3", "a", later)
	gs, err := h.s.ListTriggerGroups(t.Context(), &store.ListTriggerGroupsParams{Trigger: "thr", Limit: store.MaxGroupsPage})
	if err != nil || len(gs) != 5 || !gs[4].DueAt.Equal(w0.Add(3*time.Minute)) {
		t.Fatalf("groups after the prunes: %+v, %v; want the last due at %v", gs, err, w0.Add(3*time.Minute))
	}
	prune(w0.Add(4*time.Minute), 0)
}

// Concurrent joins of one key make one debounce group (no two open
// groups); concurrent claims never lease a group twice.
func testConcurrentGroups(t *testing.T, h *harness) {
	deb := &store.Trigger{Name: "deb", Event: "e", TargetKind: store.TargetFlow, TargetName: "f", Debounce: time.Minute}
	one := &store.Trigger{Name: "one", Event: "o", TargetKind: store.TargetFlow, TargetName: "f", BatchSize: 1, BatchWindow: time.Minute}
	g := newGroupHarness(t, h, deb, one)
	var fs []*store.Firing
	for i := range 40 {
		fs = append(fs, g.fire("deb", fmt.Sprint("d", i), at(0)), g.fire("one", fmt.Sprint("o", i), at(0)))
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(fs); i += 4 {
				if err := g.join(fs[i], "k", fs[i].Token, at(0)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if gs, err := h.s.ListTriggerGroups(t.Context(), &store.ListTriggerGroupsParams{Trigger: "deb", Limit: store.MaxGroupsPage}); err != nil || len(gs) != 1 || len(gs[0].Events) != 40 {
		t.Fatalf("debounce groups after concurrent joins: %d, %v", len(gs), err)
	}
	var mu sync.Mutex
	seen := map[int64]string{}
	for w := range 4 {
		wg.Go(func() {
			for {
				ids := make([]string, 7)
				for i := range ids {
					ids[i] = fmt.Sprintf("w%d-%d-%d", w, time.Now().UnixNano(), i)
				}
				gs, err := h.s.ClaimGroups(t.Context(), &store.ClaimGroupsParams{Triggers: []string{"one", "deb"}, Owner: fmt.Sprint("w", w),
					Now: at(time.Hour), LeaseFor: time.Hour, RunIDs: ids, Limit: 7})
				if err != nil {
					t.Error(err)
					return
				}
				if len(gs) == 0 {
					return
				}
				mu.Lock()
				for _, gr := range gs {
					if prev, ok := seen[gr.ID]; ok {
						t.Errorf("group %d claimed twice (run %s, then %s)", gr.ID, prev, gr.RunID)
					}
					seen[gr.ID] = gr.RunID
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 41 {
		t.Errorf("%d groups claimed, want 41", len(seen))
	}
}
