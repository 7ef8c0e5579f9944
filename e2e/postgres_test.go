package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// postgresBackend gives each test a database of its own (see pgtest).
func postgresBackend() e2e.Backend {
	return e2e.Backend{
		Name: "postgres",
		New: func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
			dsn := pgschema.DSN(t)
			open := func(t *testing.T) store.Store {
				st, err := postgres.Open(context.Background(), &postgres.Config{DSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
			return open(t), open
		},
		BeginTx: func(t *testing.T, st store.Store) *e2e.AppTx {
			ctx := context.WithoutCancel(t.Context())
			tx, err := st.(*postgres.Store).Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return &e2e.AppTx{
				Tx:       tx,
				Exec:     func(q string) error { _, err := tx.Exec(ctx, q); return err },
				Commit:   func() error { return tx.Commit(ctx) },
				Rollback: func() error { return tx.Rollback(ctx) },
			}
		},
	}
}

func TestPostgresPayloads(t *testing.T) {
	b := postgresBackend()
	b.Dump = func(t *testing.T, st store.Store) string { return strings.Join(postgresRows(t, st), "\n") }
	e2e.RunPayloads(t, b)
}

func TestPostgres(t *testing.T) { e2e.Run(t, postgresBackend()) }

func TestPostgresRootAPI(t *testing.T) { e2e.RunRootAPI(t, postgresBackend()) }

// Cancellation reaches step code that runs in another process promptly, by
// a notification: the heartbeat, the fallback, comes only every hour here.
func TestPostgresCrossProcessCancel(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func() store.Store {
		st, err := postgres.Open(context.Background(), &postgres.Config{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	started := make(chan struct{})
	observed := make(chan error, 1)
	build := func() *flow.Flow {
		fb := flow.New("remote_cancel")
		flow.Step(fb, "long", func(ctx context.Context, in any) (string, error) {
			close(started)
			<-ctx.Done()
			observed <- ctx.Err()
			return "", ctx.Err()
		}, flow.Timeout(2*time.Hour))
		return fb.MustBuild()
	}
	worker, err := heph.New(&heph.Config{Store: open(), LeaseDuration: 2 * time.Hour, HeartbeatInterval: time.Hour, Logger: e2e.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Register(build()); err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = worker.Stop(context.Background()) })
	// The other process: a client without workers.
	front, err := heph.New(&heph.Config{Store: open(), Logger: e2e.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Stop(context.Background()) })
	if err := front.Register(build()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := front.StartRun(ctx, "remote_cancel", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the step never started")
	}
	if err := front.CancelRun(ctx, r.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-observed:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the step's context ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the cancellation did not reach the step in the other process (its next heartbeat is an hour away)")
	}
}

func TestPostgresSchedules(t *testing.T) { e2e.RunSchedules(t, postgresBackend()) }

// postgresRows returns every row of every table of st's schema, as text
// ("table:(value,value…)").
func postgresRows(t *testing.T, st store.Store) []string {
	ctx := context.WithoutCancel(t.Context())
	pool := st.(*postgres.Store).Pool()
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'heph' AND table_type = 'BASE TABLE' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 10 {
		t.Fatalf("tables %v: %v", tables, err)
	}
	var out []string
	for _, tb := range tables {
		rows, err := pool.Query(ctx, `SELECT $1 || ':' || t::text FROM `+pgx.Identifier{"heph", tb}.Sanitize()+` t`, tb)
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, texts...)
	}
	return out
}
