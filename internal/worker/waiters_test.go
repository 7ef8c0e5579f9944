package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// A waiter outside the claim loops (a remote worker's long poll) is woken
// by a local commit that makes a task of its queues ready, and keeps its
// poll interval; a task of another queue does not wake it, and the poll
// that runs out doubles the interval, up to PollInterval; a task due
// before the poll would end wakes it at its ready time.
func TestWaiters(t *testing.T) {
	r := newRig(t, rigOptions{}, blocking(make(chan *call, 1)))
	ctx := context.Background()
	type result struct {
		poll time.Duration
		err  error
	}
	wait := func(poll time.Duration, deadline time.Time) <-chan result {
		w := r.pool.Subscribe([]string{"remote"})
		out := make(chan result, 1)
		go func() {
			defer r.pool.Unsubscribe(w)
			p, err := r.pool.WaitReady(ctx, w, []string{handler}, poll, deadline)
			out <- result{p, err}
		}()
		return out
	}

	// Woken by a commit; a commit for another queue before it changes
	// nothing.
	before := r.clk.Now()
	got := wait(400*time.Millisecond, t0.Add(time.Hour))
	r.clk.waitRecorded(t, "the waiter's poll", func(untils []time.Time, _ []time.Duration) bool { return len(untils) > 0 })
	r.createRun("other", stepTask("elsewhere", "a"))
	select {
	case res := <-got:
		t.Fatalf("a task of another queue woke the waiter: %+v", res)
	default:
	}
	r.createRun("mine", stepTask("remote", "a"))
	if res := recv(t, "the wake-up", got); res.err != nil || res.poll != 400*time.Millisecond {
		t.Fatalf("woken: %+v; want the poll kept at 400ms", res)
	}
	if !r.clk.Now().Equal(before) {
		t.Fatal("the clock moved")
	}

	// Not woken: the poll runs out and doubles, up to PollInterval (1s).
	// The task left ready above is the store's next ready time, in the
	// past: it does not shorten the wait.
	r.clk.forget()
	got = wait(800*time.Millisecond, t0.Add(time.Hour))
	r.clk.waitRecorded(t, "the waiter's poll", func(untils []time.Time, _ []time.Duration) bool { return len(untils) > 0 })
	r.clk.Advance(time.Second) // past the jittered 800ms (at most 960ms)
	if res := recv(t, "the poll's end", got); res.err != nil || res.poll != time.Second {
		t.Fatalf("after the poll: %+v; want 1s (800ms doubled, capped)", res)
	}

	// A claim of the ready task leaves the store's next time at the
	// lease's end, earlier than the poll: the waiter wakes then.
	ts, err := r.db.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"remote"}, Handlers: []string{handler}, Owner: "x", Limit: 10,
		LeaseFor: 10 * time.Millisecond, Now: r.clk.Now()})
	if err != nil || len(ts) != 1 {
		t.Fatalf("claim: %v, %v", ts, err)
	}
	r.clk.forget()
	got = wait(time.Second, t0.Add(time.Hour))
	leaseEnd := ts[0].LeaseUntil
	r.clk.waitUntil(t, leaseEnd)
	r.clk.Advance(10 * time.Millisecond)
	if res := recv(t, "the wake-up at the lease's end", got); res.err != nil {
		t.Fatal(res.err)
	}

	// The deadline bounds the wait.
	got = wait(time.Second, r.clk.Now())
	if res := recv(t, "the deadline", got); res.err != nil {
		t.Fatal(res.err)
	}
}

// forget drops the waits recorded so far.
func (c *spyClock) forget() {
	c.mu.Lock()
	c.untils, c.afters = nil, nil
	c.mu.Unlock()
}
