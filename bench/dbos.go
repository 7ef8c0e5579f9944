// DBOS Transact Go in the side-by-side runs: workloads (a) to (c), on
// PostgreSQL or SQLite. Workflows run directly in this process: RunWorkflow
// without a queue executes the workflow function at once, and the handle's
// GetResult waits for its outcome.

package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"

	"github.com/hephaestus-go/hephaestus/app/benchrun"
)

// dbosInc is the step of (a) to (c): its input plus one.
func dbosInc(ctx dbos.Context, n int) (int, error) {
	return dbos.RunAsStep(ctx, func(context.Context) (int, error) { return n + 1, nil }, dbos.WithStepName("inc"))
}

// dbosOne is the one-step workflow of (a) and (b).
func dbosOne(ctx dbos.Context, n int) (int, error) { return dbosInc(ctx, n) }

// dbosChain is the ten-step workflow of (c).
func dbosChain(ctx dbos.Context, n int) (int, error) {
	for range 10 {
		var err error
		if n, err = dbosInc(ctx, n); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// openDBOSSQLite opens the SQLite system database for DBOS with the
// settings DBOS itself applies to a sqlite: URL (immediate transactions,
// WAL, foreign keys, a 5 s busy timeout, 8 connections), except for the
// synchronous mode: DBOS defaults to NORMAL, and the comparison with
// Hephaestus needs the same mode on both.
func openDBOSSQLite(path, sync string) (*sql.DB, error) {
	dsn := "file:" + path + "?_txlock=immediate" +
		"&_pragma=busy_timeout(5000)&_pragma=foreign_keys(ON)" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(" + sync + ")"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	if err := db.Ping(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// openDBOS launches DBOS on t (its system database is the fresh
// PostgreSQL database, or a new SQLite file) with the two workflows
// registered; each call runs a workflow and waits for its result.
func openDBOS(ctx context.Context, t benchrun.Target) (*benchrun.Caller, error) {
	cfg := dbos.Config{AppName: "heph-bench", Logger: slog.New(slog.DiscardHandler)}
	var sqlDB *sql.DB
	switch t.Backend {
	case benchrun.Postgres:
		cfg.DatabaseURL = t.Where
	case benchrun.SQLite:
		db, err := openDBOSSQLite(t.Where, t.Sync)
		if err != nil {
			return nil, err
		}
		sqlDB, cfg.SQLiteSystemDB = db, db
	default:
		return nil, fmt.Errorf("dbos: unknown backend %q", t.Backend)
	}
	closeDB := func() {
		if sqlDB != nil {
			_ = sqlDB.Close()
		}
	}
	dctx, err := dbos.NewContext(ctx, cfg)
	if err != nil {
		closeDB()
		return nil, err
	}
	dbos.RegisterWorkflow(dctx, dbosOne, dbos.WithWorkflowName("bench_one"))
	dbos.RegisterWorkflow(dctx, dbosChain, dbos.WithWorkflowName("bench_chain10"))
	if err := dbos.Launch(dctx); err != nil {
		_ = dbos.Shutdown(dctx, 10*time.Second)
		closeDB()
		return nil, err
	}
	run := func(wf dbos.Workflow[int, int], in, want int) error {
		h, err := dbos.RunWorkflow(dctx, wf, in)
		if err != nil {
			return err
		}
		out, err := h.GetResult()
		if err == nil && out != want {
			err = fmt.Errorf("workflow %s returned %d, want %d", h.GetWorkflowID(), out, want)
		}
		return err
	}
	return &benchrun.Caller{
		One:   func(_ context.Context, in int) error { return run(dbosOne, in, in+1) },
		Chain: func(_ context.Context, in int) error { return run(dbosChain, in, in+10) },
		Close: func() {
			_ = dbos.Shutdown(dctx, 10*time.Second)
			closeDB()
		},
	}, nil
}
