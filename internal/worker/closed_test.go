package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
	"github.com/hephaestus-go/hephaestus/internal/worker"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// A claim loop whose committer was closed under it ends (its claims fail
// with commit.ErrClosed) instead of claiming again and again: it used to
// spin on the standing claim, or retry with backoff for ever.
func TestClaimLoopEndsWhenCommitterClosed(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hub := telemetry.New(nil)
	stopped := make(chan struct{}, 1)
	hub.Subscribe(func(e telemetry.Event) {
		if e.Kind == telemetry.WorkerStopped {
			stopped <- struct{}{}
		}
	})
	cm := commit.New(&commit.Config{Store: st, Telemetry: hub})
	cm.Close()
	exec := worker.Kinds{}
	p := worker.New(&worker.Config{Store: st, Telemetry: hub, Committer: cm, Executor: exec, Queues: map[string]int{"q": 2}})
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the claim loop kept claiming from a closed committer")
	}
	p.Stop(ctx)
}
