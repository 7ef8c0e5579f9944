package flowdoc_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

const remoteDoc = `
name: remote_greet
steps:
  check:
    action: is_admin_remote
    args: {user: "{{input.user}}", n: "{{input.n}}"}
    branch:
      - if: result.admin == true && input.n > 1
        then: admin
      - else: others
  admin: {action: echo, args: {greeting: "hello {{steps.check.output.name}}"}, done: true}
  others:
    action: thumb
    map: input.items
    args: {item: "{{item}}", user: "{{input.user}}"}
    done: true
`

// A registry with a fallback makes every action it lacks remote: the
// steps that call them are remote steps whose worker receives the
// resolved arguments, and whose output the branch conditions read.
func TestRemoteActions(t *testing.T) {
	reg := tools(t)
	if _, err := flowdoc.Load("greet.yaml", []byte(remoteDoc), reg); err == nil {
		t.Fatal("a document naming unknown actions compiled without a fallback")
	}
	reg.SetFallback(flowdoc.RemoteAction)
	f, err := flowdoc.Load("greet.yaml", []byte(remoteDoc), reg)
	if err != nil {
		t.Fatal(err)
	}
	for step, want := range map[string]string{"check": "is_admin_remote", "admin": "", "others": "thumb"} {
		if s, _ := f.Step(step); s.Remote != want {
			t.Errorf("step %q: Remote = %q, want %q", step, s.Remote, want)
		}
	}
	ctx := context.Background()
	in := json.RawMessage(`{"input":{"user":"root","n":2,"items":["a","b"]}}`)
	check := flow.Call{RunID: "r1", Step: "check", Index: -1, Input: in}
	args, err := f.PrepareRemote(ctx, check)
	if err != nil || !jsonIs(args, `{"user":"root","n":2}`) {
		t.Fatalf("resolved arguments = %s, %v", args, err)
	}
	out, err := f.FinishRemote(ctx, check, json.RawMessage(`{"admin":true,"name":"Root"}`))
	if err != nil || out.Event != flowdoc.BranchEvent(0) {
		t.Fatalf("finish of an admin = %+v, %v; want branch 0", out, err)
	}
	out, err = f.FinishRemote(ctx, check, json.RawMessage(`{"admin":false}`))
	if err != nil || out.Event != flowdoc.ElseEvent {
		t.Fatalf("finish of another user = %+v, %v; want else", out, err)
	}
	elem := flow.Call{RunID: "r1", Step: "others", Index: 1, Input: in, Item: json.RawMessage(`"b"`)}
	args, err = f.PrepareRemote(ctx, elem)
	if err != nil || !jsonIs(args, `{"item":"b","user":"root"}`) {
		t.Fatalf("resolved arguments of element 1 = %s, %v", args, err)
	}

	// A fallback answers only for names nothing is registered under.
	if a, err := reg.Lookup("echo"); err != nil || a.Remote {
		t.Fatalf("Lookup(echo) = %+v, %v; want the Go action", a, err)
	}
	reg.SetFallback(func(string) *flowdoc.Action { return nil })
	if _, err := reg.Lookup("thumb"); !errors.Is(err, flowdoc.ErrUnknownAction) {
		t.Fatalf("Lookup with a fallback that declines: %v", err)
	}
	if err := reg.Register(flowdoc.RemoteAction("registered_remote")); err != nil {
		t.Fatalf("register a remote action: %v", err)
	}
}

func jsonIs(got json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && equalJSON(a, b)
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
