package e2e_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest/pgschema"
)

// TestChaosSearchAttributesKilledConnection: a step that upserts search
// attributes, its commit killed (pg_terminate_backend) while it waits for
// the run's lock, and the committer's retries: the step ran once, its
// result committed once (one step_completed) and the attributes with it,
// one row per value in run_attributes.
func TestChaosSearchAttributesKilledConnection(t *testing.T) {
	dsn := pgschema.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	const app = "heph-attrs-chaos"
	st, err := openChaosPostgres(ctx, withDSNParam(dsn, "application_name", app), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	started, release := make(chan struct{}, 1), make(chan struct{})
	var runs atomic.Int32
	fb := flow.New("tagged").SearchAttribute("stage", flow.AttrKeyword).SearchAttribute("regions", flow.AttrKeywordList)
	flow.Step(fb, "work", func(ctx context.Context, in any) (string, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return "done", flow.SetSearchAttributes(ctx, map[string]any{"stage": "shipped", "regions": []string{"eu", "us"}})
	})
	c, err := heph.New(&heph.Config{Store: st, Logger: chaosLogger(), PollInterval: 200 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(fb.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	r, err := c.StartRun(ctx, "tagged", nil, &heph.StartOptions{SearchAttributes: map[string]any{"stage": "new"}})
	if err != nil {
		t.Fatal(err)
	}
	<-started

	// An admin session holds the run's row, so that the step's commit
	// waits for it: there it is killed.
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", "heph-attrs-chaos-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{st.Schema(), "runs"}.Sanitize()+" WHERE id = $1 FOR UPDATE", r.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	killed := 0
	for killed == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the step's commit never waited for the lock")
		case <-time.After(5 * time.Millisecond):
		}
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		t.Fatal(err)
	}
	got, err := c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != heph.StatusCompleted || got.SearchAttributes["stage"] != "shipped" {
		t.Fatalf("run %s, attributes %v", got.Status, got.SearchAttributes)
	}
	h, err := c.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(h, hephtype.EventStepCompleted); n != 1 || runs.Load() != 1 {
		t.Fatalf("%d step_completed, the step ran %d times; want 1 and 1", n, runs.Load())
	}
	var rows int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{st.Schema(), "run_attributes"}.Sanitize()+" WHERE run_id = $1", r.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 3 {
		t.Fatalf("%d rows in run_attributes, want 3 (stage, and regions' two)", rows)
	}
	l, err := c.ListRuns(ctx, &heph.ListOptions{Where: "stage = shipped and regions = us"})
	if err != nil || len(l.Runs) != 1 {
		t.Fatalf("list: %v %+v", err, l)
	}
	t.Logf("the commit was killed %d time(s)", killed)
}
