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
	}
}

func TestSQLite(t *testing.T) { e2e.Run(t, sqliteBackend()) }

func TestSQLiteSchedules(t *testing.T) { e2e.RunSchedules(t, sqliteBackend()) }
