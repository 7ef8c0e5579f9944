package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
)

func TestRemoteStepSpecAndDefaults(t *testing.T) {
	b := flow.New("remote")
	a := flow.Step(b, "a", func(ctx context.Context, in int) (int, error) { return in + 1, nil })
	flow.Remote(b, "r", "resize", flow.DependsOn(a.Name()))
	flow.RemoteMap(b, "m", "thumb", flow.Over("", "items"), flow.DependsOn("r"))
	f, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for step, want := range map[string]string{"a": "", "r": "resize", "m": "thumb"} {
		if s, _ := f.Step(step); s.Remote != want {
			t.Errorf("step %q: Remote = %q, want %q", step, s.Remote, want)
		}
	}
	ctx := context.Background()
	doc := json.RawMessage(`{"input":{"items":[1,2]},"a":5}`)
	in, err := f.PrepareRemote(ctx, flow.Call{RunID: "x", Step: "r", Index: -1, Input: doc})
	if err != nil || string(in) != string(doc) {
		t.Fatalf("default prepare of a step = %s, %v; want the input document", in, err)
	}
	in, err = f.PrepareRemote(ctx, flow.Call{RunID: "x", Step: "m", Index: 1, Input: doc, Item: json.RawMessage(`2`)})
	if err != nil || string(in) != "2" {
		t.Fatalf("default prepare of a map element = %s, %v; want the element", in, err)
	}
	out, err := f.FinishRemote(ctx, flow.Call{RunID: "x", Step: "r", Index: -1, Input: doc}, json.RawMessage(`{"w":3}`))
	if err != nil || out.Event != flow.EventOK || string(out.Output) != `{"w":3}` {
		t.Fatalf("default finish = %+v, %v", out, err)
	}
	if _, err := f.FinishRemote(ctx, flow.Call{RunID: "x", Step: "r", Index: -1, Input: doc}, json.RawMessage(`{nope`)); err == nil || flow.DefaultRetryPolicy.Retryable(err) {
		t.Fatalf("finish with output that is not JSON: %v, want a permanent error", err)
	}
	if _, err := f.PrepareRemote(ctx, flow.Call{RunID: "x", Step: "a", Index: -1, Input: doc}); err == nil {
		t.Fatal("PrepareRemote of a local step succeeded")
	}
	// Step code never runs a remote step in this process.
	if _, err := f.Invoke(ctx, flow.Call{RunID: "x", Step: "r", Index: -1, Input: doc}); err == nil || !strings.Contains(err.Error(), "outside the process") {
		t.Fatalf("Invoke of a remote step: %v", err)
	}
}

func TestRemoteHooksRunInTheCallContext(t *testing.T) {
	b := flow.New("hooks")
	a := flow.Step(b, "a", func(ctx context.Context, in int) (int, error) { return in + 1, nil })
	flow.Remote(b, "r", "score", flow.DependsOn(a.Name()), flow.Events("high", "low"),
		flow.RemotePrepare(func(ctx context.Context, in flow.RemoteInput) (json.RawMessage, error) {
			n, err := a.Output(ctx)
			if err != nil {
				return nil, err
			}
			info, _ := flow.CallInfo(ctx)
			return json.Marshal(map[string]any{"n": n, "run": info.RunID, "input": in})
		}),
		flow.RemoteFinish(func(ctx context.Context, in flow.RemoteInput, out json.RawMessage) (flow.Result[json.RawMessage], error) {
			var score int
			if err := json.Unmarshal(out, &score); err != nil {
				return flow.Result[json.RawMessage]{}, flow.NonRetryable(err)
			}
			if score > 5 {
				return flow.Emit("high", out), nil
			}
			return flow.Emit("low", in), nil
		}))
	b.Edge("r", "high", flow.Done).Edge("r", "low", flow.Done)
	f, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := flow.Call{RunID: "run-1", Step: "r", Index: -1, Input: json.RawMessage(`{"input":7,"a":8}`)}
	in, err := f.PrepareRemote(ctx, call)
	if err != nil || string(in) != `{"input":7,"n":8,"run":"run-1"}` {
		t.Fatalf("prepare = %s, %v", in, err)
	}
	out, err := f.FinishRemote(ctx, call, json.RawMessage(`9`))
	if err != nil || out.Event != "high" || string(out.Output) != "9" {
		t.Fatalf("finish 9 = %+v, %v", out, err)
	}
	out, err = f.FinishRemote(ctx, call, json.RawMessage(`1`))
	if err != nil || out.Event != "low" || string(out.Output) != "7" {
		t.Fatalf("finish 1 = %+v, %v", out, err)
	}
	if _, err := f.FinishRemote(ctx, call, json.RawMessage(`"x"`)); err == nil {
		t.Fatal("finish with a hook error succeeded")
	}
}

func TestRemoteBuildErrors(t *testing.T) {
	b := flow.New("bad")
	flow.Step(b, "a", func(ctx context.Context, in int) (int, error) { return in, nil },
		flow.RemotePrepare(func(ctx context.Context, in flow.RemoteInput) (json.RawMessage, error) { return in, nil }))
	flow.Remote(b, "r", "has space", flow.DependsOn("a"))
	flow.Remote(b, "e", "", flow.DependsOn("r"))
	_, err := b.Build()
	var rules []flow.Rule
	for _, e := range flow.ValidationErrors(err) {
		rules = append(rules, e.Rule)
	}
	for _, want := range []string{`step "a": RemotePrepare and RemoteFinish apply only to remote steps`, `step "r": remote handler "has space" is not valid`, `step "e": remote handler "" is not valid`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build: %v; want it to say %q", err, want)
		}
	}
	finish := func(ctx context.Context, in flow.RemoteInput, out json.RawMessage) (flow.Result[json.RawMessage], error) {
		return flow.Ok(out), nil
	}
	if _, err := flow.New("d").Defaults(flow.RemoteFinish(finish)).Build(); err == nil || !strings.Contains(err.Error(), "belong to single remote steps") {
		t.Error("RemoteFinish in Defaults was accepted")
	}
	var ve *flow.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("errors are not *ValidationError: %v", rules)
	}
}
