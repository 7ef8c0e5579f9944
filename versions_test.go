package hephaestus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/internal/versionrule"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// versionBackends runs fn on a fresh SQLite file and a fresh PostgreSQL
// database.
func versionBackends(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "v.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		st, err := postgres.Open(t.Context(), &postgres.Config{DSN: pgtest.DSN(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		fn(t, st)
	})
}

// versionedFlows are versions 1 to 3 of flow "vflow": one step that
// returns the version it ran.
func versionedFlows() []*flow.Flow {
	var fs []*flow.Flow
	for v := 1; v <= 3; v++ {
		b := flow.New("vflow").Version(v)
		flow.Step(b, "only", func(ctx context.Context, in map[string]any) (int, error) { return v, nil })
		fs = append(fs, b.Start("only").Edge("only", flow.EventOK, flow.Done).MustBuild())
	}
	return fs
}

func versionClient(t *testing.T, st store.Store) *heph.Client {
	t.Helper()
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	if err := c.Register(versionedFlows()...); err != nil {
		t.Fatal(err)
	}
	return c
}

func versionWhy(t *testing.T, r *heph.Run) string {
	t.Helper()
	var why string
	if raw, ok := r.Metadata[heph.MetaVersionRule]; ok {
		if err := json.Unmarshal(raw, &why); err != nil {
			t.Fatalf("metadata %s = %s: %v", heph.MetaVersionRule, raw, err)
		}
	}
	return why
}

func startV(t *testing.T, c *heph.Client, input any, opts *heph.StartOptions) *heph.Run {
	t.Helper()
	r, err := c.StartRun(t.Context(), "vflow", input, opts)
	if err != nil {
		t.Fatalf("StartRun: %v", err)
	}
	return r
}

// A percentage split over 1,000 starts lands each version within 5
// standard deviations of its binomial mean; the ids are fixed (derived
// from the index), so the outcome is too. The same id gives the same
// version again, and the run records "percentage".
func TestVersionRulePercentage(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		c := versionClient(t, st)
		ctx := t.Context()
		if err := c.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePercentage, Split: map[int]int{1: 80, 2: 15, 3: 5}}, "tester"); err != nil {
			t.Fatal(err)
		}
		const n = 1000
		ns := uuid.MustParse("6ba7b811-9dad-11d1-80b4-00c04fd430c8")
		reqs := make([]heph.StartRequest, n)
		for i := range reqs {
			reqs[i] = heph.StartRequest{Input: map[string]int{"i": i}, Options: &heph.StartOptions{RunID: uuid.NewSHA1(ns, fmt.Appendf(nil, "run-%d", i)).String()}}
		}
		runs, err := c.StartRuns(ctx, "vflow", reqs)
		if err != nil {
			t.Fatal(err)
		}
		counts := map[int]int{}
		for _, r := range runs {
			counts[r.Version]++
			if why := versionWhy(t, r); why != "percentage" {
				t.Fatalf("run %s: %s = %q, want percentage", r.ID, heph.MetaVersionRule, why)
			}
		}
		for v, w := range map[int]int{1: 80, 2: 15, 3: 5} {
			p := float64(w) / 100
			mean, sigma := n*p, math.Sqrt(n*p*(1-p))
			if got := float64(counts[v]); math.Abs(got-mean) > 5*sigma {
				t.Errorf("version %d: %d of %d runs, want %.0f ± %.0f", v, counts[v], n, mean, 5*sigma)
			}
		}
		// A start retried with the same id picks the same version: a
		// second client on the same store chooses as the first did.
		other := versionClient(t, st)
		again, err := other.StartRun(ctx, "vflow", nil, &heph.StartOptions{RunID: runs[7].ID})
		if !errors.Is(err, heph.ErrRunExists) || again == nil || again.Version != runs[7].Version {
			t.Fatalf("retried start = %+v, %v; want the existing run on version %d", again, err, runs[7].Version)
		}
		vs, err := c.Versions(ctx, "vflow", nil)
		if err != nil {
			t.Fatal(err)
		}
		if vs.Rule == nil || vs.Rule.Type != heph.VersionRulePercentage || vs.RuleUpdatedBy != "tester" || len(vs.Versions) != 3 || vs.Latest != 3 {
			t.Fatalf("Versions = %+v", vs)
		}
		for _, d := range vs.Versions {
			if d.ActiveRuns != counts[d.Version] || d.FinishedRuns != 0 || d.State != heph.VersionActive {
				t.Errorf("version %d: %+v, want %d active runs", d.Version, d, counts[d.Version])
			}
		}
	})
}

