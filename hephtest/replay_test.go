package hephtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var (
	reserve = workflow.NewActivity("replay.reserve", func(ctx context.Context, sku string) (string, error) { return "r-" + sku, nil })
	billing = workflow.NewActivity("replay.charge", func(ctx context.Context, r string) (string, error) { return "c-" + r, nil })
	ship    = workflow.NewActivity("replay.ship", func(ctx context.Context, r string) (string, error) { return "s-" + r, nil })
)

// The workflows as deployed (v1), and two changes of the order one: an
// activity swapped, an activity added before the others.
var (
	orderV1 = workflow.New("replay.order", func(ctx workflow.Context, sku string) (string, error) {
		r, err := reserve.Execute(ctx, sku) // v1 reserve
		if err != nil {
			return "", err
		}
		return billing.Execute(ctx, r) // v1 charge
	})
	orderSwapped = workflow.New("replay.order", func(ctx workflow.Context, sku string) (string, error) {
		r, err := reserve.Execute(ctx, sku)
		if err != nil {
			return "", err
		}
		return ship.Execute(ctx, r) // swapped: ship
	})
	orderAdded = workflow.New("replay.order", func(ctx workflow.Context, sku string) (string, error) {
		if _, err := ship.Execute(ctx, sku); err != nil { // added: ship
			return "", err
		}
		r, err := reserve.Execute(ctx, sku)
		if err != nil {
			return "", err
		}
		return billing.Execute(ctx, r)
	})
	refundV1 = workflow.New("replay.refund", func(ctx workflow.Context, sku string) (string, error) {
		return billing.Execute(ctx, sku)
	})
)

// recordHistories runs each workflow of v1 to its end on a real client
// over SQLite and writes each run's exported history to dir/<workflow>.json.
func recordHistories(t *testing.T, dir string) {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(orderV1, refundV1); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterActivities(reserve, billing, ship); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	for _, def := range []*workflow.Definition[string, string]{orderV1, refundV1} {
		run, err := heph.StartWorkflow(ctx, c, def, "sku-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = run.Get(wctx)
		cancel()
		if err != nil {
			t.Fatalf("run of %s: %v", def.Name(), err)
		}
		b, err := c.ExportHistory(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, def.Name()+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// lineOf is "hephtest/replay_test.go:N", N the line of this file that
// holds marker.
func lineOf(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("replay_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "// "+marker) {
			return fmt.Sprintf("replay_test.go:%d", i+1)
		}
	}
	t.Fatalf("no line marked %q", marker)
	return ""
}

// Histories recorded on a real client replay against the unchanged code,
// and fail against changed code with a NonDeterminismError that names the
// line that issued the recorded command and the line of the new code.
func TestReplayRecordedHistories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	recordHistories(t, dir)
	order, err := os.ReadFile(filepath.Join(dir, "replay.order.json"))
	if err != nil {
		t.Fatal(err)
	}

	if err := hephtest.ReplayHistory(order, orderV1); err != nil {
		t.Fatalf("the unchanged code: %v", err)
	}
	rep := hephtest.ReplayHistories(t, dir, orderV1, refundV1)
	if rep.Replayed != 2 || rep.Diverged != 0 || len(rep.Results) != 2 {
		t.Fatalf("report of the unchanged code: %+v", rep)
	}

	for _, tc := range []struct {
		name             string
		code             heph.Workflow
		recorded, issued string
		changed          string
	}{
		{"swapped", orderSwapped, "v1 charge", "swapped: ship", "activity name"},
		{"added", orderAdded, "v1 reserve", "added: ship", "activity name"},
	} {
		err := hephtest.ReplayHistory(order, tc.code)
		var nde *heph.NonDeterminismError
		if !errors.As(err, &nde) {
			t.Fatalf("%s: %v, want a *heph.NonDeterminismError", tc.name, err)
		}
		if !strings.HasSuffix(nde.RecordedAt, "hephtest/"+lineOf(t, tc.recorded)) || !strings.HasSuffix(nde.CommandAt, lineOf(t, tc.issued)) {
			t.Errorf("%s: recorded at %q, code at %q; want the lines marked %q and %q", tc.name, nde.RecordedAt, nde.CommandAt, tc.recorded, tc.issued)
		}
		if nde.Changed != tc.changed || nde.Workflow != "replay.order" {
			t.Errorf("%s: %+v", tc.name, nde)
		}
		for _, want := range []string{lineOf(t, tc.recorded), lineOf(t, tc.issued)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not name %s: %v", tc.name, want, err)
			}
		}
	}
}

// failures is a testing.TB that records what would fail the test.
type failures struct {
	testing.TB
	errs []string
}

func (f *failures) Helper() {}
func (f *failures) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// ReplayHistories fails the test with every history that diverges or
// cannot be replayed, naming its file, and with a path of no history.
func TestReplayHistoriesFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	recordHistories(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "zz-notes.json"), []byte(`{"note": "not a history"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &failures{TB: t}
	rep := hephtest.ReplayHistories(f, dir, orderSwapped, refundV1)
	if rep.Replayed != 2 || rep.Diverged != 1 || rep.Failed != 1 {
		t.Errorf("report %+v", rep)
	}
	if len(f.errs) != 2 {
		t.Fatalf("failures %q, want the diverged history and the file that is not one", f.errs)
	}
	order, notes := filepath.Join(dir, "replay.order.json"), filepath.Join(dir, "zz-notes.json")
	if !strings.Contains(f.errs[0], order+": diverged") || !strings.Contains(f.errs[0], lineOf(t, "v1 charge")) || !strings.Contains(f.errs[0], lineOf(t, "swapped: ship")) {
		t.Errorf("the diverged history's failure: %s", f.errs[0])
	}
	if !strings.Contains(f.errs[1], notes+": failed") || !strings.Contains(f.errs[1], `not a history export: "workflow" is missing`) {
		t.Errorf("the bad file's failure: %s", f.errs[1])
	}

	f = &failures{TB: t}
	hephtest.ReplayHistories(f, t.TempDir(), orderV1)
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "no *.json file") {
		t.Errorf("an empty directory: %q", f.errs)
	}
	f = &failures{TB: t}
	hephtest.ReplayHistories(f, filepath.Join(dir, "replay.refund.json"), orderV1)
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], `workflow "replay.refund", which is not among the workflows given`) {
		t.Errorf("a workflow not given: %q", f.errs)
	}
}
