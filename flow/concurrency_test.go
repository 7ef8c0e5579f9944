package flow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/flow"
)

type tenantIn struct {
	Tenant string `json:"tenant"`
}

func oneStep(b *flow.Builder) *flow.Builder {
	flow.Step(b, "a", func(ctx context.Context, in tenantIn) (string, error) { return in.Tenant, nil })
	return b
}

func TestConcurrencyKeyFrom(t *testing.T) {
	f := oneStep(flow.New("ck").ConcurrencyKeyFrom("tenant")).MustBuild()
	for in, want := range map[string]string{`{"tenant":"acme"}`: "acme", `{"tenant":12}`: "12", `{"tenant":null}`: "", `{}`: "", `[]`: ""} {
		if got, err := f.ConcurrencyKey(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("key of %s: %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := f.ConcurrencyKey(json.RawMessage(`{"tenant":{"id":1}}`)); err == nil {
		t.Error("an object as the key: no error")
	}
	if got, _ := oneStep(flow.New("none")).MustBuild().ConcurrencyKey(json.RawMessage(`{"tenant":"x"}`)); got != "" {
		t.Errorf("a flow without a key computed %q", got)
	}
	_, err := oneStep(flow.New("bad").ConcurrencyKeyFrom("a..b")).Build()
	var ve *flow.ValidationError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), "ConcurrencyKeyFrom") {
		t.Errorf("a bad path: %v", err)
	}
}

func TestConcurrencyKeyFunc(t *testing.T) {
	b := flow.ConcurrencyKey(oneStep(flow.New("ck")), func(in tenantIn) (string, error) {
		if in.Tenant == "" {
			return "", errors.New("no tenant")
		}
		return "t-" + in.Tenant, nil
	})
	f := b.MustBuild()
	if got, err := f.ConcurrencyKey(json.RawMessage(`{"tenant":"acme"}`)); err != nil || got != "t-acme" {
		t.Errorf("key %q, %v", got, err)
	}
	if _, err := f.ConcurrencyKey(json.RawMessage(`{}`)); err == nil {
		t.Error("the function's error was lost")
	}
}