// A field rule routes by the input; a pinned rule pins; an explicit
// version wins over both; no rule takes the latest.
func TestVersionRuleFieldPinned(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		c := versionClient(t, st)
		ctx := t.Context()
		if r := startV(t, c, nil, nil); r.Version != 3 || versionWhy(t, r) != "latest" {
			t.Fatalf("no rule: version %d, %q; want 3, latest", r.Version, versionWhy(t, r))
		}
		rule := &heph.VersionRule{Type: heph.VersionRuleField, Field: "customer.plan", Map: map[string]int{"enterprise": 3}, Default: 2}
		if err := c.SetVersionRule(ctx, "vflow", rule, "ops"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			input   any
			version int
			why     string
		}{
			{map[string]any{"customer": map[string]any{"plan": "enterprise"}}, 3, "field customer.plan=enterprise"},
			{map[string]any{"customer": map[string]any{"plan": "free"}}, 2, "field customer.plan default"},
			{json.RawMessage(`{"other":1}`), 2, "field customer.plan default"},
		} {
			r := startV(t, c, tc.input, nil)
			if r.Version != tc.version || versionWhy(t, r) != tc.why {
				t.Errorf("field rule, input %v: version %d, %q; want %d, %q", tc.input, r.Version, versionWhy(t, r), tc.version, tc.why)
			}
			got, err := c.GetRun(ctx, r.ID)
			if err != nil || got.Version != tc.version || versionWhy(t, got) != tc.why {
				t.Errorf("GetRun: %+v, %v", got, err)
			}
		}
		if err := c.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePinned, Version: 1}, "ops"); err != nil {
			t.Fatal(err)
		}
		if r := startV(t, c, nil, nil); r.Version != 1 || versionWhy(t, r) != "pinned" {
			t.Fatalf("pinned: version %d, %q", r.Version, versionWhy(t, r))
		}
		if r := startV(t, c, nil, &heph.StartOptions{Version: 2}); r.Version != 2 || versionWhy(t, r) != "explicit" {
			t.Fatalf("explicit: version %d, %q", r.Version, versionWhy(t, r))
		}
		// Bad rules: the field at fault is named; unknown versions too.
		err := c.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePercentage, Split: map[int]int{1: 50, 2: 40}}, "ops")
		if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "split: the weights sum to 90, not 100") {
			t.Fatalf("bad split: %v", err)
		}
		err = c.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePinned, Version: 9}, "ops")
		if !errors.Is(err, heph.ErrFlowNotFound) || !strings.Contains(err.Error(), "no version 9 (known: 1, 2, 3)") {
			t.Fatalf("unknown version: %v", err)
		}
		if err := c.ClearVersionRule(ctx, "vflow"); err != nil {
			t.Fatal(err)
		}
		if err := c.ClearVersionRule(ctx, "vflow"); !errors.Is(err, heph.ErrVersionRuleNotFound) {
			t.Fatalf("clear again: %v", err)
		}
		if r := startV(t, c, nil, nil); r.Version != 3 {
			t.Fatalf("after clear: version %d", r.Version)
		}
	})
}

