package cli_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// heph definitions and heph definitions show list what a worker process
// published to the catalog, through a server with no Go code; a
// workflow's LATEST is "-".
func TestDefinitionsCatalogCLI(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "h.db")
	env := secretsServer(t, path, "k1:"+ringKey(1))
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	w, err := hephaestus.New(&hephaestus.Config{Store: st, BuildID: "cli-build", Queues: map[string]int{}})
	if err != nil {
		t.Fatal(err)
	}
	b := flow.New("billing").Version(3)
	flow.Input[struct {
		Account string `json:"account"`
	}](b)
	flow.Step(b, "charge", func(ctx context.Context, in any) (any, error) { return nil, nil })
	if err := w.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterWorkflows(workflow.New("onboard", func(ctx workflow.Context, in string) (string, error) { return in, nil })); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })

	wantLines(t, "definitions", ok(t, env, "definitions"), `^KIND\s+NAME\s+LATEST\s+VERSIONS\s+BUILDS\s+SERVED$`,
		`^flow\s+billing\s+3\s+3\s+1\s+(yes|no)$`, `^workflow\s+onboard\s+-\s+-\s+1\s+(yes|no)$`)
	out := ok(t, env, "definitions", "show", "billing")
	wantLines(t, "show", out, `^Kind:\s+flow$`, `^Latest:\s+3$`, `^VERSION\s+BUILD\s+HASH`, `^3\s+cli-build\s+`, `^Input schema \(version 3\):$`)
	if !strings.Contains(out, `"account"`) {
		t.Fatalf("show prints no input schema:\n%s", out)
	}
	var d struct {
		Kind      string `json:"kind"`
		Published []struct {
			Spec json.RawMessage `json:"spec"`
		} `json:"published"`
	}
	if err := json.Unmarshal([]byte(ok(t, env, "definitions", "show", "onboard", "--kind", "workflow", "-o", "json")), &d); err != nil || d.Kind != "workflow" ||
		len(d.Published) != 1 || !strings.Contains(string(d.Published[0].Spec), `"cli-build"`) {
		t.Fatalf("show -o json: %+v, %v", d, err)
	}
	if code, _, errOut := heph(t, env, "definitions", "show", "nope"); code == 0 || !strings.Contains(errOut, "nope") {
		t.Fatalf("show of an unknown name: exit %d, %s", code, errOut)
	}
}
