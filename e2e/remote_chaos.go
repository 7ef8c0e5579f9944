package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Remote workers that misbehave: several compete for the remote steps of
// many runs, and each task is completed, failed (retryable), or abandoned
// (the worker "dies": no heartbeat, no report) at random, while the fake
// clock runs on so that abandoned leases expire and the tasks are claimed
// again. Every run must complete, each step exactly once in its history,
// with the output of the claim that completed it; the abandoned tokens,
// reported afterwards, must all be refused.
func testRemoteChaos(t *testing.T, b Backend) {
	const runs, workers = 20, 4
	fc := clock.NewFake(time.Now())
	e := newEnv(t, b, func(c *heph.Config) { c.Clock = fc }, remoteOnly("remote-chaos", flow.Timeout(1000*time.Hour),
		flow.Retry(flow.RetryPolicy{MaxAttempts: 100, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})))
	ctx := ctxT(t)
	var ids []string
	for range runs {
		r, err := e.c.StartRun(ctx, "remote-chaos", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	l := &remoteChaosLedger{completed: map[string]string{}}
	for i := range workers {
		wg.Go(func() { l.work(t, wctx, e, i) })
	}
	// Time runs on: abandoned leases expire, retries come due, and the
	// long polls wake.
	done := make(chan struct{})
	go func() {
		defer close(done)
		advanceUntilEnded(t, ctx, e, fc, ids)
	}()
	<-done
	stop()
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, id := range ids {
		r, err := e.c.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, r, heph.StatusCompleted)
		h := e.history(id)
		if n := count(h, hephtype.EventStepCompleted, "work"); n != 1 {
			t.Fatalf("run %s: step completed %d times", id, n)
		}
		l.mu.Lock()
		want := l.completed[id]
		l.mu.Unlock()
		wantJSON(t, r.Output, `{"work":`+want+`}`)
	}
	for _, tok := range l.abandoned {
		if err := e.c.CompleteRemote(ctx, tok, json.RawMessage(`"zombie"`)); !errors.Is(err, heph.ErrTaskLost) {
			t.Fatalf("a dead worker's late completion: %v, want ErrTaskLost", err)
		}
	}
	t.Logf("%d runs, %d abandoned claims, %d retryable failures", runs, len(l.abandoned), l.failed.Load())
}

// remoteChaosLedger is what the workers of testRemoteChaos did.
type remoteChaosLedger struct {
	mu        sync.Mutex
	abandoned []string          // the tokens of the tasks a worker "died" with
	completed map[string]string // run -> the output its completion was accepted with
	failed    atomic.Int64
}

// work is remote worker i: until ctx ends, it claims tasks and completes,
// fails (retryable) or abandons each at random.
func (l *remoteChaosLedger) work(t *testing.T, wctx context.Context, e *env, i int) {
	id := "chaos-" + string(rune('a'+i))
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	claim := &heph.RemoteClaim{WorkerID: id, Actions: []string{"work"}, Max: 3, Lease: time.Minute, Wait: 30 * time.Second}
	for wctx.Err() == nil {
		ts, err := e.c.ClaimRemote(wctx, claim)
		if err != nil {
			if wctx.Err() == nil {
				t.Errorf("worker %s: claim: %v", id, err)
			}
			return
		}
		for _, tk := range ts {
			switch p := rng.IntN(10); {
			case p < 2: // dies with the task
				l.mu.Lock()
				l.abandoned = append(l.abandoned, tk.Token)
				l.mu.Unlock()
			case p < 3:
				err := e.c.FailRemote(wctx, tk.Token, "flaky", true, nil)
				switch {
				case err == nil:
					l.failed.Add(1)
				case !errors.Is(err, heph.ErrTaskLost) && wctx.Err() == nil:
					t.Errorf("worker %s: fail: %v", id, err)
				}
			default:
				l.complete(t, wctx, e, id, tk)
			}
		}
	}
}

// complete completes a task with the worker's id as its output, and
// records the run's accepted output.
func (l *remoteChaosLedger) complete(t *testing.T, wctx context.Context, e *env, id string, tk *heph.RemoteTask) {
	out := `"` + id + `"`
	err := e.c.CompleteRemote(wctx, tk.Token, json.RawMessage(out))
	switch {
	case err == nil:
		l.mu.Lock()
		if prev, dup := l.completed[tk.RunID]; dup {
			t.Errorf("run %s completed twice: by %s and %s", tk.RunID, prev, out)
		}
		l.completed[tk.RunID] = out
		l.mu.Unlock()
	case !errors.Is(err, heph.ErrTaskLost) && wctx.Err() == nil:
		t.Errorf("worker %s: complete: %v", id, err)
	}
}

// advanceUntilEnded moves the fake clock on, a second at a time, until
// each of the runs has ended.
func advanceUntilEnded(t *testing.T, ctx context.Context, e *env, fc *clock.Fake, ids []string) {
	for _, id := range ids {
		for {
			r, err := e.c.GetRun(ctx, id)
			if err != nil {
				t.Error(err)
				return
			}
			if r.Status.Terminal() {
				break
			}
			fc.Advance(time.Second)
			select {
			case <-ctx.Done():
				t.Errorf("run %s is still %s", id, r.Status)
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
}