// A retired version is refused for new starts, explicit or by rule,
// while a run on it finishes; a deleted one is hidden, its runs
// readable.
func TestVersionRetireDelete(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		c := versionClient(t, st)
		ctx := t.Context()
		inFlight := startV(t, c, nil, &heph.StartOptions{Version: 2})
		if err := c.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePercentage, Split: map[int]int{2: 100}}, "ops"); err != nil {
			t.Fatal(err)
		}
		if err := c.RetireVersion(ctx, "vflow", 2, "ops"); err != nil {
			t.Fatal(err)
		}
		_, err := c.StartRun(ctx, "vflow", nil, nil)
		if !errors.Is(err, heph.ErrVersionRetired) || !strings.Contains(err.Error(), "version 2, chosen by the version rule (percentage 2=100: percentage), is retired") {
			t.Fatalf("start by a rule naming a retired version: %v", err)
		}
		_, err = c.StartRun(ctx, "vflow", nil, &heph.StartOptions{Version: 2})
		if !errors.Is(err, heph.ErrVersionRetired) || !strings.Contains(err.Error(), "version 2 is retired") {
			t.Fatalf("explicit start of a retired version: %v", err)
		}
		err = c.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePinned, Version: 2}, "ops")
		if !errors.Is(err, heph.ErrVersionRetired) || !strings.Contains(err.Error(), "version 2 is retired") {
			t.Fatalf("a rule naming a retired version: %v", err)
		}
		if err := c.ClearVersionRule(ctx, "vflow"); err != nil {
			t.Fatal(err)
		}
		// Latest is the latest not retired.
		if err := c.RetireVersion(ctx, "vflow", 3, "ops"); err != nil {
			t.Fatal(err)
		}
		if r := startV(t, c, nil, nil); r.Version != 1 || versionWhy(t, r) != "latest" {
			t.Fatalf("latest with 2 and 3 retired: version %d, %q", r.Version, versionWhy(t, r))
		}
		// The run in flight on version 2 finishes.
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		done, err := c.WaitRun(wctx, inFlight.ID)
		var out map[string]int
		if err == nil {
			_ = json.Unmarshal(done.Output, &out) // PostgreSQL's jsonb spaces what it returns
		}
		if err != nil || done.Status != heph.StatusCompleted || done.Version != 2 || len(out) != 1 || out["only"] != 2 {
			t.Fatalf("run on the retired version: %+v, %v", done, err)
		}
		// Delete 3: hidden, its state kept; unretire refused.
		if err := c.DeleteVersion(ctx, "vflow", 3, "admin"); err != nil {
			t.Fatal(err)
		}
		if err := c.UnretireVersion(ctx, "vflow", 3, "admin"); !errors.Is(err, heph.ErrInvalidInput) {
			t.Fatalf("unretire a deleted version: %v", err)
		}
		vs, err := c.Versions(ctx, "vflow", nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs.Versions) != 2 || vs.Versions[0].Version != 1 || vs.Versions[1].Version != 2 || vs.Versions[1].State != heph.VersionRetired ||
			vs.Versions[1].ChangedBy != "ops" || vs.Versions[1].FinishedRuns != 1 || vs.Latest != 1 {
			t.Fatalf("Versions after delete = %+v", vs.Versions)
		}
		all, err := c.Versions(ctx, "vflow", &heph.VersionsOptions{IncludeDeleted: true})
		if err != nil || len(all.Versions) != 3 || all.Versions[2].State != heph.VersionDeleted {
			t.Fatalf("Versions with deleted = %+v, %v", all, err)
		}
		if err := c.UnretireVersion(ctx, "vflow", 2, "ops"); err != nil {
			t.Fatal(err)
		}
		if r := startV(t, c, nil, nil); r.Version != 2 {
			t.Fatalf("after unretire of 2: version %d", r.Version)
		}
		if err := c.RetireVersion(ctx, "vflow", 7, "ops"); !errors.Is(err, heph.ErrFlowNotFound) {
			t.Fatalf("retire an unknown version: %v", err)
		}
		if _, err := c.Versions(ctx, "nothing", nil); !errors.Is(err, heph.ErrFlowNotFound) {
			t.Fatalf("Versions of an unknown name: %v", err)
		}
	})
}

// policyReads counts the version policy and document reads of a store.
type policyReads struct {
	store.Store
	n, docs atomic.Int32
}

func (s *policyReads) VersionPolicy(ctx context.Context, name string) (*store.VersionPolicy, error) {
	s.n.Add(1)
	return s.Store.VersionPolicy(ctx, name)
}

func (s *policyReads) GetDocument(ctx context.Context, p *store.GetDocumentParams) (*store.Document, error) {
	s.docs.Add(1)
	return s.Store.GetDocument(ctx, p)
}

