package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/storetest"
)

// The whole conformance suite through PgBouncer in transaction mode
// (Config.TransactionPooling), migrations and Listen on DirectDSN: no
// statement may rely on what a pooled connection kept from an earlier
// transaction (a named prepared statement, a session setting, a lock).
func TestConformanceTransactionPooling(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		dsn := pgschema.DSN(t)
		return open(t, &postgres.Config{DSN: pgtest.Bouncer(t, dsn), TransactionPooling: true, DirectDSN: dsn})
	}, storetest.WithTx(beginTx))
}

// Through PgBouncer without DirectDSN: Open refuses to migrate (a session
// lock cannot be kept), and with SkipMigrations on a migrated database it
// opens and works, and Listen delivers nothing until its context ends
// (poll only).
func TestTransactionPoolingPollOnly(t *testing.T) {
	t.Parallel()
	dsn := pgschema.DSN(t)
	bounced := pgtest.Bouncer(t, dsn)
	ctx := context.Background()
	_, err := postgres.Open(ctx, &postgres.Config{DSN: bounced, TransactionPooling: true})
	if err == nil || !strings.Contains(err.Error(), "DirectDSN") {
		t.Fatalf("open without DirectDSN or SkipMigrations: %v", err)
	}
	s := open(t, &postgres.Config{DSN: bounced, TransactionPooling: true, SkipMigrations: true, MaxConns: 4})
	for i := range 20 { // more statements than connections: each may reach another server connection
		create(t, s, newRun("run-"+string(rune('a'+i)), task("q", now)))
	}
	claimed, err := s.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 50, LeaseFor: time.Minute, Now: now.Add(time.Second)})
	if err != nil || len(claimed) != 20 {
		t.Fatalf("claim: %d tasks, %v", len(claimed), err)
	}
	lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	got := 0
	if err := s.Listen(lctx, func(store.Notification) { got++ }); !errors.Is(err, context.DeadlineExceeded) || got != 0 {
		t.Fatalf("Listen, poll only: %v, %d notifications", err, got)
	}
}

// TestQueryExecModes: the store writes and claims in every query mode pgx
// offers (a DSN's default_query_exec_mode). The array arguments of its
// batches take types of their own where the connection describes its
// statements (arrays.go), and stay plain slices where pgx infers a
// parameter's type from the Go type (exec, simple_protocol), which would
// not know those types.
func TestQueryExecModes(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			dsn := pgschema.DSN(t)
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			s := open(t, &postgres.Config{DSN: dsn + sep + "default_query_exec_mode=" + mode, MaxConns: 2})
			var runs []*store.NewRun
			for i := range 3 {
				r := newRun(mode+"-"+string(rune('a'+i)), task("q", now))
				r.Tags = []string{"t" + string(rune('a'+i)), "ü"}
				r.Input = []byte(`{"n": 1}`)
				runs = append(runs, r)
			}
			create(t, s, runs...)
			claimed, err := s.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"q"}, Owner: "w", Limit: 10, LeaseFor: time.Minute, Now: now.Add(time.Second)})
			if err != nil || len(claimed) != 3 {
				t.Fatalf("claim: %d tasks, %v", len(claimed), err)
			}
			got, err := s.GetRun(ctx, runs[1].ID)
			if err != nil || strings.Join(got.Tags, ",") != "tb,ü" || string(got.Input) != `{"n": 1}` {
				t.Fatalf("run: %+v, %v", got, err)
			}
		})
	}
}
