package e2e_test

import (
	"context"
	"path/filepath"
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

func TestSQLite(t *testing.T) { e2e.Run(t, sqliteBackend()) }

func TestSQLiteSchedules(t *testing.T) { e2e.RunSchedules(t, sqliteBackend()) }

func TestSQLiteRootAPI(t *testing.T) { e2e.RunRootAPI(t, sqliteBackend()) }
