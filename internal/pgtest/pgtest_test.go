package pgtest_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDSN(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var names []string
	for range 2 {
		t.Run("db", func(t *testing.T) {
			conn, err := pgx.Connect(ctx, pgtest.DSN(t))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var name string
			var tables int
			if err := conn.QueryRow(ctx, "SELECT current_database(), (SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema'))").Scan(&name, &tables); err != nil {
				t.Fatal(err)
			}
			if tables != 0 {
				t.Errorf("database %s has %d tables, want none", name, tables)
			}
			// A table made here is not seen by the next database.
			if _, err := conn.Exec(ctx, "CREATE TABLE mine (x int)"); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		})
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Fatalf("databases %v, want two distinct", names)
	}
	// Both are gone once their tests ended.
	admin, err := pgx.Connect(ctx, pgtest.ServerDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = ANY($1)", names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d test databases left after their tests", left)
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@h:5/postgres?sslmode=disable", "postgres://u@h:5/x?sslmode=disable"},
		{"postgresql://u:p@h/db?dbname=other&sslmode=disable", "postgresql://u:p@h/x?sslmode=disable"},
		{"host=h user=u dbname=postgres", "host=h user=u dbname=postgres dbname=x"},
	} {
		got, err := pgtest.WithDatabase(tc.in, "x")
		if err != nil || got != tc.want {
			t.Errorf("WithDatabase(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// The last dbname wins in key=value strings.
	cfg, err := pgx.ParseConfig("host=h user=u dbname=postgres dbname=x")
	if err != nil || cfg.Database != "x" {
		t.Fatalf("ParseConfig: %v, %v", cfg, err)
	}
}

// DSNFrom copies a template that prepare built once: every database has
// what prepare made, and what a test adds stays in its own database.
func TestDSNFrom(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var prepares atomic.Int32
	prepare := func(ctx context.Context, dsn string) error {
		prepares.Add(1)
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE prepared (x int)")
		return err
	}
	for range 2 {
		t.Run("db", func(t *testing.T) {
			conn, err := pgx.Connect(ctx, pgtest.DSNFrom(t, "pgtest_test v1", prepare))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var tables []string
			rows, _ := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
			tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tables, []string{"prepared"}) {
				t.Errorf("tables %v, want the prepared one alone", tables)
			}
			if _, err := conn.Exec(ctx, "CREATE TABLE mine (x int)"); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Once per server and version: another process (or an earlier run)
	// may have built it already.
	if n := prepares.Load(); n > 1 {
		t.Fatalf("prepare ran %d times, want at most once", n)
	}
}
