package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func testClaimOrder(t *testing.T, h *harness) {
	prio := func(nt store.NewTask, p int) store.NewTask { nt.Priority = p; return nt }
	res := h.create(at(0), withTasks(newRun("r"),
		prio(task("q1", "A", at(0)), 0),
		prio(task("q1", "B", at(10*time.Second)), 5),
		prio(task("q1", "C", at(0)), 5),
		prio(task("q1", "D", at(time.Hour)), 0),
		prio(task("q2", "E", at(0)), 9),
		prio(task("q1", "F", at(0)), 0),
	))[0]
	byStep := map[string]*store.Task{}
	for _, tk := range res.Tasks {
		byStep[tk.Step] = tk
	}
	steps := func(ts []*store.Task) []string {
		var out []string
		for _, tk := range ts {
			out = append(out, tk.Step)
		}
		return out
	}

	now := at(10 * time.Second)
	got := h.claim(now, "w1", 10, 2*time.Hour, "q1")
	// Highest priority first, then oldest ready time, then oldest task; D
	// is not ready, E is in another queue.
	diff(t, "claim order", []string{"C", "B", "A", "F"}, steps(got))
	for _, tk := range got {
		want := *byStep[tk.Step]
		want.Owner, want.LeaseUntil, want.Claims, want.Token = "w1", now.Add(2*time.Hour), 1, tk.Token
		diff(t, "claimed task "+tk.Step, &want, tk)
	}
	// Leased tasks are not claimable while the lease lasts.
	if again := h.claim(now, "w2", 10, 30*time.Second, "q1"); len(again) != 0 {
		t.Fatalf("claimed leased tasks: %v", steps(again))
	}
	// Ready time is inclusive.
	diff(t, "claim at D's ready time", []string{"D"}, steps(h.claim(at(time.Hour), "w2", 10, time.Hour, "q1")))
	// Several queues.
	diff(t, "claim q1+q2", []string{"E"}, steps(h.claim(at(time.Hour), "w3", 10, time.Hour, "q1", "q2")))
	if got := h.claim(at(time.Hour), "w3", 10, time.Hour); len(got) != 0 {
		t.Fatalf("claim with no queues: %v", got)
	}
}

func testClaimLimit(t *testing.T, h *harness) {
	var ts []store.NewTask
	for i := range 5 {
		ts = append(ts, task("q", name(i), at(time.Duration(i)*time.Second)))
	}
	h.create(at(0), withTasks(newRun("r"), ts...))
	var got []string
	for _, n := range []int{2, 2, 2} {
		c := h.claim(at(time.Minute), "w", n, time.Minute, "q")
		if len(c) > n {
			t.Fatalf("claimed %d tasks with limit %d", len(c), n)
		}
		for _, tk := range c {
			got = append(got, tk.Step)
		}
	}
	diff(t, "claimed in three rounds", []string{name(0), name(1), name(2), name(3), name(4)}, got)
}

func testExpiredLease(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("r"), task("q", "a", at(0))))
	first := h.claim(at(0), "w1", 1, time.Minute, "q")[0]
	if first.Claims != 1 {
		t.Fatalf("claims = %d, want 1", first.Claims)
	}
	if got := h.claim(at(time.Minute-time.Microsecond), "w2", 1, time.Minute, "q"); len(got) != 0 {
		t.Fatalf("claimed before the lease expired: %v", got)
	}
	second := h.claim(at(time.Minute), "w2", 1, time.Minute, "q")
	if len(second) != 1 || second[0].ID != first.ID || second[0].Token == first.Token ||
		second[0].Claims != 2 || second[0].Owner != "w2" || !second[0].LeaseUntil.Equal(at(2*time.Minute)) {
		t.Fatalf("reclaim = %+v, want task %d, new token, claims 2, owner w2", second, first.ID)
	}
	if lost := h.heartbeat(at(5*time.Minute), first.Lease()); len(lost) != 1 || lost[0] != first.ID {
		t.Fatalf("old holder's heartbeat: lost %v", lost)
	}
	oldLease := first.Lease()
	res := h.update(at(61*time.Second), "r", &oldLease, &store.Update{Status: hephtype.StatusCompleted})
	wantErr(t, "old holder's completion", res.Err, store.ErrLeaseLost)
	// A third claim after the second lease expires: the token is new again.
	third := h.claim(at(2*time.Minute), "w3", 1, time.Minute, "q")
	if len(third) != 1 || third[0].Token == first.Token || third[0].Token == second[0].Token || third[0].Claims != 3 {
		t.Fatalf("third claim = %+v", third)
	}
	// An expired lease nobody claimed again still completes.
	h.create(at(0), withTasks(newRun("r2"), task("q2", "a", at(0))))
	l := h.claim(at(0), "w", 1, time.Minute, "q2")[0].Lease()
	if res := h.update(at(time.Hour), "r2", &l, &store.Update{}); res.Err != nil {
		t.Fatalf("completion of an expired, unclaimed lease: %v", res.Err)
	}
}

