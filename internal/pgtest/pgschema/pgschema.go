// Package pgschema gives each test a PostgreSQL database that already
// holds the store's tables (in the default schema, "heph", and others a
// test names), copied from a
// template migrated once per server and set of migrations (see
// pgtest.DSNFrom): opening a store on it finds nothing to migrate. Tests
// of the migrations themselves use pgtest.DSN, an empty database.
package pgschema

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// DSN creates a new database with the store's schema for the test and
// returns its DSN; it is dropped when the test ends. The store's tables
// are in the schema "heph", and in each of also.
func DSN(t testing.TB, also ...string) string {
	t.Helper()
	v, err := version()
	if err != nil {
		t.Fatalf("pgschema: %v", err)
	}
	schemas := append([]string{"heph"}, also...)
	return pgtest.DSNFrom(t, "heph store "+v+" "+strings.Join(schemas, ","), func(ctx context.Context, dsn string) error {
		for _, sc := range schemas {
			if err := migrate(ctx, dsn, sc); err != nil {
				return err
			}
		}
		return nil
	})
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

// migrate builds the store's tables in schema: Open migrates.
func migrate(ctx context.Context, dsn, schema string) error {
	s, err := postgres.Open(ctx, &postgres.Config{DSN: dsn, Schema: schema})
	if err != nil {
		return err
	}
	return s.Close()
}
