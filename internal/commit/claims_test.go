package commit_test

// Tests of three faults found when the committer got its own package, and
// fixed: each states what the documentation promises.

import (
	"errors"
	"testing"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/store"
)

// Request.Update is "the last Update that Decide returned", and runsEnded
// relies on it to tell a change that ends a run from a stale one: it must
// be recorded for SubmitAll's changes too, or an update that ends a run
// through SubmitAll emits no end event, wakes no WaitRun caller, and
// AfterCommit never sees its Update.Cancel.
func TestSubmitAllRecordsUpdate(t *testing.T) {
	ctx := t.Context()
	hub := telemetry.New(nil)
	evs := record(t, hub)
	c := newCommitter(t, commit.Config{Store: openStore(t), Telemetry: hub})
	if _, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning)}); err != nil {
		t.Fatal(err)
	}
	reqs, err := c.SubmitAll(ctx, []store.Change{{RunID: "r1", Decide: complete}})
	if err != nil || reqs[0].Err != nil {
		t.Fatalf("SubmitAll: %v, %v", err, reqs[0].Err)
	}
	if reqs[0].Res.Run.Status != hephtype.StatusCompleted {
		t.Fatalf("run after SubmitAll: %+v", reqs[0].Res.Run)
	}
	if reqs[0].Update == nil {
		t.Error("Request.Update of a SubmitAll change is nil, want Decide's update")
	}
	if ended := evs.of(telemetry.RunCompleted); len(ended) != 1 {
		t.Errorf("%d RunCompleted events for a run SubmitAll completed, want 1", len(ended))
	}
}

// Close promises that "later submissions fail with ErrClosed": a Claim
// made after Close is served at once with ErrClosed, not left in the map of
// standing claims that no loop will serve again (its caller would hang).
func TestClaimAfterClose(t *testing.T) {
	c := newCommitter(t, commit.Config{Store: openStore(t)})
	if _, err := c.Submit(t.Context(), store.Change{Create: newRun("r1", hephtype.StatusRunning)}); err != nil {
		t.Fatal(err)
	}
	c.Close() // the loops have returned: nothing will serve a claim now
	cr := c.Claim("q", 1, true)
	if !isClosed(cr.Done()) || !errors.Is(cr.Err, commit.ErrClosed) {
		t.Fatalf("claim after Close: done %v, err %v; want done with ErrClosed", isClosed(cr.Done()), cr.Err)
	}
}

// A second Claim of the same queue replaces the first in the map of
// standing claims: the first is served with nothing, so that Withdraw's
// false ("its Done channel will close") holds and its caller never hangs.
func TestReplacedClaimIsOrphaned(t *testing.T) {
	ctx := t.Context()
	c := newCommitter(t, commit.Config{Store: openStore(t), Clock: clock.NewFake(t0)})
	first := c.Claim("q", 1, false)
	second := c.Claim("q", 1, false)
	withdrawn := c.Withdraw(first)
	// A transaction runs: it serves the standing claims.
	if _, err := c.Submit(ctx, store.Change{Create: newRun("r1", hephtype.StatusRunning, readyTask("q", "s", "", 0))}); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, second.Done(), "the second claim")
	c.Close() // no transaction will ever run again
	if !withdrawn && !isClosed(first.Done()) {
		t.Fatal("Withdraw of the replaced claim returned false, yet its Done never closed")
	}
}
