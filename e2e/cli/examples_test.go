package cli_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/hephaestus-go/hephaestus/app/demo"
	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
)

// The lines heph server logs when it seeds the examples, and when it
// finds runs in the store and seeds none.
const (
	seededLine   = "seeded the example runs"
	noSeedLine   = "so no example run is seeded"
	seedFailLine = "seed the example runs"
)

// TestExamplesSQLite starts heph server with its examples on an empty
// SQLite file: the seeded runs reach their statuses and the definitions
// are listed and drawn; a second start seeds nothing; --examples=false on
// another file registers and seeds nothing.
func TestExamplesSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testExamples(t, []string{"--sqlite", filepath.Join(dir, "heph.db")}, []string{"--sqlite", filepath.Join(dir, "none.db")})
}

// TestExamplesPostgres is TestExamplesSQLite on PostgreSQL, configured
// by the environment.
func TestExamplesPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	testExamples(t, []string{"--postgres", dsn, "--schema", "examples"}, []string{"--postgres", dsn, "--schema", "none"})
}

func testExamples(t *testing.T, store, other []string) {
	srv := startServer(t, []string{"HEPH_EXAMPLES=true", "HEPH_INSECURE=true"}, store...)
	api := apiClient(t, srv)
	want := expectedOutcomes()
	var got string
	eventually(t, "the seeded runs' outcomes", func() bool {
		if strings.Contains(srv.log(), seedFailLine+"\"") {
			t.Fatalf("seeding failed:\n%s", srv.log())
		}
		got = outcomes(t, api)
		return got == want && strings.Contains(srv.log(), seededLine)
	})
	first := runIDs(t, api)

	// The definitions, each named example.*, and their graphs.
	defs, _, err := api.Definitions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Kind+" "+d.Name)
	}
	wantDefs := []string{"document " + demo.ExpenseDoc, "flow " + demo.OrderFlow, "flow " + demo.RemoteFlow, "job " + demo.EmailJob, "workflow " + demo.Onboarding, "workflow " + demo.Workspace}
	if !slices.Equal(names, wantDefs) {
		t.Errorf("definitions %q, want %q", names, wantDefs)
	}
	for name, want := range map[string][]string{
		demo.OrderFlow:  {"validate_order:step", "charge_payment:step", "reserve_inventory:map", "ship_order:step"},
		demo.ExpenseDoc: {"check:step", "manager_approval:wait", "finance_approval:wait", "reimburse:step", "notify:step"},
	} {
		g, _, err := api.GraphJSON(t.Context(), name, 0)
		if err != nil {
			t.Fatalf("the graph of %s: %v", name, err)
		}
		var nodes []string
		for _, n := range g.Nodes {
			nodes = append(nodes, n.ID+":"+n.Kind)
		}
		for _, w := range want {
			if !slices.Contains(nodes, w) {
				t.Errorf("the graph of %s has no node %s: %q", name, w, nodes)
			}
		}
		if len(g.Edges) < len(want) {
			t.Errorf("the graph of %s has %d edges: %+v", name, len(g.Edges), g.Edges)
		}
	}
	// The hourly schedule, and the gates of the groups managers and finance.
	ss, _, _, err := api.Schedules(t.Context(), "")
	if err != nil || len(ss) != 1 || ss[0].ID != demo.DigestID {
		t.Errorf("schedules: %+v, %v", ss, err)
	}
	ps, _, err := api.PendingApprovals(t.Context(), "")
	var groups []string
	for _, p := range ps {
		groups = append(groups, p.Groups...)
	}
	slices.Sort(groups)
	if err != nil || len(ps) != 2 || !slices.Equal(groups, []string{demo.FinanceGroup, demo.ManagersGroup}) {
		t.Errorf("the example approvals: %+v, %v", ps, err)
	}
	// Metadata narrows the list.
	eu, _, err := api.ListRuns(t.Context(), &apiclient.RunFilter{Tags: []string{demo.Tag}, Metadata: map[string]string{"customer": "ada", "region": "eu"}}, 1000, "")
	if err != nil || len(eu.Runs) != 4 { // two orders, two emails
		t.Errorf("runs of ada in eu: %+v, %v", eu, err)
	}

	// A second start finds runs and seeds nothing.
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log())
	}
	srv = startServer(t, []string{"HEPH_EXAMPLES=true", "HEPH_INSECURE=true"}, store...)
	eventually(t, "the second start's word on seeding", func() bool { return strings.Contains(srv.log(), noSeedLine) })
	if err := srv.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, srv.log())
	}
	if strings.Contains(srv.log(), seededLine) {
		t.Errorf("the second start seeded:\n%s", srv.log())
	}
	srv = startServer(t, []string{"HEPH_INSECURE=true"}, append(store, "--examples")...) // the flag over the harness's HEPH_EXAMPLES=false
	api = apiClient(t, srv)
	if again := runIDs(t, api); !slices.Equal(again, first) {
		t.Errorf("after a second start the example runs are\n%q\nnot\n%q", again, first)
	}

	// --examples=false on an empty store: no definition, no run, no
	// schedule.
	none := startServer(t, []string{"HEPH_EXAMPLES=true", "HEPH_INSECURE=true"}, append(other, "--examples=false")...)
	napi := apiClient(t, none)
	if defs, _, err := napi.Definitions(t.Context()); err != nil || len(defs) != 0 {
		t.Errorf("definitions with --examples=false: %+v, %v", defs, err)
	}
	if ss, _, _, err := napi.Schedules(t.Context(), ""); err != nil || len(ss) != 0 {
		t.Errorf("schedules with --examples=false: %+v, %v", ss, err)
	}
	if err := none.stop(t, syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v\n%s", err, none.log())
	}
	if strings.Contains(none.log(), "example") {
		t.Errorf("--examples=false logged about examples:\n%s", none.log())
	}
	none = startServer(t, []string{"HEPH_INSECURE=true"}, other...)
	if l, _, err := apiClient(t, none).ListRuns(t.Context(), nil, 10, ""); err != nil || len(l.Runs) != 0 {
		t.Errorf("runs with --examples=false: %+v, %v", l, err)
	}
}

func apiClient(t *testing.T, srv *server) *apiclient.Client {
	t.Helper()
	api, err := apiclient.New(&apiclient.Config{Addr: srv.url})
	if err != nil {
		t.Fatal(err)
	}
	return api
}

// exampleRuns lists the runs tagged as seeded.
func exampleRuns(t *testing.T, api *apiclient.Client) []apiclient.Run {
	t.Helper()
	l, _, err := api.ListRuns(t.Context(), &apiclient.RunFilter{Tags: []string{demo.Tag}}, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	return l.Runs
}

func runIDs(t *testing.T, api *apiclient.Client) []string {
	t.Helper()
	var ids []string
	for _, r := range exampleRuns(t, api) {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	return ids
}

// outcomes counts the seeded runs by definition and status, one line each.
func outcomes(t *testing.T, api *apiclient.Client) string {
	t.Helper()
	n := map[string]int{}
	for _, r := range exampleRuns(t, api) {
		n[r.Workflow+" "+r.Status]++
	}
	var lines []string
	for k, v := range n {
		lines = append(lines, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func expectedOutcomes() string {
	var lines []string
	for _, o := range demo.Expected() {
		lines = append(lines, fmt.Sprintf("%s %s %d", o.Name, o.Status, o.Count))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
