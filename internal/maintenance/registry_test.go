package maintenance_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/internal/maintenance"
	"github.com/hephaestus-go/hephaestus/store"
)

// From Start to Stop the process keeps a record of itself in the worker
// registry: its served queues (concurrency > 0, sorted), the handlers it
// has (as Config.Handlers returns them at each refresh), where it runs,
// refreshed every half lease and live for two leases; Stop removes it.
func TestRegistryRecordsTheWorkerUntilStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var handlers atomic.Pointer[[]string]
	hs := []string{"flow:f@1", "workflow:w"}
	handlers.Store(&hs)
	s := e.service(func(c *maintenance.Config) {
		c.WorkerID = "w1"
		c.Queues = map[string]int{"zeta": 3, "alpha": 1, "idle": 0, "mid": 2}
		c.Handlers = func() []string { return *handlers.Load() }
	})
	if ws := e.workers(); len(ws) != 0 {
		t.Fatalf("workers before Start: %+v", ws)
	}
	s.Start(context.Background())
	e.waitAsleep(1)
	host, _ := os.Hostname()
	want := &store.Worker{
		ID: "w1", Queues: []string{"alpha", "mid", "zeta"}, Handlers: []string{"flow:f@1", "workflow:w"},
		Host: host, PID: os.Getpid(), StartedAt: t0, SeenAt: t0, ExpiresAt: t0.Add(2 * lease),
	}
	if d := cmp.Diff([]*store.Worker{want}, e.workers()); d != "" {
		t.Fatalf("workers after Start (-want +got):\n%s", d)
	}

	// Handlers registered later are in the next refresh.
	hs2 := []string{"flow:f@1", "flow:f@2", "workflow:w"}
	handlers.Store(&hs2)
	e.step(tick, 1)
	now := e.clk.Now()
	want.Handlers, want.SeenAt, want.ExpiresAt = hs2, now, now.Add(2*lease)
	if d := cmp.Diff([]*store.Worker{want}, e.workers()); d != "" {
		t.Fatalf("workers after a refresh (-want +got):\n%s", d)
	}

	// Refreshed, the record stays live long after its first expiry.
	for range 20 {
		e.step(tick, 1)
		ws := e.workers()
		if len(ws) != 1 || ws[0].ID != "w1" || !ws[0].SeenAt.Equal(e.clk.Now()) {
			t.Fatalf("workers at %v: %+v, want w1 refreshed then", e.clk.Now(), ws)
		}
	}

	s.Stop()
	// Removed, not merely expired: it would be live now.
	if ws := e.workers(); len(ws) != 0 {
		t.Fatalf("workers after Stop: %+v, want none", ws)
	}
	if msgs := e.log.unexpected(); len(msgs) > 0 {
		t.Errorf("unexpected warnings or errors logged: %q", msgs)
	}
}

// A process without served queues still records itself (with no queues).
func TestRegistryWithoutQueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service(func(c *maintenance.Config) {
		c.WorkerID = "front"
		c.Queues = map[string]int{"idle": 0}
	})
	s.Start(context.Background())
	e.waitAsleep(1)
	ws := e.workers()
	if len(ws) != 1 || ws[0].ID != "front" || len(ws[0].Queues) != 0 || len(ws[0].Handlers) != 0 {
		t.Fatalf("workers: %+v, want front with no queues and no handlers", ws)
	}
	s.Stop()
	if ws := e.workers(); len(ws) != 0 {
		t.Fatalf("workers after Stop: %+v", ws)
	}
}

// The loops run until Stop, not until the context given to Start ends.
func TestLoopsOutliveStartContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service(nil)
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	e.waitAsleep(1)
	cancel()
	for range 3 {
		e.step(tick, 1) // fails if the registry loop ended
	}
	ws := e.workers()
	if len(ws) != 1 || !ws[0].SeenAt.Equal(e.clk.Now()) {
		t.Fatalf("workers after the Start context ended: %+v, want the record refreshed at %v", ws, e.clk.Now())
	}
	s.Stop()
	if ws := e.workers(); len(ws) != 0 {
		t.Fatalf("workers after Stop: %+v", ws)
	}
}

// Stop before Start does nothing; a second Start starts no second set of
// loops; Stop may be called twice.
func TestStartAndStopTwice(t *testing.T) {
	t.Parallel()
	for _, retention := range []time.Duration{0, time.Hour} {
		t.Run("retention="+retention.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			s := e.service(func(c *maintenance.Config) { c.Retention = retention })
			loops := 1
			if retention > 0 {
				loops = 2
			}
			s.Stop()
			if n := e.clk.Waiters(); n != 0 {
				t.Fatalf("Stop before Start: %d goroutines wait on the clock", n)
			}
			s.Start(context.Background())
			s.Start(context.Background())
			e.waitAsleep(loops)
			s.Stop()
			// Every loop waits on the clock (once, as it was not advanced)
			// before it returns, so the waits left count the loops started.
			if n := e.clk.Waiters(); n != loops {
				t.Fatalf("after Start twice, %d loops ran, want %d", n, loops)
			}
			s.Stop()
			if ws := e.workers(); len(ws) != 0 {
				t.Fatalf("workers after Stop: %+v", ws)
			}
		})
	}
}
