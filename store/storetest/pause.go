package storetest

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// ids lists the runs and steps of tasks, for messages.
func taskSteps(ts []*store.Task) []string {
	out := make([]string, len(ts))
	for i, tk := range ts {
		out[i] = tk.RunID + "/" + tk.Step
	}
	return out
}

// testPauseClaim: the tasks of a paused run are not claimed (on a plain
// queue and on a controlled one), nor counted by NextReady, also once due;
// a task leased before the pause commits; an unpause makes them
// claimable; a pause that releases takes the leases from their holders;
// a run that finishes is no longer paused.
func testPauseClaim(t *testing.T, h *harness) {
	ctx := t.Context()
	h.putQueue(at(0), store.Queue{Name: "cq", MaxRunning: 10})
	h.create(at(0),
		withTasks(newRun("p"), task("q", "running", at(0)), task("q", "timer", at(time.Minute)), task("cq", "controlled", at(0))),
		withTasks(newRun("free"), task("q", "free", at(2*time.Minute))))
	running := h.claim(at(0), "w1", 1, time.Hour, "q")
	if len(running) != 1 || running[0].Step != "running" {
		t.Fatalf("claimed %v, want p/running", taskSteps(running))
	}
	pause := &store.Pause{By: "alice", At: at(time.Second)}
	r := h.mustUpdate(at(time.Second), "p", nil, &store.Update{Pause: pause,
		History: []store.NewEvent{{Kind: hephtype.EventRunPaused, Name: "alice"}}}).Run
	diff(t, "paused run", pause, r.Paused)
	diff(t, "paused run as read", pause, h.get("p").Paused)

	// Due or not, none of p's tasks is claimed or counted.
	next, ok, err := h.s.NextReady(ctx, &store.NextReadyParams{Queues: []string{"q", "cq"}})
	if err != nil || !ok || !next.Equal(at(2*time.Minute)) {
		t.Fatalf("NextReady while p is paused: %v %v %v, want the free run's %v", next, ok, err, at(2*time.Minute))
	}
	if ts := h.claim(at(3*time.Minute), "w2", 10, time.Hour, "q", "cq"); len(ts) != 1 || ts[0].RunID != "free" {
		t.Fatalf("claimed %v while p is paused, want free/free only", taskSteps(ts))
	}
	if ts := h.claim(at(3*time.Minute), "w2", 10, time.Hour, "cq"); len(ts) != 0 {
		t.Fatalf("claimed %v of a controlled queue while p is paused", taskSteps(ts))
	}
	// The task leased before the pause commits.
	lease := running[0].Lease()
	h.mustUpdate(at(4*time.Minute), "p", &lease, &store.Update{History: marker("done")})

	r = h.mustUpdate(at(5*time.Minute), "p", nil, &store.Update{Unpause: true,
		History: []store.NewEvent{{Kind: hephtype.EventRunUnpaused, Name: "bob"}}}).Run
	if r.Paused != nil || h.get("p").Paused != nil {
		t.Fatalf("unpaused run: %+v", r.Paused)
	}
	ts := h.claim(at(5*time.Minute), "w3", 10, time.Hour, "q", "cq")
	if len(ts) != 2 {
		t.Fatalf("claimed %v after unpause, want p/timer and p/controlled", taskSteps(ts))
	}

	// A pause that releases: the holders lose their leases.
	for _, tk := range ts {
		if tk.RunID != "p" {
			t.Fatalf("claimed %v", taskSteps(ts))
		}
	}
	h.mustUpdate(at(6*time.Minute), "p", nil, &store.Update{Pause: &store.Pause{At: at(6 * time.Minute), CancelRunning: true}, Release: true})
	leases := []store.Lease{ts[0].Lease(), ts[1].Lease()}
	if lost := h.heartbeat(at(7*time.Minute), leases...); len(lost) != 2 {
		t.Fatalf("heartbeat of released tasks: lost %v, want both", lost)
	}
	res := h.update(at(7*time.Minute), "p", &leases[0], &store.Update{History: marker("late")})
	wantErr(t, "commit of a released task", res.Err, store.ErrLeaseLost)
	if got := h.claim(at(7*time.Minute), "w4", 10, time.Hour, "q", "cq"); len(got) != 0 {
		t.Fatalf("claimed %v while paused again", taskSteps(got))
	}
	h.mustUpdate(at(8*time.Minute), "p", nil, &store.Update{Unpause: true})
	if got := h.claim(at(8*time.Minute), "w4", 10, time.Hour, "q", "cq"); len(got) != 2 {
		t.Fatalf("claimed %v after the second unpause, want the two released tasks", taskSteps(got))
	}

	// A finished run is no longer paused; pause and unpause at once is
	// refused.
	h.mustUpdate(at(9*time.Minute), "free", nil, &store.Update{Pause: &store.Pause{At: at(9 * time.Minute)}})
	if r := h.mustUpdate(at(10*time.Minute), "free", nil, &store.Update{Status: hephtype.StatusCancelled}).Run; r.Paused != nil || h.get("free").Paused != nil {
		t.Fatalf("a cancelled run stays paused: %+v", r.Paused)
	}
	res = h.update(at(10*time.Minute), "p", nil, &store.Update{Pause: &store.Pause{At: at(10 * time.Minute)}, Unpause: true})
	if res.Err == nil {
		t.Fatal("pause and unpause at once: accepted")
	}
}
