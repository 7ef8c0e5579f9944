package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
)

// TestClaimWithHandlersReadsItsOwn: a claim that lists handlers, behind a
// front of 2,000 tasks of another handler, reads its own tasks through
// tasks_handler and no more than a few rows of the others: the plan, in
// the claim's own settings, neither scans the front nor filters it out
// row by row.
func TestClaimWithHandlersReadsItsOwn(t *testing.T) {
	t.Parallel()
	s := openSchema(t, "claim_plan")
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	run := &store.NewRun{ID: "front", Workflow: "wf", Version: 1, Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, Input: json.RawMessage(`{}`)}
	for i := range 2000 {
		run.Tasks = append(run.Tasks, store.NewTask{Queue: "pq", Kind: store.TaskStep, Step: fmt.Sprint("o", i), Index: -1, Attempt: 1,
			ReadyAt: t0.Add(time.Duration(i) * time.Millisecond), Handler: "action:other"})
	}
	run.Tasks = append(run.Tasks, store.NewTask{Queue: "pq", Kind: store.TaskStep, Step: "mine", Index: -1, Attempt: 1,
		ReadyAt: t0.Add(time.Hour), Handler: "flow:mine@1"})
	if _, err := s.Apply(t.Context(), &store.ApplyParams{Now: t0, Changes: []store.Change{{Create: run}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(t.Context(), `ANALYZE "claim_plan".tasks`); err != nil {
		t.Fatal(err)
	}
	p := &store.ClaimParams{Queues: []string{"pq"}, Handlers: []string{"flow:mine@1"}, Owner: "w", Limit: 16, LeaseFor: time.Minute, Now: t0.Add(2 * time.Hour)}
	sql, args := claimArgs(&s.q, p)
	tx, err := s.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(t.Context()) }()
	for _, set := range []string{applySettings, claimSettings} {
		if _, err := tx.Exec(t.Context(), set); err != nil {
			t.Fatal(err)
		}
	}
	text := explain(t, tx, "EXPLAIN (ANALYZE, COSTS OFF) "+sql, args...)
	if !strings.Contains(text, "tasks_handler") {
		t.Errorf("the claim does not read tasks_handler:\n%s", text)
	}
	for _, m := range regexp.MustCompile(`Rows Removed by Filter: (\d+)`).FindAllStringSubmatch(text, -1) {
		if n, _ := strconv.Atoi(m[1]); n >= 100 {
			t.Errorf("the claim filtered out %d rows (the other handler's front):\n%s", n, text)
		}
	}
	if strings.Contains(text, "Seq Scan on tasks") {
		t.Errorf("the claim scans the tasks:\n%s", text)
	}
	// EXPLAIN ANALYZE ran the claim: it leased its one task.
	if leased := queryStrings(t, tx, `SELECT step FROM "claim_plan".tasks WHERE owner = 'w'`); len(leased) != 1 || leased[0] != "mine" {
		t.Errorf("the claim leased %v, want [mine]", leased)
	}
}

// TestRemoteClaimPruneByKey: the prune of PutRemoteClaim looks each
// record's task up by key, never by a scan of the task table, even when
// the records' table is large and the tasks many (the plan a hash
// anti-join over the whole task table once was, at every hand-out).
func TestRemoteClaimPruneByKey(t *testing.T) {
	t.Parallel()
	s := openSchema(t, "prune_plan")
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	run := &store.NewRun{ID: "many", Workflow: "wf", Version: 1, Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, Input: json.RawMessage(`{}`)}
	for i := range 20000 {
		run.Tasks = append(run.Tasks, store.NewTask{Queue: "pq", Kind: store.TaskStep, Step: fmt.Sprint("s", i), Index: -1, Attempt: 1, ReadyAt: t0})
	}
	if _, err := s.Apply(t.Context(), &store.ApplyParams{Now: t0, Changes: []store.Change{{Create: run}}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO "prune_plan".remote_claims (` + remoteClaimCols + `)
			SELECT id, 1, run_id, '\x00', '', 'w', now(), now(), 1 FROM "prune_plan".tasks`,
		`ANALYZE "prune_plan".tasks`, `ANALYZE "prune_plan".remote_claims`,
		`SET plan_cache_mode = force_generic_plan`,
	} {
		if _, err := s.pool.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	text := explain(t, s.pool, "EXPLAIN "+s.rc.put, 1, 1, "many", make([]byte, 32), "", "w", t0, t0, 1, store.PruneRemoteClaimsBatch)
	if strings.Contains(text, "Seq Scan on tasks") || strings.Contains(text, "Hash Anti Join") {
		t.Errorf("the prune scans the task table:\n%s", text)
	}
}

// openSchema opens a store on its own schema, closed at the test's end.
func openSchema(t *testing.T, schema string) *Store {
	t.Helper()
	s, err := Open(t.Context(), &Config{DSN: pgtest.DSN(t), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// querier is what explain and queryStrings query: a pool or a
// transaction.
type querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// explain runs an EXPLAIN statement and returns its plan's lines, joined.
func explain(t *testing.T, db querier, sql string, args ...any) string {
	t.Helper()
	return strings.Join(queryStrings(t, db, sql, args...), "\n")
}

// queryStrings runs a query of one text column and returns its values.
func queryStrings(t *testing.T, db querier, sql string, args ...any) []string {
	t.Helper()
	rows, err := db.Query(t.Context(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVersionCountsByWorkflowIndex: with runs_workflow_version gone
// (migration 0037), CountRunsByVersion still reads only the runs of its
// name, through runs_workflow, never a scan of every run; and it still
// counts them by version.
func TestVersionCountsByWorkflowIndex(t *testing.T) {
	t.Parallel()
	s := openSchema(t, "version_counts_plan")
	t0 := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	var changes []store.Change
	for i := range 3000 {
		wf, version, status := "other", 1, hephtype.StatusCompleted
		if i%100 == 0 {
			wf, version, status = "mine", 1+i%300/100, hephtype.StatusRunning
		}
		changes = append(changes, store.Change{Create: &store.NewRun{ID: fmt.Sprint("r", i), Workflow: wf, Version: version,
			Kind: hephtype.KindFlow, Status: status, Input: json.RawMessage(`{}`)}})
	}
	if _, err := s.Apply(t.Context(), &store.ApplyParams{Now: t0, Changes: changes}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`ANALYZE "version_counts_plan".runs`, `SET plan_cache_mode = force_generic_plan`} {
		if _, err := s.pool.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	text := explain(t, s.pool, "EXPLAIN "+s.versionQ(qVersionCounts), "mine")
	if strings.Contains(text, "Seq Scan on runs") || !strings.Contains(text, "runs_workflow") {
		t.Errorf("the version counts do not read runs_workflow:\n%s", text)
	}
	got, err := s.CountRunsByVersion(t.Context(), "mine")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int{1: 10, 2: 10, 3: 10}
	if len(got) != len(want) {
		t.Fatalf("counts %v, want 3 versions", got)
	}
	for _, c := range got {
		if want[c.Version] != c.Active || c.Finished != 0 {
			t.Errorf("version %d: %d active, %d finished; want %d active", c.Version, c.Active, c.Finished, want[c.Version])
		}
	}
}