// A client keeps the version policy of the definitions it starts and
// reads it once, however many starts follow; changes made by another
// client (another process) are in force at its next start all the same:
// a retire (the store refuses the create chosen from the kept policy, and
// the start is made again from the policy read afresh), an unretire (the
// kept policy refuses the start, which is made again) and a rule; so are
// document starts.
func TestVersionPolicyKept(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		counted := &policyReads{Store: st}
		c := versionClient(t, counted)
		other := versionClient(t, st)
		for range 5 {
			if r := startV(t, c, nil, nil); r.Version != 3 {
				t.Fatalf("start: version %d, want 3", r.Version)
			}
		}
		if n := counted.n.Load(); n != 1 {
			t.Fatalf("5 starts read the policy %d times, want 1", n)
		}
		if err := other.RetireVersion(ctx, "vflow", 3, "ops"); err != nil {
			t.Fatal(err)
		}
		if r := startV(t, c, nil, nil); r.Version != 2 {
			t.Fatalf("start after another client retired 3: version %d, want 2", r.Version)
		}
		_, err := c.StartRun(ctx, "vflow", nil, &heph.StartOptions{Version: 3})
		if !errors.Is(err, heph.ErrVersionRetired) {
			t.Fatalf("explicit start of version 3 retired elsewhere: %v", err)
		}
		if err := other.UnretireVersion(ctx, "vflow", 3, "ops"); err != nil {
			t.Fatal(err)
		}
		if r := startV(t, c, nil, &heph.StartOptions{Version: 3}); r.Version != 3 {
			t.Fatalf("explicit start of version 3 unretired elsewhere: version %d", r.Version)
		}
		if err := other.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePinned, Version: 1}, "ops"); err != nil {
			t.Fatal(err)
		}
		if r := startV(t, c, nil, nil); r.Version != 1 || versionWhy(t, r) != "pinned" {
			t.Fatalf("start after another client pinned 1: version %d, %q", r.Version, versionWhy(t, r))
		}
		// A change made through this client is in force at once, without
		// a refused create.
		before := counted.n.Load()
		if err := c.ClearVersionRule(ctx, "vflow"); err != nil {
			t.Fatal(err)
		}
		if r := startV(t, c, nil, nil); r.Version != 3 {
			t.Fatalf("start after clearing the rule here: version %d, want 3", r.Version)
		}
		if n := counted.n.Load() - before; n != 1 {
			t.Fatalf("the start after a change made here read the policy %d times, want 1", n)
		}
		runs, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "vflow", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs.Runs) != 9 {
			t.Fatalf("%d runs stored, want 9 (a refused create stores nothing)", len(runs.Runs))
		}
	})
}

// A client keeps the latest version of a document it starts with the
// policy: later starts read neither; a new version stored by another
// client is what the next start takes (the store refuses the create
// chosen from the kept one).
func TestVersionPolicyKeptDocument(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		counted := &policyReads{Store: st}
		clients := make([]*heph.Client, 2)
		for i, s := range []store.Store{counted, st} {
			c, err := heph.New(&heph.Config{Store: s})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Stop(context.Background()) })
			reg := flowdoc.NewRegistry()
			if err := reg.Register(flowdoc.RemoteAction("noop")); err != nil {
				t.Fatal(err)
			}
			if err := c.RegisterDocuments(ctx, reg); err != nil {
				t.Fatal(err)
			}
			clients[i] = c
		}
		c, other := clients[0], clients[1]
		put := func(arg string) {
			t.Helper()
			doc := `{"name":"kdoc","steps":{"s":{"action":"noop","args":{"x":"` + arg + `"},"done":true}}}`
			if _, err := other.PutDocument(ctx, "kdoc", heph.DocumentJSON, []byte(doc)); err != nil {
				t.Fatal(err)
			}
		}
		start := func(want int) {
			t.Helper()
			r, err := c.StartDocument(ctx, "kdoc", 0, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ref, ok := r.Document(); !ok || r.Version != want || ref.Version != want {
				t.Fatalf("start: version %d, document %+v; want %d", r.Version, ref, want)
			}
		}
		put("a")
		for range 4 {
			start(1)
		}
		if n, d := counted.n.Load(), counted.docs.Load(); n != 1 || d != 1 {
			t.Fatalf("4 starts read the policy %d times and the document %d times, want 1 and 1", n, d)
		}
		put("b")
		start(2)
		start(2)
		if n, d := counted.n.Load(), counted.docs.Load(); n != 2 || d != 2 {
			t.Fatalf("after another client stored version 2, the policy was read %d times and the document %d times in all, want 2 and 2", n, d)
		}
	})
}

