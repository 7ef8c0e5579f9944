package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

const (
	remoteEnvDSN = "HEPH_REMOTE_SENDER_DSN"
	remoteEnvRun = "HEPH_REMOTE_SENDER_RUN"
)

// remoteSender is the second process of TestMessagesFromAnotherProcess
// (see TestMain): a client that registers no workflow and starts no
// worker sends a tally run its messages. where is a PostgreSQL DSN, or
// "sqlite:" and the path of an SQLite file.
func remoteSender(where, runID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openWhere(ctx, where)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st, Logger: e2e.QuietLogger()})
	if err != nil {
		return err
	}
	defer func() { _ = c.Stop(ctx) }()
	return e2e.TallyRemote(ctx, c, runID)
}

// openWhere opens the store remoteSender names.
func openWhere(ctx context.Context, where string) (store.Store, error) {
	if path, ok := strings.CutPrefix(where, "sqlite:"); ok {
		return sqlite.Open(ctx, &sqlite.Config{Path: path})
	}
	return postgres.Open(ctx, &postgres.Config{DSN: where})
}

// TestMessagesFromAnotherProcess: an update, a named query and a signal
// sent from another OS process, which has none of the workflow's code,
// reach a running workflow, on PostgreSQL and on an SQLite file; the
// validator runs in this process, the worker's.
func TestMessagesFromAnotherProcess(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		messagesFromAnotherProcess(t, pgtest.DSN(t))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		messagesFromAnotherProcess(t, "sqlite:"+filepath.Join(t.TempDir(), "heph.db"))
	})
}

func messagesFromAnotherProcess(t *testing.T, where string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := openWhere(ctx, where)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	worker, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 4}, Logger: e2e.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = worker.Stop(ctx) }()
	if err := worker.RegisterWorkflows(e2e.Tally); err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := heph.StartWorkflow(ctx, worker, e2e.Tally, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := e2e.TallyValidations.Load()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), remoteEnvDSN+"="+where, remoteEnvRun+"="+r.ID)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the sender process failed: %v\n%s", err, out)
	}
	if err := e2e.CheckTally(ctx, worker, r.ID); err != nil {
		t.Fatal(err)
	}
	if n := e2e.TallyValidations.Load() - before; n < 4 {
		t.Fatalf("the validator ran %d times in the worker's process, want at least 4", n)
	}
}
