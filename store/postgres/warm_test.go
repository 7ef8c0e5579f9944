package postgres

import (
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// TestMinConns: Open opens Config.MinConns connections before it returns,
// each with the store's fixed statements prepared under their own text, and
// the queries of the store then use them rather than preparing again.
func TestMinConns(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), &Config{DSN: pgtest.DSN(t), Schema: "warm_min", MinConns: 3, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.pool.Stat().TotalConns(); got < 3 {
		t.Fatalf("open connections after Open = %d, want at least 3", got)
	}
	stmts := s.statements()
	if len(stmts) < 40 {
		t.Fatalf("statements() = %d statements, want the store's fixed statements (more than 40)", len(stmts))
	}
	var prepared int
	for range 3 { // the three idle connections, one after another
		c, err := s.pool.Acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		var n int
		if err := c.QueryRow(t.Context(), `SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'stmt\_%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n < len(stmts)/2 {
			t.Errorf("a warmed connection has %d statements prepared by the warm-up, want most of %d", n, len(stmts))
		}
		prepared += n
	}
	// The token lookup is one of them: a query with its text runs on the
	// prepared statement, which PostgreSQL counts as a use (generic or custom plan).
	c, err := s.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(t.Context(), s.acc.tokenByHash, "nope"); err != nil {
		t.Fatal(err)
	}
	var plans int
	if err := c.QueryRow(t.Context(), `SELECT generic_plans + custom_plans FROM pg_prepared_statements WHERE statement = $1`, s.acc.tokenByHash).Scan(&plans); err != nil {
		t.Fatalf("the token lookup is not prepared under its text: %v", err)
	}
	if plans < 1 {
		t.Errorf("the token lookup ran without its prepared statement (plans = %d)", plans)
	}
	if prepared == 0 || !strings.Contains(s.acc.tokenByHash, "api_tokens") {
		t.Fatalf("prepared %d; tokenByHash %q", prepared, s.acc.tokenByHash)
	}
}

func TestMinConnsErrors(t *testing.T) {
	t.Parallel()
	for _, cfg := range []*Config{
		{DSN: "host=x", MinConns: -1},
		{DSN: "host=x", MinConns: 17},
		{DSN: "host=x", MinConns: 3, MaxConns: 2},
		{DSN: "host=x pool_min_conns=20"},
	} {
		if s, err := Open(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "Config.MinConns") {
			if s != nil {
				s.Close()
			}
			t.Errorf("Open(MinConns %d, MaxConns %d) = %v, want an error naming Config.MinConns", cfg.MinConns, cfg.MaxConns, err)
		}
	}
}
