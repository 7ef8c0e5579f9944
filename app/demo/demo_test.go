package demo_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds what the tests wait for: generous, for a loaded machine.
const wait = 60 * time.Second

func TestSeedSQLite(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	testSeed(t, st)
}

func TestSeedPostgres(t *testing.T) {
	t.Parallel()
	st, err := postgres.Open(t.Context(), &postgres.Config{DSN: pgtest.DSN(t)})
	if err != nil {
		t.Fatal(err)
	}
	testSeed(t, st)
}

// testSeed registers the examples on a fresh store, seeds it and waits
// until the seeded runs have the outcomes demo.Expected lists.
func testSeed(t *testing.T, st store.Store) {
	t.Cleanup(func() { _ = st.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*wait)
	defer cancel()
	c, err := hephaestus.New(&hephaestus.Config{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg := flowdoc.NewRegistry()
	if err := demo.Register(ctx, c, reg); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if empty, err := demo.Empty(ctx, c); err != nil || !empty {
		t.Fatalf("Empty on a fresh store: %v, %v", empty, err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	}()
	ids, err := demo.Seed(ctx, c)
	if err != nil {
		t.Fatalf("Seed: %v", err)
	}
	if empty, err := demo.Empty(ctx, c); err != nil || empty {
		t.Fatalf("Empty after Seed: %v, %v", empty, err)
	}
	want := Outcomes(demo.Expected())
	var got string
	deadline := time.Now().Add(wait)
	for {
		runs, err := c.ListRuns(ctx, &hephaestus.ListOptions{Tags: []string{demo.Tag}, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got = outcomes(runs.Runs)
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seeded runs by definition and status:\n%s\nwant:\n%s", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(ids) == 0 {
		t.Fatal("Seed returned no run")
	}
	checkDetails(ctx, t, c)
}

// checkDetails checks what the seeded runs show beyond their status.
func checkDetails(ctx context.Context, t *testing.T, c *hephaestus.Client) {
	t.Helper()
	byKey := func(id string) *hephaestus.Run {
		l, err := c.ListRuns(ctx, &hephaestus.ListOptions{BusinessID: "order::" + id})
		if err != nil || len(l.Runs) != 1 {
			t.Fatalf("order %s: %v, %v", id, l, err)
		}
		return l.Runs[0]
	}
	steps := func(r *hephaestus.Run) string {
		var out []string
		for _, s := range r.Steps {
			out = append(out, fmt.Sprintf("%s:%s:%d", s.Name, s.Status, s.Attempt))
		}
		return strings.Join(out, " ")
	}
	// The invalid order skipped the rest; the refused charge was tried
	// three times; a shipped order ran the map step over its lines.
	if got, want := steps(byKey("ord-1007")), "validate_order:completed:1 charge_payment:skipped:0 reserve_inventory:skipped:0 ship_order:skipped:0"; got != want {
		t.Errorf("the invalid order's steps: %s, want %s", got, want)
	}
	failed := byKey("ord-1008")
	if s, _ := failed.Step("charge_payment"); s.Status != "failed" || s.Attempt != 3 || !strings.Contains(failed.Error, "card declined") {
		t.Errorf("the refused order: step %+v, error %q", s, failed.Error)
	}
	shipped := byKey("ord-1003")
	if s, _ := shipped.Step("reserve_inventory"); s.Status != "completed" || strings.Count(string(s.Output), "warehouse") != 3 {
		t.Errorf("the map step of ord-1003: %+v", s)
	}
	if string(shipped.Metadata["customer"]) != `"linus"` || string(shipped.Metadata["region"]) != `"eu"` {
		t.Errorf("ord-1003's metadata: %s", shipped.Metadata)
	}
	// The inbox: the managers' gate and finance's, which has a deadline;
	// no gate names a user, so that the first admin decides them with an
	// approver token of the group.
	for _, group := range []string{demo.ManagersGroup, demo.FinanceGroup} {
		ps, err := c.PendingApprovals(ctx, &hephaestus.ApprovalFilter{Group: group})
		if err != nil || len(ps) != 1 || len(ps[0].Users) != 0 {
			t.Fatalf("approvals of %s: %+v, %v", group, ps, err)
		}
		if (group == demo.FinanceGroup) == ps[0].Deadline.IsZero() {
			t.Errorf("%s's gate %s: deadline %v", group, ps[0].Step, ps[0].Deadline)
		}
		// A non-assignee (the first admin) is refused with how to get a
		// token that may decide it.
		_, err = c.Approve(ctx, ps[0].RunID, ps[0].Step, hephaestus.Actor{ID: "admin"}, "")
		if !errors.Is(err, hephaestus.ErrNotAssignee) || !strings.Contains(err.Error(), "heph tokens create --user <name> --groups "+group+" --role approver") {
			t.Errorf("the admin approves %s's gate: %v", group, err)
		}
	}
	// The completed onboarding took the team plan and ran its child; the
	// other answers its status query while it waits.
	done, err := c.FindWorkflow(ctx, demo.Onboarding, "signup-lovelace")
	if err != nil {
		t.Fatal(err)
	}
	var acct demo.Account
	if err := done.DecodeOutput(&acct); err != nil || acct.Plan != "team" || acct.Workspace != "ws-eu-acct-lovelace" {
		t.Errorf("lovelace's account: %+v, %v", acct, err)
	}
	waiting, err := c.FindWorkflow(ctx, demo.Onboarding, "signup-hopper")
	if err != nil {
		t.Fatal(err)
	}
	st, err := hephaestus.RunQuery(ctx, c, waiting.ID, demo.StatusQuery, struct{}{})
	if err != nil || st.Stage != demo.StageActivation {
		t.Errorf("hopper's status: %+v, %v", st, err)
	}
}

// Outcomes renders the expected outcomes in outcomes' form.
func Outcomes(os []demo.Outcome) string {
	var lines []string
	for _, o := range os {
		lines = append(lines, fmt.Sprintf("%s %s %d", o.Name, o.Status, o.Count))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func outcomes(runs []*hephaestus.Run) string {
	n := map[string]int{}
	for _, r := range runs {
		n[r.Flow+" "+string(r.Status)]++
	}
	var lines []string
	for k, v := range n {
		lines = append(lines, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
