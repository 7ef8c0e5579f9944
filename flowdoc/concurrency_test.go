package flowdoc_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// concurrency_key names an input path: the runs' key for flow control.
func TestConcurrencyKey(t *testing.T) {
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "echo", func(ctx context.Context, c flowdoc.ActionCall, in json.RawMessage) (json.RawMessage, error) {
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}
	f, err := flowdoc.Load("ck.yaml", []byte("name: ck\nconcurrency_key: \"{{ input.account.tenant }}\"\nsteps: {a: {action: echo, done: true}}\n"), reg)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{`{"account":{"tenant":"acme"}}`: "acme", `{"account":{"tenant":7}}`: "7", `{}`: ""} {
		got, err := f.ConcurrencyKey(json.RawMessage(in))
		if err != nil || got != want {
			t.Errorf("key of %s: %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := f.ConcurrencyKey(json.RawMessage(`{"account":{"tenant":[1]}}`)); err == nil {
		t.Error("a list as the key: no error")
	}
}
