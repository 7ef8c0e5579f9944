package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func sqliteBackend() e2e.Backend {
	return e2e.Backend{
		Name: "sqlite",
		New: func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
			path := filepath.Join(t.TempDir(), "heph.db")
			open := func(t *testing.T) store.Store {
				st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: path})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}
			return open(t), open
		},
		BeginTx: func(t *testing.T, st store.Store) *e2e.AppTx {
			ctx := context.WithoutCancel(t.Context())
			tx, err := st.(*sqlite.Store).DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			return &e2e.AppTx{
				Tx:       tx,
				Exec:     func(q string) error { _, err := tx.ExecContext(ctx, q); return err },
				Commit:   tx.Commit,
				Rollback: tx.Rollback,
			}
		},
	}
}

func TestSQLitePayloads(t *testing.T) {
	b := sqliteBackend()
	b.Dump = func(t *testing.T, st store.Store) string { return strings.Join(sqliteRows(t, st), "\n") }
	e2e.RunPayloads(t, b)
}

func queryStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSQLite(t *testing.T) { e2e.Run(t, sqliteBackend()) }

func TestSQLiteSchedules(t *testing.T) { e2e.RunSchedules(t, sqliteBackend()) }

func TestSQLiteRootAPI(t *testing.T) { e2e.RunRootAPI(t, sqliteBackend()) }

// sqliteRows returns every row of every table of st's database, as text
// ("table:\tvalue\tvalue…").
func sqliteRows(t *testing.T, st store.Store) []string {
	db := st.(*sqlite.Store).DB()
	ctx := context.WithoutCancel(t.Context())
	tables := queryStrings(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1`)
	if len(tables) < 10 {
		t.Fatalf("tables %v", tables)
	}
	var out []string
	for _, tb := range tables {
		rows, err := db.QueryContext(ctx, `SELECT * FROM "`+tb+`"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString(tb + ":")
			for _, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "\t%v", v)
			}
			out = append(out, b.String())
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		_ = rows.Close()
	}
	return out
}