func testHeartbeat(t *testing.T, h *harness) {
	res := h.create(at(0), withTasks(newRun("r"), task("q", "1", at(0)), task("q", "2", at(0)), task("q", "3", at(0))))[0]
	c := h.claim(at(0), "w", 3, time.Minute, "q")
	if len(c) != 3 {
		t.Fatalf("claimed %d", len(c))
	}
	l1, l2, l3 := c[0].Lease(), c[1].Lease(), c[2].Lease()
	if lost := h.heartbeat(at(5*time.Minute), l1, l2); len(lost) != 0 {
		t.Fatalf("lost %v", lost)
	}
	// Only task 3's lease expired.
	got := h.claim(at(2*time.Minute), "w2", 10, time.Hour, "q")
	if len(got) != 1 || got[0].ID != l3.TaskID {
		t.Fatalf("claim at +2m = %v, want task %d only", got, l3.TaskID)
	}
	badToken := store.Lease{TaskID: l2.TaskID, Token: l2.Token + 12345}
	ghost := store.Lease{TaskID: res.Tasks[2].ID + 1000, Token: 1}
	lost := h.heartbeat(at(6*time.Minute), l1, l3, badToken, ghost)
	diff(t, "lost leases", sorted([]int64{l3.TaskID, l2.TaskID, ghost.TaskID}), lost)
	// l1 now lasts until +6m; l2 until +5m.
	if got := h.claim(at(5*time.Minute), "w3", 10, time.Hour, "q"); len(got) != 1 || got[0].ID != l2.TaskID {
		t.Fatalf("claim at +5m = %v, want task %d", got, l2.TaskID)
	}
	if got := h.claim(at(6*time.Minute), "w3", 10, time.Minute, "q"); len(got) != 1 || got[0].ID != l1.TaskID {
		t.Fatalf("claim at +6m = %v, want task %d", got, l1.TaskID)
	}
	if lost := h.heartbeat(at(time.Hour)); len(lost) != 0 {
		t.Fatalf("heartbeat of nothing lost %v", lost)
	}
}

