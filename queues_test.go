package hephaestus_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

type tenantInput struct {
	Tenant string `json:"tenant"`
}

// Concurrency keys: computed from the input by a flow or a workflow,
// overridden by the start options, checked before anything is written;
// queues: configured, paused and described through the client, with bad
// options refused as invalid input.
func TestConcurrencyKeysAndQueues(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "h.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(context.Background()) }()
	b := flow.New("tenanted").ConcurrencyKeyFrom("tenant")
	flow.Step(b, "a", func(ctx context.Context, in tenantInput) (string, error) { return in.Tenant, nil })
	wf := workflow.New("tenanted-wf", func(ctx workflow.Context, in tenantInput) (string, error) { return in.Tenant, nil }).
		ConcurrencyKey(func(in tenantInput) (string, error) { return "wf-" + in.Tenant, nil })
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(wf); err != nil {
		t.Fatal(err)
	}
	r, err := c.StartRun(ctx, "tenanted", tenantInput{Tenant: "acme"}, nil)
	if err != nil || r.ConcurrencyKey != "acme" {
		t.Fatalf("computed key: %+v, %v", r, err)
	}
	r, err = c.StartRun(ctx, "tenanted", tenantInput{Tenant: "acme"}, &heph.StartOptions{ConcurrencyKey: "given"})
	if err != nil || r.ConcurrencyKey != "given" {
		t.Fatalf("given key: %+v, %v", r, err)
	}
	for _, bad := range []struct {
		in   tenantInput
		opts *heph.StartOptions
	}{
		{tenantInput{Tenant: strings.Repeat("x", 201)}, nil},
		{tenantInput{Tenant: "a"}, &heph.StartOptions{ConcurrencyKey: "a\x00b"}},
	} {
		if _, err := c.StartRun(ctx, "tenanted", bad.in, bad.opts); !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("start with a bad key: %v, want ErrInvalidInput", err)
		}
	}
	w, err := c.StartWorkflow(ctx, "tenanted-wf", tenantInput{Tenant: "acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetRun(ctx, w.ID); err != nil || got.ConcurrencyKey != "wf-acme" {
		t.Fatalf("workflow's key: %+v, %v", got, err)
	}

	if _, err := c.GetQueue(ctx, "nothing"); !errors.Is(err, heph.ErrQueueNotFound) {
		t.Errorf("GetQueue of an unknown queue: %v", err)
	}
	for _, bad := range []heph.QueueOptions{
		{MaxRunning: -1},
		{Rate: heph.RateLimit{Limit: 5}},
		{Weights: map[string]int{"a": 1001}},
	} {
		if err := c.SetQueue(ctx, "default", bad); !errors.Is(err, heph.ErrInvalidInput) {
			t.Errorf("SetQueue(%+v): %v, want ErrInvalidInput", bad, err)
		}
	}
	opts := heph.QueueOptions{MaxRunningPerKey: 2, KeyRate: heph.RateLimit{Limit: 10, Period: time.Minute}}
	if err := c.SetQueue(ctx, "default", opts); err != nil {
		t.Fatal(err)
	}
	if err := c.PauseQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	q, err := c.GetQueue(ctx, "default")
	if err != nil || !q.Configured || !q.Paused || q.Options.MaxRunningPerKey != 2 || q.Ready != 2 {
		t.Fatalf("GetQueue: %+v, %v", q, err)
	}
	if err := c.ResumeQueue(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	qs, err := c.ListQueues(ctx)
	if err != nil || len(qs) == 0 || qs[0].Name != "default" || qs[0].Paused {
		t.Fatalf("ListQueues: %+v, %v", qs, err)
	}
}
