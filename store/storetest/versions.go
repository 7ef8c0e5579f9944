package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Versions: no policy at first; a rule is created, replaced (who and
// when kept), read back with the states; a rule naming a retired or
// deleted version is refused and nothing is stored; states are created
// and replaced; the rule is deleted once.
func testVersions(t *testing.T, h *harness) {
	ctx := t.Context()
	s := h.s
	p, err := s.VersionPolicy(ctx, "billing")
	if err != nil || p.Rule != nil || len(p.States) != 0 {
		t.Fatalf("VersionPolicy of none = %+v, %v", p, err)
	}
	if p.State(3) != store.VersionActive {
		t.Fatalf("State of a version without a row = %q", p.State(3))
	}
	wantErr(t, "DeleteVersionRule of none", s.DeleteVersionRule(ctx, "billing"), store.ErrVersionRuleNotFound)

	r, err := s.PutVersionRule(ctx, &store.PutVersionRuleParams{Name: "billing", Rule: raw(`{"type":"pinned","version":1}`), Targets: []int{1}, At: at(time.Second), By: "alice"})
	if err != nil {
		t.Fatalf("PutVersionRule: %v", err)
	}
	diff(t, "PutVersionRule", &store.VersionRule{Name: "billing", Rule: raw(`{"type":"pinned","version":1}`), UpdatedAt: at(time.Second), UpdatedBy: "alice"}, r)
	st, err := s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "billing", Version: 2, State: store.VersionRetired, At: at(2 * time.Second), By: "bob"})
	if err != nil {
		t.Fatalf("SetVersionState: %v", err)
	}
	diff(t, "SetVersionState", &store.VersionState{Name: "billing", Version: 2, State: store.VersionRetired, ChangedAt: at(2 * time.Second), ChangedBy: "bob"}, st)
	if _, err := s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "billing", Version: 3, State: store.VersionDeleted, At: at(3 * time.Second), By: "bob"}); err != nil {
		t.Fatalf("SetVersionState 3: %v", err)
	}
	// Another name is not touched.
	if _, err := s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "other", Version: 1, State: store.VersionRetired, At: at(3 * time.Second)}); err != nil {
		t.Fatalf("SetVersionState other: %v", err)
	}

	for _, target := range []int{2, 3} {
		_, err = s.PutVersionRule(ctx, &store.PutVersionRuleParams{Name: "billing", Rule: raw(`{"type":"percentage","split":{"1":50,"x":50}}`), Targets: []int{1, target}, At: at(4 * time.Second), By: "carol"})
		wantErr(t, "PutVersionRule naming a retired version", err, store.ErrVersionRetired)
		if want := "version " + string(rune('0'+target)); !strings.Contains(err.Error(), want) {
			t.Fatalf("PutVersionRule naming version %d: %v does not name it", target, err)
		}
	}
	r, err = s.PutVersionRule(ctx, &store.PutVersionRuleParams{Name: "billing", Rule: raw(`{"type":"pinned","version":4}`), Targets: []int{4}, At: at(5 * time.Second), By: "carol"})
	if err != nil {
		t.Fatalf("PutVersionRule replace: %v", err)
	}
	if r.UpdatedBy != "carol" || !r.UpdatedAt.Equal(at(5*time.Second)) {
		t.Fatalf("PutVersionRule replace = %+v", r)
	}
	p, err = s.VersionPolicy(ctx, "billing")
	if err != nil {
		t.Fatalf("VersionPolicy: %v", err)
	}
	diff(t, "VersionPolicy", &store.VersionPolicy{
		Gen:  p.Gen,
		Rule: &store.VersionRule{Name: "billing", Rule: raw(`{"type":"pinned","version":4}`), UpdatedAt: at(5 * time.Second), UpdatedBy: "carol"},
		States: []*store.VersionState{
			{Name: "billing", Version: 2, State: store.VersionRetired, ChangedAt: at(2 * time.Second), ChangedBy: "bob"},
			{Name: "billing", Version: 3, State: store.VersionDeleted, ChangedAt: at(3 * time.Second), ChangedBy: "bob"},
		},
	}, p)
	if p.State(2) != store.VersionRetired || p.State(1) != store.VersionActive {
		t.Fatalf("State(2), State(1) = %q, %q", p.State(2), p.State(1))
	}
	// Unretire: the row is replaced.
	if _, err := s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "billing", Version: 2, State: store.VersionActive, At: at(6 * time.Second), By: "dave"}); err != nil {
		t.Fatalf("SetVersionState active: %v", err)
	}
	if p, _ = s.VersionPolicy(ctx, "billing"); p.State(2) != store.VersionActive || p.States[0].ChangedBy != "dave" {
		t.Fatalf("after unretire: %+v", p.States[0])
	}
	if err := s.DeleteVersionRule(ctx, "billing"); err != nil {
		t.Fatalf("DeleteVersionRule: %v", err)
	}
	wantErr(t, "DeleteVersionRule again", s.DeleteVersionRule(ctx, "billing"), store.ErrVersionRuleNotFound)
	if p, _ = s.VersionPolicy(ctx, "billing"); p.Rule != nil || len(p.States) != 2 {
		t.Fatalf("after DeleteVersionRule: %+v", p)
	}

	// Invalid parameters.
	_, err = s.PutVersionRule(ctx, &store.PutVersionRuleParams{Name: "billing", Rule: raw(`[1]`), At: at(0)})
	wantErr(t, "PutVersionRule of an array", err, hephtype.ErrInvalidInput)
	_, err = s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "billing", Version: 0, State: store.VersionRetired, At: at(0)})
	wantErr(t, "SetVersionState of version 0", err, hephtype.ErrInvalidInput)
	_, err = s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "billing", Version: 1, State: "gone", At: at(0)})
	wantErr(t, "SetVersionState of a bad state", err, hephtype.ErrInvalidInput)
}