func testReleaseTasks(t *testing.T, h *harness) {
	ctx := t.Context()
	h.create(at(0), withTasks(newRun("r"), task("q", "a", at(0))))
	first := h.claim(at(0), "w1", 1, time.Hour, "q")[0]
	if err := h.s.ReleaseTasks(ctx, []store.Lease{first.Lease()}); err != nil {
		t.Fatal(err)
	}
	second := h.claim(at(0), "w2", 1, time.Hour, "q")
	if len(second) != 1 || second[0].ID != first.ID || second[0].Token == first.Token || second[0].Claims != 2 {
		t.Fatalf("claim after release = %+v", second)
	}
	// Releasing a lease no longer held is ignored.
	if err := h.s.ReleaseTasks(ctx, []store.Lease{first.Lease(), {TaskID: first.ID + 99, Token: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := h.claim(at(0), "w3", 1, time.Hour, "q"); len(got) != 0 {
		t.Fatalf("a stale release freed the task: %v", got)
	}
	if lost := h.heartbeat(at(2*time.Hour), second[0].Lease()); len(lost) != 0 {
		t.Fatalf("holder lost its lease after a stale release: %v", lost)
	}
	// A released lease neither heartbeats nor completes.
	l := second[0].Lease()
	if err := h.s.ReleaseTasks(ctx, []store.Lease{l}); err != nil {
		t.Fatal(err)
	}
	if lost := h.heartbeat(at(2*time.Hour), l); len(lost) != 1 {
		t.Fatalf("heartbeat of a released lease: lost %v", lost)
	}
	res := h.update(at(time.Second), "r", &l, &store.Update{})
	wantErr(t, "completion of a released lease", res.Err, store.ErrLeaseLost)
	if err := h.s.ReleaseTasks(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func testCancelMatches(t *testing.T, h *harness) {
	type tk struct {
		Kind  store.TaskKind
		Step  string
		Index int
	}
	all := []tk{
		{store.TaskStep, "s1", -1},
		{store.TaskStep, "s2", 0}, {store.TaskStep, "s2", 1}, {store.TaskStep, "s2", 2},
		{store.TaskTimer, "s2", -1}, {store.TaskTimer, "s3", -1},
		{store.TaskDecision, "", -1},
	}
	for i, tc := range []struct {
		name   string
		cancel []store.TaskMatch
		keep   []tk
	}{
		{"one element", []store.TaskMatch{{Kind: store.TaskStep, Step: "s2", Index: 1}},
			[]tk{all[0], all[1], all[3], all[4], all[5], all[6]}},
		{"every element", []store.TaskMatch{{Kind: store.TaskStep, Step: "s2", Index: -1}},
			[]tk{all[0], all[4], all[5], all[6]}},
		{"every kind of a step", []store.TaskMatch{{Step: "s2", Index: -1}},
			[]tk{all[0], all[5], all[6]}},
		{"a kind", []store.TaskMatch{{Kind: store.TaskTimer, Index: -1}},
			[]tk{all[0], all[1], all[2], all[3], all[6]}},
		{"element 0 of every step", []store.TaskMatch{{Index: 0}},
			[]tk{all[0], all[2], all[3], all[4], all[5], all[6]}},
		{"everything", []store.TaskMatch{{Index: -1}}, nil},
		{"several", []store.TaskMatch{{Kind: store.TaskDecision, Index: -1}, {Step: "s1", Index: -1}, {Step: "s2", Index: 2}},
			[]tk{all[1], all[2], all[4], all[5]}},
		{"no match", []store.TaskMatch{{Step: "s9", Index: -1}}, all},
	} {
		queue := name(i)
		var nts []store.NewTask
		for _, x := range all {
			nts = append(nts, store.NewTask{Queue: queue, Kind: x.Kind, Step: x.Step, Index: x.Index, ReadyAt: at(0)})
		}
		runID, otherID := "run-"+queue, "other-"+queue
		h.create(at(0), withTasks(newRun(runID), nts...), withTasks(newRun(otherID), nts[1]))
		// The new task of the same update survives its Cancel.
		res := h.mustUpdate(at(time.Second), runID, nil, &store.Update{Cancel: tc.cancel,
			Tasks: []store.NewTask{{Queue: queue, Kind: store.TaskStep, Step: "s2", Index: 0, Attempt: 2, ReadyAt: at(0)}}})
		var got []tk
		var other, added bool
		for _, c := range h.claim(at(time.Hour), "w", 100, time.Minute, queue) {
			switch {
			case c.RunID == otherID:
				other = true
			case c.ID == res.Tasks[0].ID:
				added = true
			default:
				got = append(got, tk{c.Kind, c.Step, c.Index})
			}
		}
		key := func(a, b tk) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) }
		want := slices.Clone(tc.keep)
		slices.SortFunc(want, key)
		slices.SortFunc(got, key)
		diff(t, tc.name+": tasks left", want, got)
		if !other || !added {
			t.Fatalf("%s: other run's task there: %v; task added by the cancelling update there: %v", tc.name, other, added)
		}
	}
}

func testCancelLeased(t *testing.T, h *harness) {
	h.create(at(0), withTasks(newRun("r"), task("q", "a", at(0)), task("q", "b", at(0))))
	c := h.claim(at(0), "w", 2, time.Minute, "q")
	if len(c) != 2 {
		t.Fatalf("claimed %d", len(c))
	}
	h.mustUpdate(at(time.Second), "r", nil, &store.Update{Cancel: []store.TaskMatch{{Step: "a", Index: -1}}})
	var a, b store.Lease
	for _, tk := range c {
		if tk.Step == "a" {
			a = tk.Lease()
		} else {
			b = tk.Lease()
		}
	}
	diff(t, "lost after cancel", []int64{a.TaskID}, h.heartbeat(at(time.Hour), a, b))
	res := h.update(at(2*time.Second), "r", &a, &store.Update{History: []store.NewEvent{{Kind: hephtype.EventStepCompleted, Step: "a"}}})
	wantErr(t, "completion of a cancelled task", res.Err, store.ErrLeaseLost)
	if res := h.update(at(2*time.Second), "r", &b, &store.Update{}); res.Err != nil {
		t.Fatalf("completion of the other task: %v", res.Err)
	}
}

func testNextReady(t *testing.T, h *harness) {
	next := func(queues ...string) (time.Time, bool) {
		t.Helper()
		at, ok, err := h.s.NextReady(t.Context(), &store.NextReadyParams{Queues: queues})
		if err != nil {
			t.Fatal(err)
		}
		return at, ok
	}
	if _, ok := next("q1"); ok {
		t.Fatal("NextReady on an empty store: ok")
	}
	h.create(at(0), withTasks(newRun("r"),
		task("q1", "a", at(10*time.Minute)), task("q1", "b", at(5*time.Minute)), task("q2", "c", at(time.Minute))))
	check := func(what string, want time.Time, queues ...string) {
		t.Helper()
		got, ok := next(queues...)
		if !ok || !got.Equal(want) {
			t.Fatalf("%s: NextReady(%v) = %v, %v; want %v", what, queues, got, ok, want)
		}
	}
	check("one queue", at(5*time.Minute), "q1")
	check("two queues", at(time.Minute), "q1", "q2")
	if _, ok := next("q3"); ok {
		t.Fatal("NextReady of an empty queue: ok")
	}
	if _, ok := next(); ok {
		t.Fatal("NextReady of no queues: ok")
	}
	// A leased task counts with its lease expiry.
	c := h.claim(at(2*time.Minute), "w", 1, 30*time.Second, "q2")
	check("leased", at(2*time.Minute+30*time.Second), "q2")
	check("leased and queued", at(2*time.Minute+30*time.Second), "q1", "q2")
	// Past ready times are returned as they are.
	if err := h.s.ReleaseTasks(t.Context(), []store.Lease{c[0].Lease()}); err != nil {
		t.Fatal(err)
	}
	check("released", at(time.Minute), "q2")
}
