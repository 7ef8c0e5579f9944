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
	"github.com/hephaestus-go/hephaestus/workflow"
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

	// The step's commit waits for the run's lock: there it is killed.
	killed, admin := holdRunKillCommit(t, ctx, dsn, st.Schema(), app, r.ID, func() { close(release) })
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

// holdRunKillCommit makes the next commit on a run die on a killed
// connection: an admin session holds the run's row (FOR UPDATE), release
// lets the work that commits go on, and each session of the client (its
// application_name is app) that then waits for the lock is terminated
// (pg_terminate_backend) until one was; then the lock is let go and the
// committer's retry goes through. It returns how many were killed, and
// the admin session for the test's reads.
func holdRunKillCommit(t *testing.T, ctx context.Context, dsn, schema, app, runID string, release func()) (int, *pgx.Conn) {
	t.Helper()
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", app+"-admin"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema, "runs"}.Sanitize()+" WHERE id = $1 FOR UPDATE", runID); err != nil {
		t.Fatal(err)
	}
	release()
	killed := 0
	for killed == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the commit never waited for the lock")
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
	return killed, admin
}

// TestChaosWorkflowSearchAttributesKilledConnection: a workflow whose
// code upserts a search attribute at its start and after its activity,
// and whose activity upserts one with its result; the commit of the
// activity's result (with the decision that follows, and both upserts) is
// killed while it waits for the run's lock, and retried: the activity ran
// once, its result committed once, each workflow upsert is in the history
// once, and the run's attributes are the last ones.
func TestChaosWorkflowSearchAttributesKilledConnection(t *testing.T) {
	dsn := pgschema.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	const app = "heph-wfattrs-chaos"
	st, err := openChaosPostgres(ctx, withDSNParam(dsn, "application_name", app), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	started, release := make(chan struct{}, 1), make(chan struct{})
	var runs atomic.Int32
	act := workflow.NewActivity("tag_activity", func(ctx context.Context, in int) (int, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return in + 1, workflow.UpsertActivitySearchAttributes(ctx, map[string]any{"charged": true})
	})
	wf := workflow.New("tagged_wf", func(ctx workflow.Context, in int) (int, error) {
		if err := workflow.UpsertSearchAttributes(ctx, map[string]any{"stage": "charging"}); err != nil {
			return 0, err
		}
		out, err := act.Execute(ctx, in)
		if err != nil {
			return 0, err
		}
		return out, workflow.UpsertSearchAttributes(ctx, map[string]any{"stage": "done"})
	}).SearchAttribute("stage", flow.AttrKeyword).SearchAttribute("charged", flow.AttrBool)
	c, err := heph.New(&heph.Config{Store: st, Logger: chaosLogger(), PollInterval: 200 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterActivities(act); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	r, err := c.StartWorkflow(ctx, "tagged_wf", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	killed, admin := holdRunKillCommit(t, ctx, dsn, st.Schema(), app, r.ID, func() { close(release) })
	got, err := c.WaitRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != heph.StatusCompleted || got.SearchAttributes["stage"] != "done" || got.SearchAttributes["charged"] != true {
		t.Fatalf("run %s, attributes %v", got.Status, got.SearchAttributes)
	}
	h, err := c.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := countKind(h, hephtype.EventStepCompleted); n != 1 || runs.Load() != 1 {
		t.Fatalf("%d step_completed, the activity ran %d times; want 1 and 1", n, runs.Load())
	}
	if n := countKind(h, hephtype.EventAttributesUpserted); n != 2 {
		t.Fatalf("%d search_attributes_upserted, want 2", n)
	}
	var rows int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{st.Schema(), "run_attributes"}.Sanitize()+" WHERE run_id = $1", r.ID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d rows in run_attributes, want 2 (stage, charged)", rows)
	}
	t.Logf("the commit was killed %d time(s)", killed)
}
