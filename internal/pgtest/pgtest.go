// Package pgtest gives each test a PostgreSQL database of its own.
//
// DSN creates a new, empty database for the calling test by copying a
// template (fast: no schema to build from scratch, no checkpoint) and drops
// it when the test ends, so tests run in parallel without seeing each
// other. DSNFrom does the same from a template that holds a schema built
// once (the store's migrations, see package pgschema). The server comes from $HEPH_TEST_POSTGRES (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable); the role
// must be allowed to create databases. When the server cannot be reached
// the test is skipped with a loud message, or fails when
// $HEPH_REQUIRE_POSTGRES is 1 (as in CI).
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The environment variables that configure the harness.
const (
	// EnvServer names the server: a DSN for a database to connect to for
	// administration (creating and dropping databases).
	EnvServer = "HEPH_TEST_POSTGRES"
	// EnvRequire, set to 1, turns a missing server into a failure.
	EnvRequire = "HEPH_REQUIRE_POSTGRES"
	// DefaultServer is used when EnvServer is unset.
	DefaultServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
)

// template is the empty database that test databases are copied from.
// Nobody connects to it (CREATE DATABASE … TEMPLATE refuses a template
// that has sessions).
const template = "heph_test_template"

var (
	setupOnce sync.Once
	setupErr  error
)

// ServerDSN returns the DSN of the administration database of the test
// server, skipping (or failing) the test when the server is unreachable.
func ServerDSN(t testing.TB) string {
	t.Helper()
	dsn := serverDSN()
	setupOnce.Do(func() { setupErr = setup(dsn) })
	if setupErr != nil {
		Unavailable(t, setupErr)
	}
	return dsn
}

// Required reports whether $HEPH_REQUIRE_POSTGRES asks tests to fail
// rather than skip when PostgreSQL (or a tool they need) is missing.
func Required() bool { return os.Getenv(EnvRequire) == "1" }

// Unavailable skips the test with a loud message naming the environment
// variables, or fails it when Required.
func Unavailable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("\n"+
		"*** PostgreSQL is not available: %v\n"+
		"*** Set %s to a server DSN (default %s);\n"+
		"*** set %s=1 to fail instead of skipping.", err, EnvServer, DefaultServer, EnvRequire)
	if Required() {
		t.Fatal(msg)
	}
	t.Skip("SKIPPED:" + msg)
}

func serverDSN() string {
	if dsn := os.Getenv(EnvServer); dsn != "" {
		return dsn
	}
	return DefaultServer
}

// DSN creates a new, empty database for the test and returns its DSN. The
// database is dropped (WITH (FORCE): sessions left open are ended) when
// the test and its cleanups registered later are done.
func DSN(t testing.TB) string {
	t.Helper()
	return create(t, ServerDSN(t), template)
}

// create makes a database for the test as a copy of the template from,
// dropped when the test ends, and returns its DSN.
func create(t testing.TB, admin, from string) string {
	t.Helper()
	name := "heph_t_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := exec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{from}.Sanitize())
	if err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := exec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// DSNFrom is DSN for a database that starts with what prepare builds (a
// migrated schema, say): prepare runs once per server and version, on a
// database that then becomes a template named after a hash of version,
// and each test gets a copy of it. Copying a template is much cheaper
// than building its contents for every test. version must change
// whenever what prepare builds does (a hash of the migrations, say);
// prepare must close its connections before it returns.
func DSNFrom(t testing.TB, version string, prepare func(ctx context.Context, dsn string) error) string {
	t.Helper()
	admin := ServerDSN(t)
	sum := sha256.Sum256([]byte(version))
	name := "heph_tmpl_" + hex.EncodeToString(sum[:8])
	v, _ := prepared.LoadOrStore(name, new(preparedTemplate))
	p := v.(*preparedTemplate)
	p.once.Do(func() { p.err = prepareTemplate(admin, name, prepare) })
	if p.err != nil {
		t.Fatalf("pgtest: prepare template %s: %v", name, p.err)
	}
	return create(t, admin, name)
}

// prepared holds the templates of DSNFrom this process made or found,
// by name.
var prepared sync.Map

type preparedTemplate struct {
	once sync.Once
	err  error
}

// prepareTemplate makes the template name unless it exists. Processes
// that race to make it take turns under an advisory lock; the template
// is built under another name and renamed when complete, so that a
// process that fails halfway leaves no template behind.
func prepareTemplate(admin, name string, prepare func(ctx context.Context, dsn string) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", name); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext($1))", name) }()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	raw := name + "_build_" + randomHex(4)
	build := pgx.Identifier{raw}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+build+" TEMPLATE "+pgx.Identifier{template}.Sanitize()); err != nil {
		return err
	}
	dsn, err := WithDatabase(admin, raw)
	if err == nil {
		err = prepare(ctx, dsn)
	}
	if err == nil {
		_, err = conn.Exec(ctx, "ALTER DATABASE "+build+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false")
	}
	if err == nil {
		_, err = conn.Exec(ctx, "ALTER DATABASE "+build+" RENAME TO "+pgx.Identifier{name}.Sanitize())
	}
	if err != nil {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+build+" WITH (FORCE)")
		return err
	}
	return nil
}

// WithDatabase returns dsn with its database replaced by name. It
// understands URLs and key=value strings.
func WithDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvServer, err)
		}
		u.Path = "/" + name
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return strings.TrimSpace(dsn) + " dbname=" + name, nil // the last key wins
}

// setup checks that the server answers and creates the template once.
// Test processes (one per package) may race to create it: an advisory
// lock on the server orders them, and "already exists" is no error.
func setup(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvServer, err)
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > 5*time.Second {
		cfg.ConnectTimeout = 5 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	const lock = 0x68657068_74657374 // "hephtest"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(lock)); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", int64(lock)) }()
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", template).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{template}.Sanitize()+
		" TEMPLATE template0 IS_TEMPLATE true ALLOW_CONNECTIONS false")
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P04" { // duplicate_database
		err = nil
	}
	if err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	return nil
}

// exec runs one statement on a connection of its own. A server with all
// its connections taken (many test processes at once) is waited for.
func exec(ctx context.Context, dsn, sql string) error {
	for {
		err := exec1(ctx, dsn, sql)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "53300" { // too_many_connections
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func exec1(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
