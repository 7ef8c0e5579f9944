package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/benchrun"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
)

// The events benchmarks of docs/benchmarks.md (issue 33), run by
// BenchmarkSQLite/<mode>/events and BenchmarkPostgres/events, next to
// the raw commit rate of the same run (raw_commit):
//
//	send:   1,000 events (distinct ids, about 200 bytes of JSON data each)
//	        sent by 16 concurrent goroutines to an event name with 3
//	        declared triggers, on a client that is not started (no trigger
//	        loop, no workers): events/s accepted, the SendEvent calls only.
//	        The same sends to a name without triggers, on a store of its
//	        own: events-0trig/s.
//	fanout: the same events on a started client, timed from the first send
//	        until every firing has started its run (3,000 runs of a
//	        one-step flow that does nothing, which the client's workers
//	        run meanwhile): events/s and runs/s, and how long after the
//	        last send the last run started (lag-ms).
//
// Every figure is a rate of b.N rounds, each on a fresh store; run with
// -benchtime 1x -count 3 and take the median.

const (
	eventsPerRound = 1000
	eventSenders   = 16
	eventTriggers  = 3
	eventTarget    = "evt_target"
	eventName      = "bench.order"
)

// benchEventFlow is the triggers' target: one step that does nothing.
func benchEventFlow() *flow.Flow {
	fb := flow.New(eventTarget)
	flow.Step(fb, "noop", func(ctx context.Context, in json.RawMessage) (int, error) { return len(in), nil })
	return fb.MustBuild()
}

// benchEventData returns the data of the events of a round, about 200
// bytes of JSON each.
func benchEventData() []json.RawMessage {
	out := make([]json.RawMessage, eventsPerRound)
	for i := range out {
		out[i] = json.RawMessage(fmt.Sprintf(`{"order":%d,"amount":%d.50,"currency":"EUR",`+
			`"customer":{"id":"c-%06d","email":"customer-%06d@example.com","tier":"gold"},`+
			`"items":[{"sku":"SKU-%05d","qty":2},{"sku":"SKU-%05d","qty":1}],"note":"urgent"}`,
			i, 100+i%900, i%5000, i%5000, i%10000, (i+7)%10000))
	}
	return out
}

