package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// Flow control end to end (docs/flow-control.md): concurrency keys across
// processes, a rate limit over a minute of fake time, fairness between a
// flooding key and a trickling one, and pause/resume.

type fcInput struct {
	Tenant string `json:"tenant"`
	N      int    `json:"n"`
}

// fcFlow is one step that holds its slot for hold (real time) and takes
// its run's concurrency key from the input's tenant.
func fcFlow(hold time.Duration) *flow.Flow {
	b := flow.New("fc").ConcurrencyKeyFrom("tenant")
	flow.Step(b, "work", func(ctx context.Context, in fcInput) (int, error) {
		if hold > 0 {
			select {
			case <-time.After(hold):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return in.N, nil
	})
	return b.MustBuild()
}

// fcStart is a step's start and end as its run's history records them:
// the attempt's start time (step_started) and its completion's commit
// time, and the run's key.
type fcStart struct {
	key        string
	start, end time.Time
}

// fcStarts reads the starts of the completed runs of flow fc.
func fcStarts(t *testing.T, ctx context.Context, st store.Store) []fcStart {
	t.Helper()
	var out []fcStart
	var cursor string
	for {
		page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "fc", Statuses: []hephtype.RunStatus{heph.StatusCompleted}, Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			h, err := st.History(ctx, &store.HistoryParams{RunID: r.ID})
			if err != nil {
				t.Fatal(err)
			}
			s := fcStart{key: r.ConcurrencyKey}
			for _, ev := range h {
				switch ev.Kind {
				case hephtype.EventStepStarted:
					var d struct {
						StartedAt time.Time `json:"started_at"`
					}
					if err := json.Unmarshal(ev.Data, &d); err != nil {
						t.Fatal(err)
					}
					s.start = d.StartedAt
				case hephtype.EventStepCompleted:
					s.end = ev.At
				}
			}
			if s.start.IsZero() || s.end.IsZero() {
				t.Fatalf("run %s: no step_started or step_completed:\n%+v", r.ID, h)
			}
			out = append(out, s)
		}
		if cursor = page.Next; cursor == "" {
			return out
		}
	}
}

// maxOverlap is the most intervals of key open at once (an interval that
// ends when another starts does not overlap it).
func maxOverlap(ss []fcStart, key string) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var es []edge
	for _, s := range ss {
		if key == "*" || s.key == key {
			es = append(es, edge{s.start, 1}, edge{s.end, -1})
		}
	}
	sort.Slice(es, func(i, j int) bool {
		if !es[i].at.Equal(es[j].at) {
			return es[i].at.Before(es[j].at)
		}
		return es[i].delta < es[j].delta
	})
	n, most := 0, 0
	for _, e := range es {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// waitCompleted waits (a generous real-time deadline) until n runs of fc
// completed.
func waitCompleted(t *testing.T, ctx context.Context, st store.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "fc", Statuses: []hephtype.RunStatus{heph.StatusCompleted}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got := len(page.Runs)
		if page.Next != "" {
			got = n // more than a page: enough
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs completed in 90s", got, n)
		}
		time.Sleep(20 * time.Millisecond) // polls the store for the event itself
	}
}

// TestFlowControlAcrossProcesses: three Clients, each with its own store
// on one database (SQLite: one file; PostgreSQL: one database), serve a
// queue limited to 2 running per tenant and 5 in all. The intervals
// between each step's start and its completion, from the histories, never
// overlap beyond the limits.
func TestFlowControlAcrossProcesses(t *testing.T) {
	for _, b := range []struct {
		name string
		open func(t *testing.T) func() store.Store
	}{
		{"sqlite", func(t *testing.T) func() store.Store {
			path := filepath.Join(t.TempDir(), "heph.db")
			return func() store.Store {
				st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
		}},
		{"postgres", func(t *testing.T) func() store.Store {
			dsn := pgschema.DSN(t)
			return func() store.Store {
				st, err := postgres.Open(t.Context(), &postgres.Config{DSN: dsn, MaxConns: 6})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
		}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			open := b.open(t)
			var clients []*heph.Client
			var stores []store.Store
			for i := range 3 {
				st := open()
				c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 4}, WorkerID: fmt.Sprintf("p%d", i),
					Logger: e2e.QuietLogger(), MinPollInterval: 5 * time.Millisecond, PollInterval: 50 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				if err := c.Register(fcFlow(3 * time.Millisecond)); err != nil {
					t.Fatal(err)
				}
				clients, stores = append(clients, c), append(stores, st)
			}
			if err := clients[0].SetQueue(ctx, "default", heph.QueueOptions{MaxRunning: 5, MaxRunningPerKey: 2}); err != nil {
				t.Fatal(err)
			}
			const runs = 90
			var reqs []heph.StartRequest
			for i := range runs {
				reqs = append(reqs, heph.StartRequest{Input: fcInput{Tenant: fmt.Sprintf("t%d", i%4), N: i}})
			}
			if _, err := clients[0].StartRuns(ctx, "fc", reqs); err != nil {
				t.Fatal(err)
			}
			for _, c := range clients {
				if err := c.Start(ctx); err != nil {
					t.Fatal(err)
				}
				defer func() { _ = c.Stop(context.Background()) }()
			}
			waitCompleted(t, ctx, stores[0], runs)
			ss := fcStarts(t, ctx, stores[0])
			if len(ss) != runs {
				t.Fatalf("%d completed runs, want %d", len(ss), runs)
			}
			for k := range 4 {
				key := fmt.Sprintf("t%d", k)
				if n := maxOverlap(ss, key); n > 2 {
					t.Errorf("key %s: %d steps ran at once, limit 2", key, n)
				}
			}
			if n := maxOverlap(ss, "*"); n > 5 {
				t.Errorf("%d steps ran at once, limit 5", n)
			}
			info, err := clients[1].GetQueue(ctx, "default")
			if err != nil || info.Options.MaxRunningPerKey != 2 || info.Ready != 0 {
				t.Errorf("GetQueue: %+v, %v", info, err)
			}
		})
	}
}

// TestFlowControlRateLimit: at most 5 starts in each 10-second window,
// over more than a minute of fake time; the limit holds back, it does not
// stall (40 runs complete, in 8 windows or more).
func TestFlowControlRateLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st := sqliteStore(t)
	c, err := heph.New(&heph.Config{Store: st, Clock: fake, Queues: map[string]int{"default": 8}, Logger: e2e.QuietLogger(),
		MinPollInterval: 100 * time.Millisecond, PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(fcFlow(0)); err != nil {
		t.Fatal(err)
	}
	period := 10 * time.Second
	if err := c.SetQueue(ctx, "default", heph.QueueOptions{Rate: heph.RateLimit{Limit: 5, Period: period}}); err != nil {
		t.Fatal(err)
	}
	const runs = 40
	var reqs []heph.StartRequest
	for i := range runs {
		reqs = append(reqs, heph.StartRequest{Input: fcInput{N: i}})
	}
	if _, err := c.StartRuns(ctx, "fc", reqs); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	// The clock moves on 100ms at a time (so that the workers' polls come
	// due) while the test waits for every run, with a generous real-time
	// deadline.
	start := fake.Now()
	deadline := time.Now().Add(90 * time.Second)
	for {
		page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "fc", Statuses: []hephtype.RunStatus{heph.StatusCompleted}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs completed in 90s (fake time %v)", len(page.Runs), runs, fake.Now().Sub(start))
		}
		fake.Advance(100 * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
	ss := fcStarts(t, ctx, st)
	per := map[time.Time]int{}
	for _, s := range ss {
		per[s.start.Truncate(period)]++
	}
	for w, n := range per {
		if n > 5 {
			t.Errorf("window %v: %d starts, limit 5", w, n)
		}
	}
	// 40 starts at 5 a window take 8 windows: over a minute of fake time.
	if len(ss) != runs || len(per) < runs/5 {
		t.Errorf("%d starts in %d windows, want %d in at least %d", len(ss), len(per), runs, runs/5)
	}
}

// TestFlowControlFairness: one tenant floods the queue with 1,000 runs,
// another has 10, created after the flood; one task runs at a time. The
// trickler's k-th task starts after at most k+1 of the flooder's (the
// claims alternate between the keys; +1 for a tie of timestamps), so its
// wait is bounded by its own backlog, not the flooder's.
func TestFlowControlFairness(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := sqliteStore(t)
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 4}, Logger: e2e.QuietLogger(),
		MinPollInterval: 5 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(fcFlow(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.SetQueue(ctx, "default", heph.QueueOptions{MaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	var flood, trickle []heph.StartRequest
	for i := range 1000 {
		flood = append(flood, heph.StartRequest{Input: fcInput{Tenant: "flood", N: i}})
	}
	for i := range 10 {
		trickle = append(trickle, heph.StartRequest{Input: fcInput{Tenant: "trickle", N: i}})
	}
	for _, reqs := range [][]heph.StartRequest{flood, trickle} {
		if _, err := c.StartRuns(ctx, "fc", reqs); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	// Wait for the trickler's ten (and whatever the flood did meanwhile).
	deadline := time.Now().Add(90 * time.Second)
	for {
		ss := fcStarts(t, ctx, st)
		n := 0
		for _, s := range ss {
			if s.key == "trickle" {
				n++
			}
		}
		if n == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the trickler's 10 runs completed in 90s (%d runs in all)", n, len(ss))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ss := fcStarts(t, ctx, st)
	slices.SortFunc(ss, func(a, b fcStart) int { return a.start.Compare(b.start) })
	floods, k := 0, 0
	for _, s := range ss {
		if s.key == "flood" {
			floods++
			continue
		}
		k++
		if floods > k+1 {
			t.Fatalf("the trickler's task %d started after %d of the flooder's, bound %d", k, floods, k+1)
		}
		if k == 10 {
			break
		}
	}
}

// TestFlowControlPauseResume: a paused queue's runs stay queued; resumed,
// every one completes exactly once.
func TestFlowControlPauseResume(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := sqliteStore(t)
	var executions atomic.Int64
	b := flow.New("fc")
	flow.Step(b, "work", func(ctx context.Context, in fcInput) (int, error) {
		executions.Add(1)
		return in.N, nil
	})
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 4}, Logger: e2e.QuietLogger(),
		MinPollInterval: 5 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	if err := c.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	var reqs []heph.StartRequest
	for i := range 50 {
		reqs = append(reqs, heph.StartRequest{Input: fcInput{N: i}})
	}
	if _, err := c.StartRuns(ctx, "fc", reqs); err != nil {
		t.Fatal(err)
	}
	info, err := c.GetQueue(ctx, "default")
	if err != nil || !info.Paused || info.Ready+info.Leased != 50 {
		t.Fatalf("paused queue: %+v, %v", info, err)
	}
	if n := executions.Load(); n != 0 {
		t.Fatalf("%d steps ran in a paused queue", n)
	}
	if err := c.ResumeQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	waitCompleted(t, ctx, st, 50)
	if n := executions.Load(); n != 50 {
		t.Errorf("%d executions for 50 runs", n)
	}
	info, err = c.GetQueue(ctx, "default")
	if err != nil || info.Paused || info.Ready != 0 {
		t.Errorf("resumed queue: %+v, %v", info, err)
	}
}

func sqliteStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestFlowControlFrozenWorker: a worker frozen past its lease frees its
// slot. Two clients share one SQLite file; the queue runs one step per key
// at a time. Client A claims the first run's step and freezes in it: its
// clock stands still, so it neither heartbeats nor notices its lease end.
// Client B, whose clock is an hour later, finds A's lease expired: the
// slot is free, it runs that step again and then the second run's (one at
// a time), and A's late completion is refused by the fence.
func TestFlowControlFrozenWorker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "heph.db")
	open := func() store.Store {
		st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	frozen, thawed := make(chan struct{}), make(chan struct{})
	var running, most atomic.Int64
	var execs [2]atomic.Int64
	newClient := func(name string, fc *clock.Fake) (*heph.Client, store.Store) {
		st := open()
		b := flow.New("fc").ConcurrencyKeyFrom("tenant")
		flow.Step(b, "work", func(ctx context.Context, in fcInput) (string, error) {
			if name == "a" {
				execs[0].Add(1)
				close(frozen)
				<-thawed
				return name, nil
			}
			execs[1].Add(1)
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			return name, nil
		})
		c, err := heph.New(&heph.Config{Store: st, Clock: fc, Queues: map[string]int{"default": 4}, WorkerID: name,
			Logger: e2e.QuietLogger(), LeaseDuration: 10 * time.Second, MinPollInterval: 100 * time.Millisecond, PollInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(b.MustBuild()); err != nil {
			t.Fatal(err)
		}
		return c, st
	}
	fa, fb := clock.NewFake(t0), clock.NewFake(t0.Add(time.Hour))
	a, _ := newClient("a", fa)
	b, stB := newClient("b", fb)
	if err := a.SetQueue(ctx, "default", heph.QueueOptions{MaxRunningPerKey: 1}); err != nil {
		t.Fatal(err)
	}
	r1, err := a.StartRun(ctx, "fc", fcInput{Tenant: "k", N: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.StartRun(ctx, "fc", fcInput{Tenant: "k", N: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Stop(context.Background()) }()
	select {
	case <-frozen:
	case <-time.After(60 * time.Second):
		t.Fatal("client A did not claim the first step in 60s")
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Stop(context.Background()) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		g1, err1 := stB.GetRun(ctx, r1.ID)
		g2, err2 := stB.GetRun(ctx, r2.ID)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if g1.Status == heph.StatusCompleted && g2.Status == heph.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs %s and %s in 90s", g1.Status, g2.Status)
		}
		fb.Advance(100 * time.Millisecond) // B's polls come due; A's clock stands still
		time.Sleep(5 * time.Millisecond)
	}
	// A thaws: its completion, whose commit Stop waits for, is refused by
	// the fence.
	close(thawed)
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{r1.ID, r2.ID} {
		r, err := b.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Output) == "" || r.ConcurrencyKey != "k" {
			t.Fatalf("run %s: output %s, key %q", id, r.Output, r.ConcurrencyKey)
		}
		var out struct {
			Work string `json:"work"`
		}
		_ = json.Unmarshal(r.Output, &out)
		if out.Work != "b" {
			t.Errorf("run %s: output %s, want B's", id, r.Output)
		}
	}
	if execs[0].Load() != 1 || execs[1].Load() != 2 || most.Load() != 1 {
		t.Errorf("executions A %d, B %d; B ran %d of the key at once, limit 1", execs[0].Load(), execs[1].Load(), most.Load())
	}
	// A's completion changed nothing.
	h, err := stB.History(ctx, &store.HistoryParams{RunID: r1.ID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range h {
		if ev.Kind == hephtype.EventStepCompleted {
			n++
		}
	}
	if n != 1 {
		t.Errorf("run 1: %d step completions", n)
	}
}
