package wfrt

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The pins of new runs: this process's build for a pinned workflow it
// has, none (recording this build) for one that auto-upgrades, the newest
// live build for one it lacks, none when no live build serves it; a
// child pins to its parent's build unless its workflow auto-upgrades; the
// handlers a worker registers; who may decide a pinned run.
func TestBuildPins(t *testing.T) {
	fn := func(*replay.Unit, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	live := ""
	c := New(&Config{BuildID: "b2", LiveBuild: func(context.Context, string) string { return live }})
	defer c.Close()
	auto := workflow.New("auto", func(workflow.Context, int) (int, error) { return 0, nil }).Versioning(workflow.AutoUpgrade)
	pinned := workflow.New("pinned", func(workflow.Context, int) (int, error) { return 0, nil })
	for _, d := range []interface{ Name() string }{auto, pinned} {
		if err := c.RegisterWorkflow(d.Name(), fn, d); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	check := func(what string, pin, build, wantPin, wantBuild string) {
		t.Helper()
		if pin != wantPin || build != wantBuild {
			t.Errorf("%s: pin %q, build %q; want %q, %q", what, pin, build, wantPin, wantBuild)
		}
	}
	pin, build := c.startBuild(ctx, "pinned")
	check("start of a pinned workflow registered here", pin, build, "b2", "b2")
	pin, build = c.startBuild(ctx, "auto")
	check("start of an auto-upgrading workflow registered here", pin, build, "", "b2")
	pin, build = c.startBuild(ctx, "elsewhere")
	check("start of a workflow no live build serves", pin, build, "", "")
	live = "b9"
	pin, build = c.startBuild(ctx, "elsewhere")
	check("start of a workflow served by live build b9", pin, build, "b9", "b9")
	pin, build = c.childBuild(ctx, "pinned", "b1")
	check("child of a run pinned to b1", pin, build, "b1", "b1")
	pin, build = c.childBuild(ctx, "elsewhere", "b1")
	check("child, of a workflow not registered here, of a run pinned to b1", pin, build, "b1", "b1")
	pin, build = c.childBuild(ctx, "auto", "b1")
	check("auto-upgrading child of a run pinned to b1", pin, build, "", "b2")
	pin, build = c.childBuild(ctx, "pinned", "")
	check("child of a run that is not pinned", pin, build, "b2", "b2")

	hs := c.Handlers()
	slices.Sort(hs)
	if want := []string{"workflow:auto", "workflow:pinned", "workflow:pinned@b2"}; !slices.Equal(hs, want) {
		t.Errorf("Handlers() = %v, want %v", hs, want)
	}
	if !c.mayDecide("") || !c.mayDecide("b2") || c.mayDecide("b1") {
		t.Error("mayDecide: want runs not pinned and pinned to b2, not those pinned to b1")
	}
	st := &wfState{Queue: "q", Build: "b1"}
	if h := st.handler("w"); h != store.WorkflowBuildHandler("w", "b1") {
		t.Errorf("the handler of a run pinned to b1 is %q", h)
	}
	if h := (&wfState{Queue: "q"}).handler("w"); h != store.WorkflowHandler("w") {
		t.Errorf("the handler of a run not pinned is %q", h)
	}
	if p := (&wfState{Queue: "q"}).timerPayload(); p != nil {
		t.Errorf("the timer payload of a run not pinned is %s, want none", p)
	}
	if pin := timerPin(&store.Task{Payload: st.timerPayload()}); pin != "b1" {
		t.Errorf("the timer of a run pinned to b1 reads pin %q", pin)
	}
}
