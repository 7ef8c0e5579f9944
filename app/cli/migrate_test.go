package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// hephTTY runs heph with stdin as standard input, which is a terminal
// when tty is true.
func hephTTY(t *testing.T, stdin string, tty bool, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	in := strings.NewReader(stdin)
	env := &cli.Env{Stdin: in, Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" },
		IsTerminal: func(s any) bool { return tty && s == any(in) }}
	code := cli.Main(t.Context(), args, env)
	return code, out.String(), errOut.String()
}

// dirState is every file of a directory with its content.
func dirState(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func sameDir(t *testing.T, what string, a, b map[string][]byte) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: files %v, then %v", what, keys(a), keys(b))
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			t.Fatalf("%s: %s changed", what, k)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestMigrateStatusWritesNothingSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "heph.db")
	// An empty database: every migration pending, and no table made.
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	wantLines(t, "status of an empty file", ok(t, nil, "migrate", "status", "--sqlite", path), `^0001\s+init\s+pending\s*$`, `^0006\s+schedules\s+pending\s*$`)
	sameDir(t, "status of an empty file", before, dirState(t, dir))

	ok(t, nil, "migrate", "up", "--sqlite", path)
	ok(t, nil, "migrate", "down", "--sqlite", path, "--yes")
	before = dirState(t, dir)
	ms := migrationsOf(t, sqlite.Migrations())
	last := ms[len(ms)-1]
	wantLines(t, "status", ok(t, nil, "migrate", "status", "--sqlite", path),
		append(migrationLines(`^%04d\s+%s\s+applied\s`, ms[:len(ms)-1]), fmt.Sprintf(`^%04d\s+%s\s+pending\s*$`, last.Version, last.Name))...)
	sameDir(t, "status of a migrated file", before, dirState(t, dir))
}

func TestMigrateStatusWritesNothingPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	wantLines(t, "status", ok(t, nil, "migrate", "status", "--postgres", dsn, "--schema", "fresh"), `^postgres schema fresh$`, `^0001\s+init\s+pending\s*$`)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'fresh'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatal("migrate status created the schema")
	}
	ok(t, nil, "migrate", "up", "--postgres", dsn, "--schema", "fresh")
	var tables int
	count := func() int {
		t.Helper()
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'fresh'").Scan(&tables); err != nil {
			t.Fatal(err)
		}
		return tables
	}
	before := count()
	wantLines(t, "status after up", ok(t, nil, "migrate", "status", "--postgres", dsn, "--schema", "fresh"), `^0001\s+init\s+applied\s`)
	if after := count(); after != before {
		t.Fatalf("status changed the tables: %d, then %d", before, after)
	}
	if code, _, errOut := heph(t, nil, "migrate", "status", "--postgres", dsn, "--schema", "Bad-Name"); code != 1 || !strings.Contains(errOut, "Config.Schema") {
		t.Fatalf("status of a bad schema: exit %d, %s", code, errOut)
	}
}

func TestMigrateDownConfirms(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "heph.db")
	ok(t, nil, "migrate", "up", "--sqlite", path)

	// Not a terminal and no --yes: refused, a usage error.
	code, out, errOut := hephTTY(t, "y\n", false, "migrate", "down", "--sqlite", path)
	if code != cli.ExitUsage || !strings.Contains(errOut, "--yes") || out != "" {
		t.Fatalf("down without a terminal: exit %d, %q %q", code, out, errOut)
	}
	// A terminal, answered no (or nothing): nothing reverted, exit 1.
	for _, answer := range []string{"n\n", "\n", ""} {
		code, out, errOut = hephTTY(t, answer, true, "migrate", "down", "--sqlite", path)
		if code != cli.ExitFailure || !strings.Contains(errOut, "[y/N]") || !strings.Contains(errOut, "nothing reverted") || out != "" {
			t.Fatalf("down answered %q: exit %d, %q %q", answer, code, out, errOut)
		}
	}
	ms := migrationsOf(t, sqlite.Migrations())
	last, prev := ms[len(ms)-1], ms[len(ms)-2]
	wantLines(t, "status after refusals", ok(t, nil, "migrate", "status", "--sqlite", path), fmt.Sprintf(`^%04d\s+%s\s+applied\s`, last.Version, last.Name))
	// Answered yes: reverted.
	code, out, errOut = hephTTY(t, "yes\n", true, "migrate", "down", "--sqlite", path)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("reverted %04d_%s", last.Version, last.Name)) {
		t.Fatalf("down answered yes: exit %d, %q %q", code, out, errOut)
	}
	wantLines(t, "status after yes", ok(t, nil, "migrate", "status", "--sqlite", path), fmt.Sprintf(`^%04d\s+%s\s+pending\s*$`, last.Version, last.Name),
		fmt.Sprintf(`^%04d\s+%s\s+applied\s`, prev.Version, prev.Name))
}

func TestBenchPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	out := ok(t, map[string]string{cli.EnvPostgres: dsn}, "bench", "--backends", "postgres", "--workloads", "b,jobs", "--engines", "flows",
		"--jobs", "200", "--batch", "50", "--workers", "8", "--raw", "20ms")
	wantLines(t, "bench", out, `^raw reference: PostgreSQL one-row INSERT transactions/s, 1 client \d+$`,
		`^\(b\) .*\s+postgres\s+flows\s+[\d.]+ / `, `^jobs/s.*\s+postgres\s+jobs\s+\d+; `)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'heph_bench_%'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("bench left %d schemas (%v)", n, err)
	}
}
