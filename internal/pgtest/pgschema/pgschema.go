// Package pgschema gives each test a PostgreSQL database that already
// holds the store's schema (in the default schema, "heph"), copied from a
// template migrated once per server and set of migrations (see
// pgtest.DSNFrom): opening a store on it finds nothing to migrate. Tests
// of the migrations themselves use pgtest.DSN, an empty database.
package pgschema

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"sync"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// DSN creates a new database with the store's schema for the test and
// returns its DSN; it is dropped when the test ends.
func DSN(t testing.TB) string {
	t.Helper()
	v, err := version()
	if err != nil {
		t.Fatalf("pgschema: %v", err)
	}
	return pgtest.DSNFrom(t, "heph store "+v, migrate)
}

// version is a hash of the migrations' names and contents.
var version = sync.OnceValues(func() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(postgres.Migrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(postgres.Migrations(), path)
		if err != nil {
			return err
		}
		h.Write([]byte(path + "\x00"))
		h.Write(b)
		h.Write([]byte{0})
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
})

// migrate builds the schema: Open migrates.
func migrate(ctx context.Context, dsn string) error {
	s, err := postgres.Open(ctx, &postgres.Config{DSN: dsn})
	if err != nil {
		return err
	}
	return s.Close()
}
