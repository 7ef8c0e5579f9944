package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/flow"
)

// checkSpec asserts that fl survives its spec's JSON: FromSpec builds a
// stub with the same shape, steps (but for the retry predicate, which is
// code), edges, business key and input type name.
func checkSpec(t *testing.T, fl *flow.Flow) *flow.Flow {
	t.Helper()
	b, err := json.Marshal(fl.Spec())
	if err != nil {
		t.Fatalf("marshal spec of %q: %v", fl.Name(), err)
	}
	var s flow.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("unmarshal spec of %q: %v", fl.Name(), err)
	}
	stub, err := flow.FromSpec(&s)
	if err != nil {
		t.Fatalf("FromSpec %q: %v\nspec: %s", fl.Name(), err, b)
	}
	if stub.Shape() != fl.Shape() || !stub.Stub() || fl.Stub() {
		t.Fatalf("stub of %q: shape %s (stub %v), want %s", fl.Name(), stub.Shape(), stub.Stub(), fl.Shape())
	}
	noFunc := cmp.Transformer("retry", func(p flow.RetryPolicy) flow.RetryPolicy { p.NonRetryable = nil; return p })
	if d := cmp.Diff(fl.Steps(), stub.Steps(), noFunc); d != "" {
		t.Fatalf("stub of %q has other steps (-want +got):\n%s", fl.Name(), d)
	}
	if d := cmp.Diff(fl.Edges(), stub.Edges()); d != "" {
		t.Fatalf("stub of %q has other edges (-want +got):\n%s", fl.Name(), d)
	}
	if d := cmp.Diff(fl.Spec(), stub.Spec()); d != "" {
		t.Fatalf("stub of %q has another spec (-want +got):\n%s", fl.Name(), d)
	}
	return stub
}

func TestSpecRoundTrip(t *testing.T) {
	named := map[string]func() *flow.Flow{"order": orderFlow, "pgflow": processOrderFlow, "mixed": mixedFlow, "approval": approvalFlow}
	for name, mk := range named {
		t.Run(name, func(t *testing.T) { checkSpec(t, mk()) })
	}
	built := 0
	for i, seed := range fzSeeds() {
		b, _ := decodeFlow(seed, &fzRuntime{cancel: func() {}})
		if fl, err := b.Build(); err == nil {
			built++
			t.Run("seed"+string(rune('0'+i)), func(t *testing.T) { checkSpec(t, fl) })
		}
	}
	if built == 0 {
		t.Fatal("no seed builds")
	}
}

func TestStubHasNoCode(t *testing.T) {
	type In struct {
		Tenant string `json:"tenant"`
	}
	b := flow.New("keyed").Version(3).BusinessKey("order", flow.ScopeForever)
	flow.Input[In](b)
	flow.ConcurrencyKey(b, func(in In) (string, error) { return in.Tenant, nil })
	flow.Step(b, "a", func(ctx context.Context, in In) (int, error) { return 1, nil },
		flow.Retry(flow.RetryPolicy{MaxAttempts: 7, Jitter: -1}), flow.Waits(0))
	fl := b.MustBuild()
	stub := checkSpec(t, fl)
	if s := fl.Spec(); !s.ConcurrencyKeyFunc || s.InputType != "flow_test.In" || s.BusinessKey != "order" {
		t.Fatalf("spec: %+v", s)
	}
	if _, err := stub.ConcurrencyKey(json.RawMessage(`{"tenant":"x"}`)); err == nil || !strings.Contains(err.Error(), "give the concurrency key") {
		t.Fatalf("stub concurrency key: %v, want an error asking for an explicit key", err)
	}
	if k, err := fl.ConcurrencyKey(json.RawMessage(`{"tenant":"x"}`)); err != nil || k != "x" {
		t.Fatalf("original concurrency key: %q, %v", k, err)
	}
	_, err := stub.Invoke(context.Background(), flow.Call{RunID: "r", Step: "a", Input: json.RawMessage(`{}`)})
	if !errors.Is(err, flow.ErrNoCode) {
		t.Fatalf("stub step ran: %v, want ErrNoCode", err)
	}

	path := flow.New("path").ConcurrencyKeyFrom("account.id")
	flow.Step(path, "a", func(ctx context.Context, in any) (any, error) { return nil, nil })
	stub = checkSpec(t, path.MustBuild())
	if k, err := stub.ConcurrencyKey(json.RawMessage(`{"account":{"id":"acc"}}`)); err != nil || k != "acc" {
		t.Fatalf("stub key from path: %q, %v", k, err)
	}
}

func TestFromSpecRefusesBadSpecs(t *testing.T) {
	s := mixedFlow().Spec()
	s.Shape = "0000"
	if _, err := flow.FromSpec(s); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Fatalf("tampered shape: %v", err)
	}
	s = mixedFlow().Spec()
	s.Steps[0].Timeout = "soon"
	if _, err := flow.FromSpec(s); err == nil || !strings.Contains(err.Error(), `step "validate": timeout "soon"`) {
		t.Fatalf("bad duration: %v", err)
	}
	s = mixedFlow().Spec()
	s.Edges = append(s.Edges, flow.SpecEdge{From: "ship", Event: "ok", To: "nowhere"})
	s.Shape = ""
	if _, err := flow.FromSpec(s); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("edge to an unknown step: %v", err)
	}
	if _, err := flow.FromSpec(nil); err == nil {
		t.Fatal("nil spec accepted")
	}
}