// Stored documents follow their rule; a retired document version is
// refused.
func TestVersionRuleDocument(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		c, err := heph.New(&heph.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		ctx := t.Context()
		reg := flowdoc.NewRegistry()
		if err := reg.Register(flowdoc.RemoteAction("noop")); err != nil {
			t.Fatal(err)
		}
		for _, arg := range []string{"a", "b"} {
			doc := `{"name":"vdoc","steps":{"s":{"action":"noop","args":{"x":"` + arg + `"},"done":true}}}`
			if _, err := c.PutDocument(ctx, "vdoc", heph.DocumentJSON, []byte(doc)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.RegisterDocuments(ctx, reg); err != nil {
			t.Fatal(err)
		}
		if err := c.SetVersionRule(ctx, "vdoc", &heph.VersionRule{Type: heph.VersionRulePinned, Version: 1}, "ops"); err != nil {
			t.Fatal(err)
		}
		r, err := c.StartDocument(ctx, "vdoc", 0, nil, nil)
		if err != nil || r.Version != 1 || versionWhy(t, r) != "pinned" {
			t.Fatalf("document under a pinned rule: %+v, %v", r, err)
		}
		if ref, ok := r.Document(); !ok || ref.Version != 1 {
			t.Fatalf("document ref = %+v", ref)
		}
		if err := c.ClearVersionRule(ctx, "vdoc"); err != nil {
			t.Fatal(err)
		}
		if err := c.RetireVersion(ctx, "vdoc", 2, "ops"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartDocument(ctx, "vdoc", 2, nil, nil); !errors.Is(err, heph.ErrVersionRetired) {
			t.Fatalf("explicit retired document version: %v", err)
		}
		if r, err = c.StartDocument(ctx, "vdoc", 0, nil, nil); err != nil || r.Version != 1 || versionWhy(t, r) != "latest" {
			t.Fatalf("latest document with 2 retired: %+v, %v", r, err)
		}
	})
}

// A schedule's tick chooses its version by the rule too, and records it.
func TestVersionRuleScheduleTick(t *testing.T) {
	t.Parallel()
	versionBackends(t, func(t *testing.T, st store.Store) {
		clk := clock.NewFake(time.Date(2033, 1, 2, 3, 4, 0, 0, time.UTC))
		c, err := heph.New(&heph.Config{Store: st, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		if err := c.Register(versionedFlows()...); err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		if err := c.SetVersionRule(ctx, "vflow", &heph.VersionRule{Type: heph.VersionRulePinned, Version: 2}, "ops"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateSchedule(ctx, &heph.Schedule{ID: "every-minute", Target: heph.TargetFlow, TargetName: "vflow", Every: time.Minute}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
		if _, err := c.TickSchedules(ctx); err != nil {
			t.Fatal(err)
		}
		list, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "vflow"})
		if err != nil || len(list.Runs) != 1 {
			t.Fatalf("runs after a tick: %+v, %v", list, err)
		}
		if r := list.Runs[0]; r.Version != 2 || versionWhy(t, r) != "pinned" {
			t.Fatalf("scheduled run: version %d, %q; want 2, pinned", r.Version, versionWhy(t, r))
		}
	})
}

// The root's rule types are the pure core's.
func TestVersionRuleTypes(t *testing.T) {
	if heph.VersionRulePinned != versionrule.Pinned || heph.VersionRulePercentage != versionrule.Percentage || heph.VersionRuleField != versionrule.Field {
		t.Fatal("the rule types of the root and of internal/versionrule differ")
	}
}