// VersionGeneration: every write of a rule or a state, and every new
// document version, advances the generation that VersionPolicy returns
// (whatever the name; a refused rule and a document stored again do not); a create carrying an older generation is refused with
// ErrVersionPolicyChanged and writes nothing, beside creates of the same
// Apply that carry the current one (or none), which are created.
func testVersionGeneration(t *testing.T, h *harness) {
	ctx := t.Context()
	s := h.s
	gen := func() int64 {
		t.Helper()
		p, err := s.VersionPolicy(ctx, "any")
		if err != nil {
			t.Fatalf("VersionPolicy: %v", err)
		}
		if p.Gen <= 0 {
			t.Fatalf("VersionPolicy.Gen = %d, want positive", p.Gen)
		}
		return p.Gen
	}
	g0 := gen()
	if g := gen(); g != g0 {
		t.Fatalf("generation moved from %d to %d with nothing written", g0, g)
	}
	steps := []struct {
		what  string
		write func() error
	}{
		{"PutVersionRule", func() error {
			_, err := s.PutVersionRule(ctx, &store.PutVersionRuleParams{Name: "pay", Rule: raw(`{"type":"pinned","version":1}`), Targets: []int{1}, At: at(0)})
			return err
		}},
		{"SetVersionState of another name", func() error {
			_, err := s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "other", Version: 2, State: store.VersionRetired, At: at(0)})
			return err
		}},
		{"SetVersionState again (unretire)", func() error {
			_, err := s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "other", Version: 2, State: store.VersionActive, At: at(0)})
			return err
		}},
		{"DeleteVersionRule", func() error { return s.DeleteVersionRule(ctx, "pay") }},
	}
	prev := g0
	for _, st := range steps {
		if err := st.write(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if g := gen(); g <= prev {
			t.Fatalf("after %s the generation is %d, was %d: want it advanced", st.what, g, prev)
		} else {
			prev = g
		}
	}
	// A rule refused (it names a retired version) changes nothing.
	if _, err := s.SetVersionState(ctx, &store.SetVersionStateParams{Name: "pay", Version: 3, State: store.VersionRetired, At: at(0)}); err != nil {
		t.Fatalf("SetVersionState: %v", err)
	}
	prev = gen()
	_, err := s.PutVersionRule(ctx, &store.PutVersionRuleParams{Name: "pay", Rule: raw(`{"type":"pinned","version":3}`), Targets: []int{3}, At: at(0)})
	wantErr(t, "PutVersionRule naming a retired version", err, store.ErrVersionRetired)
	if g := gen(); g != prev {
		t.Fatalf("a refused rule moved the generation from %d to %d", prev, g)
	}

	// A new document version advances it; storing the same content again
	// (nothing stored) does not.
	h.put(putDoc("genDoc", store.DocumentYAML, "name: genDoc\n", time.Second))
	if g := gen(); g <= prev {
		t.Fatalf("after a document version was stored the generation is %d, was %d: want it advanced", g, prev)
	} else {
		prev = g
	}
	h.put(putDoc("genDoc", store.DocumentYAML, "name: genDoc\n", 2*time.Second))
	if g := gen(); g != prev {
		t.Fatalf("storing the same document again moved the generation from %d to %d", prev, g)
	}

	stale, fresh, none := newRun("r-stale"), newRun("r-fresh"), newRun("r-none")
	stale.VersionGen, fresh.VersionGen = g0, prev
	res := h.apply(at(time.Second), store.Change{Create: stale}, store.Change{Create: fresh}, store.Change{Create: none})
	wantErr(t, "create with an old generation", res[0].Err, store.ErrVersionPolicyChanged)
	if res[0].Run != nil {
		t.Fatalf("refused create returned run %+v", res[0].Run)
	}
	for i, id := range []string{"r-fresh", "r-none"} {
		if r := res[i+1]; r.Err != nil || r.Run == nil || r.Run.ID != id {
			t.Fatalf("create %s = %+v, %v", id, r.Run, r.Err)
		}
	}
	if _, err := s.GetRun(ctx, "r-stale"); !errors.Is(err, store.ErrRunNotFound) {
		t.Fatalf("GetRun of the refused create = %v, want ErrRunNotFound", err)
	}
	// Alone in its Apply, and once more with the current generation.
	res = h.apply(at(time.Second), store.Change{Create: stale})
	wantErr(t, "create alone with an old generation", res[0].Err, store.ErrVersionPolicyChanged)
	stale.VersionGen = prev
	h.create(at(time.Second), stale)
}

