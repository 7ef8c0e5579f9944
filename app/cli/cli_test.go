package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// heph vet runs go vet with its own executable as the vet tool, started
// once per package it loads: cmd/heph tests it with a built heph, as
// users run it, and not with this race-instrumented test binary (TestVet
// took about 110 s of CI here, most of it starting this binary).
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

// migrationsOf lists a backend's embedded migrations, ascending.
func migrationsOf(t *testing.T, fsys fs.FS) []migrate.Migration {
	t.Helper()
	ms, err := migrate.Load(fsys)
	if err != nil || len(ms) < 2 {
		t.Fatalf("load migrations: %d, %v", len(ms), err)
	}
	return ms
}

// migrationLines formats a line pattern (with the version and the name)
// per migration.
func migrationLines(format string, ms []migrate.Migration) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf(format, m.Version, m.Name)
	}
	return out
}

func TestMigratePostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	pg := []string{"--postgres", dsn}
	args := func(a ...string) []string { return append(a, pg...) }

	pgms := migrationsOf(t, postgres.Migrations())
	wantLines(t, "status before", ok(t, nil, args("migrate", "status")...),
		append([]string{`^postgres schema heph$`, `^VERSION\s+NAME\s+STATE\s+APPLIED AT$`}, migrationLines(`^%04d\s+%s\s+pending\s*$`, pgms)...)...)
	wantLines(t, "up", ok(t, nil, args("migrate", "up")...), migrationLines(`^postgres schema heph: applied %04d_%s$`, pgms)...)
	wantLines(t, "up again", ok(t, nil, args("migrate", "up")...), `^postgres schema heph: up to date$`)
	wantLines(t, "status after up", ok(t, nil, args("migrate", "status")...), `^0001\s+init\s+applied\s+\d{4}-\d\d-\d\dT`)

	// The store opens without migrating.
	s, err := postgres.Open(t.Context(), &postgres.Config{DSN: dsn, SkipMigrations: true})
	if err != nil {
		t.Fatalf("Open after migrate up: %v", err)
	}
	s.Close()

	last := pgms[len(pgms)-1]
	wantLines(t, "down", ok(t, nil, args("migrate", "down", "--yes")...), fmt.Sprintf(`^postgres schema heph: reverted %04d_%s$`, last.Version, last.Name))
	wantLines(t, "down the rest", ok(t, nil, args("migrate", "down", "--steps", strconv.Itoa(len(pgms)), "-y")...), migrationLines(`^postgres schema heph: reverted %04d_%s$`, pgms[:len(pgms)-1])...)
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
	want := "heph.heph_schema_migrations other.api_tokens other.audit_log other.definition_versions other.definitions other.documents other.event_firings other.event_waits other.heph_schema_migrations other.history other.operations other.principals other.queue_keys other.queue_leases other.queues other.remote_claims other.requests other.retired_builds other.run_attributes other.runs other.schedule_ticks other.schedules other.secrets other.sent_events other.sessions other.step_logs other.tasks other.trigger_group_events other.trigger_groups other.trigger_windows other.triggers other.version_generation other.version_rules other.webhook_attempts other.webhook_deliveries other.webhook_events other.webhooks other.workers"
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
	sqms := migrationsOf(t, sqlite.Migrations())
	wantLines(t, "down", ok(t, env, args("migrate", "down", "--steps", strconv.Itoa(len(sqms)), "--yes")...), migrationLines(`^sqlite .*: reverted %04d_%s$`, sqms)...)
	wantLines(t, "status after down", ok(t, nil, args("migrate", "status")...), migrationLines(`^%04d\s+%s\s+pending`, sqms)...)
	wantLines(t, "up again", ok(t, nil, args("migrate", "up")...), migrationLines(`applied %04d_%s$`, sqms)...)
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
