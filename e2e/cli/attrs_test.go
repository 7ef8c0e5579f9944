package cli_test

import (
	"path/filepath"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// attrDoc is a document whose runs declare search attributes and wait.
const attrDoc = `name: tagged
search_attributes: {amount: int, region: keyword_list}
steps:
  hold:
    wait: {events: [ok]}
    on: {ok: done}
`

// heph start --attr, show and ls --where on a server over a SQLite file.
func TestSearchAttributesSQLite(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_INSECURE=true"}, "--sqlite", filepath.Join(t.TempDir(), "heph.db"))
	testSearchAttributes(t, srv.client(t, ""))
}

// The same on a server over PostgreSQL.
func TestSearchAttributesPostgres(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_POSTGRES=" + pgtest.DSN(t), "HEPH_SCHEMA=cliattrs", "HEPH_INSECURE=true"})
	testSearchAttributes(t, srv.client(t, ""))
}

// The same on a server whose PostgreSQL connections go through PgBouncer
// in transaction mode, migrations and LISTEN on the server itself
// (--transaction-pooling, --postgres-direct, by their environment).
func TestSearchAttributesPgBouncer(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	srv := startServer(t, []string{"HEPH_POSTGRES=" + pgtest.Bouncer(t, dsn), "HEPH_TRANSACTION_POOLING=true", "HEPH_POSTGRES_DIRECT=" + dsn,
		"HEPH_SCHEMA=clibouncer", "HEPH_INSECURE=true"})
	testSearchAttributes(t, srv.client(t, ""))
}

// testSearchAttributes starts document runs with attributes, reads them
// back, filters by them, and is refused a typo at start and in a filter.
func testSearchAttributes(t *testing.T, c *client) {
	c.ok("documents", "put", writeFile(t, t.TempDir(), "tagged.yaml", attrDoc))
	var big, small run
	c.json(&big, "start", "tagged", "--kind", "document", "--attr", "amount=500", "--attr", `region=["eu","us"]`)
	c.json(&small, "start", "tagged", "--kind", "document", "--attr", "amount=5", "--attr", `region=["eu"]`)
	var shown struct {
		SearchAttributes map[string]any `json:"search_attributes"`
	}
	c.json(&shown, "show", big.ID)
	if shown.SearchAttributes["amount"] != float64(500) {
		t.Fatalf("show: %v", shown.SearchAttributes)
	}
	var list struct {
		Runs []run `json:"runs"`
	}
	c.json(&list, "ls", "--where", "amount > 100 and region in [us, apac]")
	if len(list.Runs) != 1 || list.Runs[0].ID != big.ID {
		t.Fatalf("ls --where: %+v", list.Runs)
	}
	c.json(&list, "ls", "--workflow", "tagged", "--where", "region = eu")
	if len(list.Runs) != 2 {
		t.Fatalf("ls --where region = eu: %+v", list.Runs)
	}
	c.fails(exitFailure, `did you mean "amount"`, "start", "tagged", "--kind", "document", "--attr", "amout=1")
	c.fails(exitFailure, `did you mean "amount"`, "ls", "--where", "amout > 1")
}
