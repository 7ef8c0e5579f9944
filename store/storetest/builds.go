package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Builds: a run keeps the build it was created with; an update with a
// BuildID moves it (one without keeps it); ListRuns filters by build;
// BuildRuns counts the open runs of a workflow per build; RetireBuild is
// refused, with the count, while a build has open runs, and recorded
// once they finished; a bad build id is refused.
func testBuilds(t *testing.T, h *harness) {
	ctx := t.Context()
	mk := func(id, workflow, build string) *store.NewRun {
		r := newRun(id)
		r.Workflow, r.Kind, r.BuildID = workflow, hephtype.KindWorkflow, build
		return r
	}
	h.create(at(0), mk("a1", "w", "b1"), mk("a2", "w", "b1"), mk("a3", "w", "b2"), mk("a4", "w", ""), mk("o1", "other", "b1"))
	if r := h.get("a1"); r.BuildID != "b1" {
		t.Fatalf("GetRun(a1).BuildID = %q, want b1", r.BuildID)
	}
	// An update without a build keeps it; one with a build moves it.
	if r := h.mustUpdate(at(time.Second), "a2", nil, &store.Update{Status: hephtype.StatusWaiting}).Run; r.BuildID != "b1" {
		t.Fatalf("update without a build: BuildID = %q, want b1", r.BuildID)
	}
	if r := h.mustUpdate(at(time.Second), "a4", nil, &store.Update{BuildID: "b2"}).Run; r.BuildID != "b2" {
		t.Fatalf("update with build b2: result BuildID = %q", r.BuildID)
	}
	if r := h.get("a4"); r.BuildID != "b2" {
		t.Fatalf("GetRun(a4).BuildID after the update = %q, want b2", r.BuildID)
	}
	page, err := h.s.ListRuns(ctx, &store.ListRunsParams{BuildID: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "runs of build b1", []string{"o1", "a2", "a1"}, ids(page.Runs))
	counts := func() []store.BuildRuns {
		t.Helper()
		bs, err := h.s.BuildRuns(ctx, &store.BuildRunsParams{Workflow: "w"})
		if err != nil {
			t.Fatal(err)
		}
		return bs
	}
	diff(t, "open runs per build", []store.BuildRuns{{BuildID: "b1", OpenRuns: 2}, {BuildID: "b2", OpenRuns: 2}}, counts())

	err = h.s.RetireBuild(ctx, &store.RetireBuildParams{Workflow: "w", BuildID: "b1", At: at(time.Minute)})
	var inUse *store.BuildInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, store.ErrBuildInUse) || inUse.OpenRuns != 2 || inUse.BuildID != "b1" || inUse.Workflow != "w" {
		t.Fatalf("RetireBuild of a build with open runs: %v (%+v), want a BuildInUseError with 2 runs", err, inUse)
	}
	for _, id := range []string{"a1", "a2"} {
		h.mustUpdate(at(time.Minute), id, nil, &store.Update{Status: hephtype.StatusCompleted})
	}
	diff(t, "open runs per build after b1's finished", []store.BuildRuns{{BuildID: "b2", OpenRuns: 2}}, counts())
	// The second retire keeps the first's time.
	for _, when := range []time.Time{at(2 * time.Minute), at(3 * time.Minute)} {
		if err := h.s.RetireBuild(ctx, &store.RetireBuildParams{Workflow: "w", BuildID: "b1", At: when}); err != nil {
			t.Fatalf("RetireBuild of a drained build: %v", err)
		}
	}
	// Build b1 of "other" still has a run: retiring it for "w" did not
	// touch "other".
	if err := h.s.RetireBuild(ctx, &store.RetireBuildParams{Workflow: "other", BuildID: "b1", At: at(3 * time.Minute)}); !errors.Is(err, store.ErrBuildInUse) {
		t.Fatalf("RetireBuild of other's b1: %v, want ErrBuildInUse", err)
	}
	if err := h.s.RetireBuild(ctx, &store.RetireBuildParams{Workflow: "w", BuildID: "b9", At: at(4 * time.Minute)}); err != nil {
		t.Fatalf("RetireBuild of a build without runs: %v", err)
	}
	if err := h.s.RetireBuild(ctx, &store.RetireBuildParams{Workflow: "w", BuildID: "b1", At: at(5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rb, err := h.s.RetiredBuilds(ctx, &store.RetiredBuildsParams{Workflow: "w"})
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "retired builds of w", []store.RetiredBuild{{Workflow: "w", BuildID: "b1", RetiredAt: at(2 * time.Minute)}, {Workflow: "w", BuildID: "b9", RetiredAt: at(4 * time.Minute)}}, rb)
	if rb, err := h.s.RetiredBuilds(ctx, &store.RetiredBuildsParams{Workflow: "other"}); err != nil || len(rb) != 0 {
		t.Fatalf("retired builds of other = %v, %v; want none", rb, err)
	}
	if rb, err := h.s.RetiredBuilds(ctx, &store.RetiredBuildsParams{}); err != nil || len(rb) != 2 {
		t.Fatalf("retired builds of all = %v, %v; want 2", rb, err)
	}

	// Bad input.
	for _, p := range []store.RetireBuildParams{
		{BuildID: "b1", At: at(0)}, {Workflow: "w", At: at(0)}, {Workflow: "w", BuildID: "b1"}, {Workflow: "w", BuildID: "b 1", At: at(0)},
	} {
		if err := h.s.RetireBuild(ctx, &p); err == nil || errors.Is(err, store.ErrBuildInUse) {
			t.Fatalf("RetireBuild(%+v) = %v, want an error naming the field", p, err)
		}
	}
	bad := mk("bad", "w", "b/1")
	res := h.apply(at(0), store.Change{Create: bad})
	if res[0].Err == nil {
		t.Fatal("create with build id \"b/1\" succeeded")
	}
	if r := h.update(at(0), "a3", nil, &store.Update{BuildID: "b c"}); r.Err == nil {
		t.Fatal("update with build id \"b c\" succeeded")
	}
}
