package pgtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// The environment variables of the PgBouncer tests.
const (
	// EnvBouncer is the address (host:port) of a PgBouncer in
	// transaction mode (pool_mode = transaction) in front of the test
	// server, routing any database name to it (".ci/run" starts one).
	EnvBouncer = "HEPH_TEST_PGBOUNCER"
	// EnvRequireBouncer, set to 1, turns a missing PgBouncer into a
	// failure (as in CI).
	EnvRequireBouncer = "HEPH_REQUIRE_PGBOUNCER"
)

// Bouncer returns dsn (a URL DSN of the test server) rewritten to go
// through the PgBouncer that EnvBouncer names, or skips the test loudly
// (fails it when EnvRequireBouncer is 1) when there is none or it does
// not answer.
func Bouncer(t testing.TB, dsn string) string {
	t.Helper()
	addr := os.Getenv(EnvBouncer)
	var err error
	if addr == "" {
		err = fmt.Errorf("%s is not set", EnvBouncer)
	} else {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
			_ = c.Close()
		}
	}
	if err != nil {
		msg := fmt.Sprintf("\n*** PgBouncer is not available: %v\n"+
			"*** Set %s to the host:port of a PgBouncer in transaction mode in front of the test server;\n"+
			"*** set %s=1 to fail instead of skipping.", err, EnvBouncer, EnvRequireBouncer)
		if os.Getenv(EnvRequireBouncer) == "1" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED:" + msg)
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Fatalf("pgtest.Bouncer: %q is not a URL DSN: %v", dsn, err)
	}
	u.Host = addr
	return u.String()
}
