package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// heph runs the command line in-process with env as the environment and
// returns its exit code and output.
func heph(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(t.Context(), args, &cli.Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errOut.String()
}

// ok runs heph and fails the test unless it succeeds.
func ok(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	code, out, errOut := heph(t, env, args...)
	if code != 0 {
		t.Fatalf("heph %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

func wantLines(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(out) {
			t.Errorf("%s: output does not match %q:\n%s", what, p, out)
		}
	}
}

func TestMigratePostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pg := []string{"--postgres", dsn}
	args := func(a ...string) []string { return append(a, pg...) }

	wantLines(t, "status before", ok(t, nil, args("migrate", "status")...),
		`^postgres schema heph$`, `^VERSION\s+NAME\s+STATE\s+APPLIED AT$`, `^0001\s+init\s+pending\s*$`, `^0002\s+exactly_once\s+pending\s*$`, `^0003\s+fresh\s+pending\s*$`,
		`^0004\s+history_rows\s+pending\s*$`, `^0005\s+requests\s+pending\s*$`, `^0006\s+documents\s+pending\s*$`,
		`^0007\s+flow_control\s+pending\s*$`, `^0008\s+schedules\s+pending\s*$`, `^0009\s+access\s+pending\s*$`, `^0010\s+run_parent\s+pending\s*$`,
		`^0011\s+trace_context\s+pending\s*$`, `^0012\s+task_run_attrs\s+pending\s*$`, `^0013\s+principals\s+pending\s*$`, `^0014\s+remote_claims\s+pending\s*$`, `^0015\s+secrets\s+pending\s*$`, `^0019\s+webhooks\s+pending\s*$`)
	wantLines(t, "up", ok(t, nil, args("migrate", "up")...), `^postgres schema heph: applied 0001_init$`, `^postgres schema heph: applied 0002_exactly_once$`,
		`^postgres schema heph: applied 0003_fresh$`, `^postgres schema heph: applied 0004_history_rows$`, `^postgres schema heph: applied 0005_requests$`,
		`^postgres schema heph: applied 0006_documents$`, `^postgres schema heph: applied 0007_flow_control$`, `^postgres schema heph: applied 0008_schedules$`,
		`^postgres schema heph: applied 0009_access$`, `^postgres schema heph: applied 0010_run_parent$`,
		`^postgres schema heph: applied 0011_trace_context$`, `^postgres schema heph: applied 0012_task_run_attrs$`,
		`^postgres schema heph: applied 0013_principals$`, `^postgres schema heph: applied 0014_remote_claims$`, `^postgres schema heph: applied 0015_secrets$`,
		`^postgres schema heph: applied 0019_webhooks$`)
	wantLines(t, "up again", ok(t, nil, args("migrate", "up")...), `^postgres schema heph: up to date$`)
	wantLines(t, "status after up", ok(t, nil, args("migrate", "status")...), `^0001\s+init\s+applied\s+\d{4}-\d\d-\d\dT`)

	// The store opens without migrating.
	s, err := postgres.Open(t.Context(), &postgres.Config{DSN: dsn, SkipMigrations: true})
	if err != nil {
		t.Fatalf("Open after migrate up: %v", err)
	}
	s.Close()

	wantLines(t, "down", ok(t, nil, args("migrate", "down", "--yes")...), `^postgres schema heph: reverted 0019_webhooks$`)
	wantLines(t, "down the rest", ok(t, nil, args("migrate", "down", "--steps", "15", "-y")...), `^postgres schema heph: reverted 0015_secrets$`, `^postgres schema heph: reverted 0014_remote_claims$`, `^postgres schema heph: reverted 0013_principals$`, `^postgres schema heph: reverted 0012_task_run_attrs$`, `^postgres schema heph: reverted 0011_trace_context$`, `^postgres schema heph: reverted 0010_run_parent$`, `^postgres schema heph: reverted 0009_access$`, `^postgres schema heph: reverted 0008_schedules$`, `^postgres schema heph: reverted 0007_flow_control$`, `^postgres schema heph: reverted 0006_documents$`, `^postgres schema heph: reverted 0005_requests$`,
		`^postgres schema heph: reverted 0004_history_rows$`, `^postgres schema heph: reverted 0001_init$`)
	wantLines(t, "down again", ok(t, nil, args("migrate", "down", "--steps", "3", "--yes")...), `^postgres schema heph: nothing to revert$`)
	wantLines(t, "status after down", ok(t, nil, args("migrate", "status")...), `^0001\s+init\s+pending\s*$`)

	// The DSN from the environment, another schema.
	env := map[string]string{cli.EnvPostgres: dsn}
	wantLines(t, "up from env", ok(t, env, "migrate", "up", "--schema", "other"), `^postgres schema other: applied 0001_init$`)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables []string
	rows, err := conn.Query(t.Context(), "SELECT table_schema || '.' || table_name FROM information_schema.tables WHERE table_schema IN ('heph', 'other', 'public') ORDER BY 1")
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	want := "heph.heph_schema_migrations other.api_tokens other.audit_log other.documents other.heph_schema_migrations other.history other.operations other.principals other.queue_keys other.queue_leases other.queues other.remote_claims other.requests other.runs other.schedule_ticks other.schedules other.secrets other.sessions other.tasks other.webhook_attempts other.webhook_deliveries other.webhook_events other.webhooks other.workers"
	if got := strings.Join(tables, " "); got != want {
		t.Fatalf("tables %s, want %s", got, want)
	}
}

func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	lite := []string{"--sqlite", path}
	args := func(a ...string) []string { return append(a, lite...) }
	// Down and status want an existing file; up creates it.
	if code, _, errOut := heph(t, nil, args("migrate", "status")...); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("status of a missing file: exit %d, %s", code, errOut)
	}
	wantLines(t, "up", ok(t, nil, args("migrate", "up")...), `^sqlite .*heph.db: applied 0001_init$`)
	wantLines(t, "status", ok(t, nil, args("migrate", "status")...), `^0001\s+init\s+applied\s+\d{4}-`)
	// The store opens it; $HEPH_POSTGRES does not override --sqlite.
	s, err := sqlite.Open(t.Context(), &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	env := map[string]string{cli.EnvPostgres: "postgres://nowhere:1/x"}
	wantLines(t, "down", ok(t, env, args("migrate", "down", "--steps", "14", "--yes")...), `^sqlite .*: reverted 0017_webhooks$`, `^sqlite .*: reverted 0013_secrets$`, `^sqlite .*: reverted 0012_remote_claims$`, `^sqlite .*: reverted 0011_principals$`, `^sqlite .*: reverted 0010_task_run_attrs$`, `^sqlite .*: reverted 0009_trace_context$`, `^sqlite .*: reverted 0008_run_parent$`, `^sqlite .*: reverted 0007_access$`, `^sqlite .*: reverted 0006_schedules$`, `^sqlite .*: reverted 0005_flow_control$`, `^sqlite .*: reverted 0004_documents$`, `^sqlite .*: reverted 0003_requests$`, `^sqlite .*: reverted 0002_exactly_once$`,
		`^sqlite .*: reverted 0001_init$`)
	wantLines(t, "status after down", ok(t, nil, args("migrate", "status")...), `^0001\s+init\s+pending`, `^0002\s+exactly_once\s+pending`, `^0003\s+requests\s+pending`, `^0004\s+documents\s+pending`,
		`^0005\s+flow_control\s+pending`, `^0006\s+schedules\s+pending`, `^0007\s+access\s+pending`, `^0008\s+run_parent\s+pending`,
		`^0009\s+trace_context\s+pending`, `^0010\s+task_run_attrs\s+pending`, `^0011\s+principals\s+pending`, `^0012\s+remote_claims\s+pending`, `^0013\s+secrets\s+pending`, `^0017\s+webhooks\s+pending`)
	wantLines(t, "up again", ok(t, nil, args("migrate", "up")...), `applied 0001_init$`, `applied 0002_exactly_once$`, `applied 0003_requests$`, `applied 0004_documents$`, `applied 0005_flow_control$`, `applied 0006_schedules$`, `applied 0007_access$`, `applied 0008_run_parent$`,
		`applied 0009_trace_context$`, `applied 0010_task_run_attrs$`, `applied 0011_principals$`, `applied 0012_remote_claims$`, `applied 0013_secrets$`, `applied 0017_webhooks$`)
}

func TestMigrateUsage(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "x.db")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"migrate", "up"}, 2, "name a database"},
		{[]string{"migrate", "up", "--postgres", "postgres://h/db", "--sqlite", file}, 2, "not both"},
		{[]string{"migrate", "up", "--sqlite", file, "--schema", "x"}, 2, "--schema is for PostgreSQL"},
		{[]string{"migrate", "down", "--sqlite", file, "--steps", "0"}, 2, "--steps must be positive"},
		{[]string{"migrate", "up", "--postgres", "postgres://h/db", "--schema", "Bad-Name"}, 1, "Config.Schema"},
		{[]string{"migrate", "sideways"}, 2, "unknown command"},
		{[]string{"migrate", "up", "extra"}, 2, "unknown command"},
		{[]string{"migrate", "down", "--sqlite", file, "--bogus"}, 2, "unknown flag"},
	} {
		code, _, errOut := heph(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("heph %v: exit %d, %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
	// Help works and lists the subcommands.
	wantLines(t, "help", ok(t, nil, "migrate", "--help"), `^\s+down\s`, `^\s+status\s`, `^\s+up\s`)
}