// benchEventClient opens a store and a client that runs the target flow
// and declares triggers triggers on eventName; it starts the client when
// start is set.
func benchEventClient(b *testing.B, open func(b *testing.B) store.Store, triggers int, start bool) *heph.Client {
	c, err := heph.New(&heph.Config{Store: open(b), Queues: map[string]int{"default": 64}, Logger: e2e.QuietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(benchEventFlow()); err != nil {
		b.Fatal(err)
	}
	ts := make([]*heph.Trigger, triggers)
	for i := range ts {
		ts[i] = &heph.Trigger{Name: fmt.Sprintf("t%d", i+1), Event: eventName, Target: heph.TargetFlow, TargetName: eventTarget}
	}
	if len(ts) > 0 {
		if err := c.DeclareTriggers(context.Background(), ts...); err != nil {
			b.Fatal(err)
		}
	}
	// The first calls pay for connections and statement caches.
	if _, err := c.SendEvent(context.Background(), "bench.warmup", map[string]int{"n": 1}, nil); err != nil {
		b.Fatal(err)
	}
	if start {
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// sendEvents sends the events of round from eventSenders goroutines and
// returns their ids.
func sendEvents(b *testing.B, c *heph.Client, name string, round int, data []json.RawMessage) []string {
	ids := make([]string, len(data))
	next := make(chan int, len(data))
	for i := range data {
		ids[i] = fmt.Sprintf("evt-%d-%06d", round, i)
		next <- i
	}
	close(next)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range eventSenders {
		wg.Go(func() {
			for i := range next {
				e, err := c.SendEvent(ctx, name, data[i], &heph.SendEventOptions{ID: ids[i]})
				if err == nil && e.Duplicate {
					err = fmt.Errorf("event %s: a duplicate", ids[i])
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return ids
}

// benchEvents runs send and fanout on the stores open returns.
func benchEvents(b *testing.B, open func(b *testing.B) store.Store) {
	b.Run("send", func(b *testing.B) { benchEventSend(b, open) })
	b.Run("fanout", func(b *testing.B) { benchEventFanout(b, open) })
}

func benchEventSend(b *testing.B, open func(b *testing.B) store.Store) {
	data := benchEventData()
	var with, without time.Duration
	b.ResetTimer()
	for round := range b.N {
		for _, triggers := range []int{eventTriggers, 0} {
			b.StopTimer()
			c := benchEventClient(b, open, triggers, false)
			b.StartTimer()
			t0 := time.Now()
			sendEvents(b, c, eventName, round, data)
			if triggers > 0 {
				with += time.Since(t0)
			} else {
				without += time.Since(t0)
			}
			_ = c.Stop(context.Background())
		}
	}
	b.ReportMetric(float64(eventsPerRound*b.N)/with.Seconds(), "events/s")
	b.ReportMetric(float64(eventsPerRound*b.N)/without.Seconds(), "events-0trig/s")
}

func benchEventFanout(b *testing.B, open func(b *testing.B) store.Store) {
	const runs = eventsPerRound * eventTriggers
	data := benchEventData()
	var total, lag time.Duration
	b.ResetTimer()
	for round := range b.N {
		b.StopTimer()
		c := benchEventClient(b, open, eventTriggers, true)
		var started atomic.Int64
		all := make(chan struct{})
		unsubscribe := c.Subscribe(func(e heph.Event) {
			if e.Kind == heph.RunStarted && e.Workflow == eventTarget && started.Add(1) == runs {
				close(all)
			}
		})
		b.StartTimer()
		t0 := time.Now()
		ids := sendEvents(b, c, eventName, round, data)
		sent := time.Now()
		select {
		case <-all:
		case <-time.After(10 * time.Minute):
			b.Fatalf("%d of %d runs started", started.Load(), runs)
		}
		end := time.Now()
		total += end.Sub(t0)
		lag += end.Sub(sent)
		b.StopTimer()
		checkFirings(b, c, ids)
		unsubscribe()
		if n := started.Load(); n != runs {
			b.Fatalf("%d runs started for %d firings", n, runs)
		}
		_ = c.Stop(context.Background())
		b.StartTimer()
	}
	b.ReportMetric(float64(eventsPerRound*b.N)/total.Seconds(), "events/s")
	b.ReportMetric(float64(runs*b.N)/total.Seconds(), "runs/s")
	b.ReportMetric(float64(lag.Microseconds())/1000/float64(b.N), "lag-ms")
}

// checkFirings waits (untimed) until every firing of the events ended,
// and fails unless each started its own run.
func checkFirings(b *testing.B, c *heph.Client, ids []string) {
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	runs := map[string]bool{}
	for _, id := range ids {
		for {
			fs, err := c.EventFirings(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			pending := len(fs) != eventTriggers
			for _, f := range fs {
				pending = pending || f.Status == heph.FiringPending
			}
			if !pending {
				for _, f := range fs {
					if f.Status != heph.FiringStarted || runs[f.RunID] {
						b.Fatalf("event %s, trigger %s: %s run %q %s", id, f.Trigger, f.Status, f.RunID, f.Error)
					}
					runs[f.RunID] = true
				}
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("event %s: firings %+v still pending after the runs started", id, fs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// benchPostgresRawCommit is PostgreSQL's reference, measured in the same
// run as the engine's figures: one-row autocommit INSERTs on a database of
// its own, from 1 connection (commits/s) and from as many as the event
// senders (commits-16conn/s), 2 seconds each per b.N.
func benchPostgresRawCommit(b *testing.B) {
	dsn := pgtest.DSN(b)
	d := time.Duration(b.N) * 2 * time.Second
	one, err := benchrun.RawPostgres(context.Background(), dsn, "", 1, d)
	if err != nil {
		b.Fatal(err)
	}
	many, err := benchrun.RawPostgres(context.Background(), dsn, "", eventSenders, d)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(one, "commits/s")
	b.ReportMetric(many, fmt.Sprintf("commits-%dconn/s", eventSenders))
}
