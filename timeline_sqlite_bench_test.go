package hephaestus_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// callClock is a store (SQLite's here, which has no optional interface the
// engine looks for, so the wrapper hides nothing) that times the calls the
// engine makes on a run's path: the commits (Apply), the claims and the
// reads. While on, it adds each call's time to its kind and logs the
// calls of the first runs on the timeline.
type callClock struct {
	store.Store
	tl *timeline
	mu sync.Mutex
	on bool
	n  map[string]int
	d  map[string]time.Duration
}

func (c *callClock) time(ctx context.Context, kind, what string) func() {
	ctx = c.tl.mark(ctx, what)
	t0 := time.Now()
	return func() {
		d := time.Since(t0)
		c.tl.mark(ctx, "")
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.on {
			c.n[kind]++
			c.d[kind] += d
		}
	}
}

func (c *callClock) Apply(ctx context.Context, p *store.ApplyParams) (*store.ApplyResult, error) {
	creates := 0
	for _, ch := range p.Changes {
		if ch.Create != nil {
			creates++
		}
	}
	defer c.time(ctx, "Apply", fmt.Sprintf("Apply: %d changes (%d creates), %d claims", len(p.Changes), creates, len(p.Claims)))()
	return c.Store.Apply(ctx, p)
}

func (c *callClock) ClaimTasks(ctx context.Context, p *store.ClaimParams) ([]*store.Task, error) {
	defer c.time(ctx, "ClaimTasks", "ClaimTasks")()
	return c.Store.ClaimTasks(ctx, p)
}

func (c *callClock) GetRun(ctx context.Context, id string) (*store.Run, error) {
	defer c.time(ctx, "GetRun", "GetRun")()
	return c.Store.GetRun(ctx, id)
}

func (c *callClock) NextReady(ctx context.Context, p *store.NextReadyParams) (time.Time, bool, error) {
	defer c.time(ctx, "NextReady", "NextReady")()
	return c.Store.NextReady(ctx, p)
}

func (c *callClock) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	defer c.time(ctx, "Heartbeat", "Heartbeat")()
	return c.Store.Heartbeat(ctx, p)
}

// BenchmarkTimelineSQLite logs where workload (c) of docs/benchmarks.md
// (a ten-step chain, start to result) spends its time on SQLite with
// synchronous FULL: the timeline of a few runs (each store call, when it
// ends, when each step runs), then, over 100 runs, the time per run in
// each kind of store call and what is left (the hand-offs between the
// engine's goroutines, the decisions, the encoding). It asserts nothing
// about time; docs/benchmarks.md reads it.
//
//	go test -run '^$' -bench BenchmarkTimelineSQLite -benchtime 1x -v .
func BenchmarkTimelineSQLite(b *testing.B) {
	ctx := b.Context()
	tl := &timeline{}
	dbPath := filepath.Join(b.TempDir(), "tl.db")
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: dbPath, Synchronous: "FULL"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	cc := &callClock{Store: st, tl: tl}
	// HEPH_TIMELINE_KEYED=1 gives each run a business id (the key held
	// while the run is active): what a step's commit writes for it.
	keyed := os.Getenv("HEPH_TIMELINE_KEYED") == "1"
	var chain *flow.Builder
	if keyed {
		chain = timelineChain[keyedInput](tl).BusinessKey("id", flow.ScopeActive)
	} else {
		chain = timelineChain[int](tl)
	}
	c, err := heph.New(&heph.Config{Store: cc, Queues: map[string]int{"default": 64}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(chain.MustBuild()); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	run := func(i int) time.Duration {
		t0 := time.Now()
		var in any = i
		var opts *heph.StartOptions
		if keyed {
			in = keyedInput{ID: fmt.Sprintf("order-%d", i), N: i}
			opts = &heph.StartOptions{BusinessValue: fmt.Sprintf("order-%d", i)}
		}
		if _, err := c.Run(ctx, "chain", in, opts); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for i := range 50 {
		run(i)
	}
	for b.Loop() {
		for i := range 2 {
			tl.mu.Lock()
			tl.on, tl.t0, tl.text, tl.n = true, time.Now(), nil, 0
			tl.mu.Unlock()
			run(i)
			tl.mark(ctx, "Run returned")
			tl.mu.Lock()
			tl.on = false
			b.Logf("run %d:\n%s", i, strings.Join(tl.text, "\n"))
			tl.mu.Unlock()
		}
		b.Log(timeSplit(cc, 100, run))
	}
	// HEPH_TIMELINE_WAL names a directory to copy the database and its
	// WAL into, while open (closing checkpoints the WAL away), for
	// bench/scripts/walpages.py to say which B-trees each commit wrote.
	if dir := os.Getenv("HEPH_TIMELINE_WAL"); dir != "" {
		for _, f := range []string{"tl.db", "tl.db-wal"} {
			data, err := os.ReadFile(filepath.Join(filepath.Dir(dbPath), f))
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// keyedInput is the input of a keyed chain: its business id and a
// number.
type keyedInput struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// timelineChain is the ten-step chain of workload (c), each step marking
// when it runs and passing its input on.
func timelineChain[T any](tl *timeline) *flow.Builder {
	chain := flow.New("chain")
	for i := range 10 {
		var opts []flow.StepOption
		if i > 0 {
			opts = append(opts, flow.DependsOn(fmt.Sprintf("s%d", i-1)))
		}
		flow.Step(chain, fmt.Sprintf("s%d", i), func(ctx context.Context, in T) (T, error) {
			tl.mark(ctx, fmt.Sprintf("step s%d runs", i))
			return in, nil
		}, opts...)
	}
	return chain
}

// timeSplit runs n chains with cc counting and says, per run, where the
// median run's time went.
func timeSplit(cc *callClock, n int, run func(int) time.Duration) string {
	cc.mu.Lock()
	cc.on, cc.n, cc.d = true, map[string]int{}, map[string]time.Duration{}
	cc.mu.Unlock()
	lat := make([]time.Duration, n)
	var total time.Duration
	for i := range n {
		lat[i] = run(i)
		total += lat[i]
	}
	time.Sleep(50 * time.Millisecond) // calls still under way after the last run returned
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.on = false
	slices.Sort(lat)
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	s := fmt.Sprintf("%d runs: p50 %.2f ms, mean %.2f ms per run; per run:", n, float64(lat[n/2].Microseconds())/1000, per(total))
	var inCalls time.Duration
	kinds := make([]string, 0, len(cc.n))
	for k := range cc.n {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		inCalls += cc.d[k]
		s += fmt.Sprintf("\n  %-10s %5.2f calls  %5.2f ms", k, float64(cc.n[k])/float64(n), per(cc.d[k]))
	}
	s += fmt.Sprintf("\n  outside the store %.2f ms (the mean less the store calls; calls that overlap count twice)", per(total-inCalls))
	return s
}
