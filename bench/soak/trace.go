package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// slowTracer prints the statements and pool acquisitions that took longer
// than its limit (-trace-slow), to find where a start's time goes.
type slowTracer struct {
	limit time.Duration
	start time.Time
	n     atomic.Int64
}

type traceKey struct{ kind string }

type traceVal struct {
	t0  time.Time
	sql string
}

func (t *slowTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, traceKey{"q"}, traceVal{time.Now(), d.SQL})
}

func (t *slowTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	t.end(ctx, "q")
}

func (t *slowTracer) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return context.WithValue(ctx, traceKey{"a"}, traceVal{time.Now(), "acquire"})
}

func (t *slowTracer) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	t.end(ctx, "a")
}

func (t *slowTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	return context.WithValue(ctx, traceKey{"p"}, traceVal{time.Now(), "prepare " + d.SQL})
}

func (t *slowTracer) TracePrepareEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareEndData) {
	t.end(ctx, "p")
}

func (t *slowTracer) TraceConnectStart(ctx context.Context, _ pgx.TraceConnectStartData) context.Context {
	return context.WithValue(ctx, traceKey{"c"}, traceVal{time.Now(), "connect"})
}

func (t *slowTracer) TraceConnectEnd(ctx context.Context, _ pgx.TraceConnectEndData) {
	t.end(ctx, "c")
}

func (t *slowTracer) end(ctx context.Context, kind string) {
	v, ok := ctx.Value(traceKey{kind}).(traceVal)
	if !ok {
		return
	}
	took := time.Since(v.t0)
	if took < t.limit || t.n.Add(1) > 100000 {
		return
	}
	sql := strings.Join(strings.Fields(v.sql), " ")
	if len(sql) > 110 {
		sql = sql[:110]
	}
	fmt.Fprintf(os.Stderr, "slow %s at %.2fs: %.1f ms: %s\n", kind, v.t0.Sub(t.start).Seconds(), float64(took)/float64(time.Millisecond), sql)
}
