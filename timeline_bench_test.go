package hephaestus_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// timeline records, while on, when each round trip to PostgreSQL started
// and ended and when the step ran, relative to the start of a run.
type timeline struct {
	mu   sync.Mutex
	on   bool
	t0   time.Time
	n    int
	text []string
}

type timelineID struct{}

func (tl *timeline) mark(ctx context.Context, what string) context.Context {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.on {
		return ctx
	}
	at := float64(time.Since(tl.t0).Microseconds()) / 1000
	if what == "" {
		id, _ := ctx.Value(timelineID{}).(int)
		tl.text = append(tl.text, fmt.Sprintf("%7.3f ms  end of #%d", at, id))
		return ctx
	}
	tl.n++
	tl.text = append(tl.text, fmt.Sprintf("%7.3f ms  #%d %s", at, tl.n, what))
	return context.WithValue(ctx, timelineID{}, tl.n)
}

// oneLine is the start of a statement, on one line.
func oneLine(sql string, n int) string {
	s := strings.Join(strings.Fields(sql), " ")
	return s[:min(n, len(s))]
}

func (tl *timeline) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return tl.mark(ctx, oneLine(d.SQL, 60))
}
func (tl *timeline) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	tl.mark(ctx, "")
}
func (tl *timeline) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	parts := make([]string, len(d.Batch.QueuedQueries))
	for i, q := range d.Batch.QueuedQueries {
		parts[i] = oneLine(q.SQL, 24)
	}
	return tl.mark(ctx, "pipeline ["+strings.Join(parts, " | ")+"]")
}
func (tl *timeline) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (tl *timeline) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	tl.mark(ctx, "")
}

// BenchmarkTimeline logs where a one-step run's start-to-result time goes
// on PostgreSQL (workload (b) of docs/benchmarks.md), for a few runs after
// a warm-up: each round trip the store sends (a query, or a pipeline of
// statements: a commit), when it ends, and when the step runs. It
// measures nothing by itself; docs/benchmarks.md reads it with the
// server's statement durations (log_min_duration_statement = 0).
//
//	go test -run '^$' -bench BenchmarkTimeline -benchtime 1x -v .
func BenchmarkTimeline(b *testing.B) {
	ctx := b.Context()
	tl := &timeline{}
	st, err := postgres.Open(ctx, &postgres.Config{DSN: pgschema.DSN(b), QueryTracer: tl})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	one := flow.New("one")
	flow.Step(one, "step", func(ctx context.Context, in int) (int, error) {
		tl.mark(ctx, "the step runs")
		return in + 1, nil
	})
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 64}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Register(one.MustBuild()); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	for i := range 200 {
		if _, err := c.Run(ctx, "one", i, nil); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		for i := range 3 {
			tl.mu.Lock()
			tl.on, tl.t0, tl.text = true, time.Now(), nil
			tl.mu.Unlock()
			if _, err := c.Run(ctx, "one", i, nil); err != nil {
				b.Fatal(err)
			}
			tl.mark(ctx, "Run returned")
			time.Sleep(20 * time.Millisecond) // what the engine does after
			tl.mu.Lock()
			tl.on = false
			b.Logf("run %d:\n%s", i, strings.Join(tl.text, "\n"))
			tl.mu.Unlock()
		}
	}
}
