package e2e_test

import (
	"context"
	"testing"

	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// bouncerBackend is postgresBackend through PgBouncer in transaction mode
// (postgres.Config.TransactionPooling): with direct, LISTEN on the server
// itself; without, poll only (and no migrations: the database comes
// migrated).
func bouncerBackend(direct bool) e2e.Backend {
	b := postgresBackend()
	b.Name = "pgbouncer"
	b.New = func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
		dsn := pgschema.DSN(t)
		cfg := postgres.Config{DSN: pgtest.Bouncer(t, dsn), TransactionPooling: true}
		if direct {
			cfg.DirectDSN = dsn
		} else {
			cfg.SkipMigrations = true
		}
		open := func(t *testing.T) store.Store {
			st, err := postgres.Open(context.Background(), &cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}
		return open(t), open
	}
	return b
}

// Flows, documents, jobs, workflows, remote workers, the exactly-once
// checks and the wake-ups by notification, through PgBouncer in
// transaction mode, LISTEN on the server itself.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	e2e.RunNamed(t, bouncerBackend(true), "FanOutFanIn", "Map", "WaitThenResume", "CancelWhileStepRuns", "ReopenMidRun",
		"ManyConcurrentRuns", "TimerAfterRestart", "WakeUpsWithoutPolling", "Workflows", "ExactlyOnce", "Jobs",
		"DocApprovalGate", "Remote")
}

// The same, poll only: no LISTEN, no migrations.
func TestPgBouncerPollOnly(t *testing.T) {
	t.Parallel()
	e2e.RunNamed(t, bouncerBackend(false), "WaitThenResume", "Workflows", "ExactlyOnce", "Jobs")
}