// VersionRunCounts: runs of a name counted per version, active and
// finished; other names and workflow runs are not counted.
func testVersionRunCounts(t *testing.T, h *harness) {
	if got, err := h.s.CountRunsByVersion(t.Context(), "wf"); err != nil || len(got) != 0 {
		t.Fatalf("CountRunsByVersion of none = %v, %v", got, err)
	}
	mk := func(id string, version int, status hephtype.RunStatus) *store.NewRun {
		r := newRun(id)
		r.Version, r.Status = version, status
		return r
	}
	other := newRun("r-other")
	other.Workflow = "other"
	wf := newRun("r-workflow")
	wf.Kind = hephtype.KindWorkflow
	h.create(at(0),
		mk("r1", 1, hephtype.StatusRunning), mk("r2", 1, hephtype.StatusCompleted), mk("r3", 1, hephtype.StatusFailed),
		mk("r4", 2, hephtype.StatusPending), mk("r5", 2, hephtype.StatusWaiting), mk("r6", 3, hephtype.StatusCancelled),
		other, wf)
	got, err := h.s.CountRunsByVersion(t.Context(), "wf")
	if err != nil {
		t.Fatalf("CountRunsByVersion: %v", err)
	}
	diff(t, "CountRunsByVersion", []*store.VersionRunCount{
		{Version: 1, Active: 1, Finished: 2}, {Version: 2, Active: 2}, {Version: 3, Finished: 1},
	}, got)
}
