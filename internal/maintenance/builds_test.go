package maintenance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/maintenance"
	"github.com/hephaestus-go/hephaestus/store"
)

// With a RecordInterval I shorter than half a lease, the record carries
// the build, is refreshed at least every I and counts as live for 2I: a
// process that dies right after a refresh stops counting within two
// intervals (the record is not listed at its last refresh + 2I).
func TestRegistryLivenessWithinTwoIntervals(t *testing.T) {
	t.Parallel()
	const interval = 5 * time.Second
	e := newEnv(t)
	s := e.service(func(c *maintenance.Config) {
		c.WorkerID, c.BuildID, c.RecordInterval = "w1", "b7", interval
		c.Queues = map[string]int{"q": 1}
	})
	s.Start(context.Background())
	e.waitAsleep(1)
	ws := e.workers()
	if len(ws) != 1 || ws[0].BuildID != "b7" || !ws[0].ExpiresAt.Equal(t0.Add(2*interval)) {
		t.Fatalf("workers after Start: %+v, want w1 of build b7 expiring at %v", ws, t0.Add(2*interval))
	}
	for range 10 {
		// The loop wakes within an interval (a jitter makes it sooner).
		e.step(interval, 1)
		ws := e.workers()
		now := e.clk.Now()
		if len(ws) != 1 || now.Sub(ws[0].SeenAt) >= interval || !ws[0].ExpiresAt.Equal(ws[0].SeenAt.Add(2*interval)) {
			t.Fatalf("workers at %v: %+v, want w1 seen within %v, live for two intervals", now, ws, interval)
		}
		gone, err := e.st.ListWorkers(context.Background(), &store.ListWorkersParams{Now: ws[0].SeenAt.Add(2 * interval)})
		if err != nil || len(gone) != 0 {
			t.Fatalf("workers two intervals after the last refresh: %+v, %v; want none", gone, err)
		}
	}
	s.Stop()
}

// A decision task pinned to a build that no live worker has is marked
// unserved with a message naming the workflow and the build.
func TestUnservedNamesTheBuild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	unservedService(e)
	dec := store.NewTask{Queue: "q", Kind: store.TaskDecision, Index: -1, Attempt: 1, Handler: store.WorkflowBuildHandler("orders", "b1")}
	e.create(newRun("pinned", hephtype.StatusPending, dec))
	e.tickUntil("the pinned run is marked", func() bool { return e.marked("pinned") })
	msg := e.get("pinned").Condition.Message
	if !strings.Contains(msg, `workflow "orders" build b1`) || !strings.Contains(msg, "decision") {
		t.Fatalf("condition message %q, want it to name workflow \"orders\" build b1", msg)
	}
}
