package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// Documents submitted at run time, runs pinned to the content they
// started with, and the run's created_by.

// pinnedV1 waits for "go", then notifies the user who started the run.
const pinnedV1 = `
name: doc-pinned
steps:
  hold:
    wait: {events: [go]}
    on: {go: notify}
  notify:
    action: pushover_send
    args: {message: "v1 for {{run.created_by}}", user: "{{run.created_by}}"}
    done: true
`

// pinnedV2 takes another step after the wait, chosen by a condition on
// run.created_by.
const pinnedV2 = `
name: doc-pinned
steps:
  hold:
    wait: {events: [go]}
    on: {go: route}
  route:
    action: is_admin
    args: {user: "{{run.created_by}}"}
    branch:
      - {if: 'run.created_by == "bob"', then: add}
      - {else: greet}
  add:
    action: knowledge_add
    args: {title: "v2 by {{run.created_by}}"}
    done: true
  greet:
    action: get_greeting
    args: {user: "{{run.created_by}}"}
    done: true
`

// docClient starts a client that runs stored documents with tools.
func docClient(t *testing.T, st store.Store, tools *docTools, flows ...*flow.Flow) *heph.Client {
	t.Helper()
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"default": 8}, PollInterval: 50 * time.Millisecond, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(flows...); err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterDocuments(ctxT(t), tools.reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(c) })
	return c
}

func testDocPinned(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	tools := newDocTools(t)
	c1 := docClient(t, st, tools)
	e := &env{t: t, c: c1, st: st}
	ctx := ctxT(t)

	d1, err := c1.PutDocument(ctx, "doc-pinned", heph.DocumentYAML, []byte(pinnedV1))
	if err != nil {
		t.Fatal(err)
	}
	start := func(version int, by string) *heph.Run {
		t.Helper()
		r, err := c1.StartDocument(ctx, "doc-pinned", version, map[string]string{"created_by": "not-" + by}, &heph.StartOptions{CreatedBy: by})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r1 := start(0, "ann")
	if ref, ok := r1.Document(); !ok || ref != (heph.DocumentRef{Name: "doc-pinned", Version: 1, Hash: d1.Hash}) || r1.Version != 1 {
		t.Fatalf("run 1 is pinned to %+v (%v), flow version %d; want version 1, hash %s", ref, ok, r1.Version, d1.Hash)
	}
	wantJSON(t, r1.Metadata["created_by"], `"ann"`)
	e.waitStatus(r1.ID, heph.StatusWaiting)

	// Editing the document while run 1 waits: a new version.
	d2, err := c1.PutDocument(ctx, "doc-pinned", heph.DocumentYAML, []byte(pinnedV2))
	if err != nil {
		t.Fatal(err)
	}
	if d2.Version != 2 || d2.Hash == d1.Hash {
		t.Fatalf("the edit stored version %d, hash %s", d2.Version, d2.Hash)
	}
	if err := c1.ResumeRun(ctx, r1.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	done := e.waitStatus(r1.ID, heph.StatusCompleted)
	// v1's path, as the user who started the run (not the input's field).
	wantJSON(t, done.Output, `{"notify":"sent to ann: v1 for ann"}`)
	if h := e.history(r1.ID); count(h, hephtype.EventStepCompleted, "notify") != 1 || count(h, hephtype.EventStepCompleted, "route") != 0 {
		t.Errorf("run 1 left v1's path: %v", h)
	}

	// A new run takes v2; its condition and templates read created_by.
	for _, tc := range []struct{ by, out string }{
		{"bob", `{"add":"added v2 by bob"}`},
		{"carol", `{"greet":"hello carol"}`},
	} {
		r := start(0, tc.by)
		if ref, _ := r.Document(); r.Version != 2 || ref.Hash != d2.Hash {
			t.Fatalf("a new run started on version %d (%+v), want 2", r.Version, ref)
		}
		e.waitStatus(r.ID, heph.StatusWaiting)
		if err := c1.ResumeRun(ctx, r.ID, "go", nil); err != nil {
			t.Fatal(err)
		}
		wantJSON(t, e.waitStatus(r.ID, heph.StatusCompleted).Output, tc.out)
	}

	// A run pinned to v1 by version, then a restart: the new process has
	// only the action registry, loads v1 from the store and finishes it.
	r3 := start(1, "dave")
	if r3.Version != 1 {
		t.Fatalf("run 3 started on version %d, want 1", r3.Version)
	}
	e.waitStatus(r3.ID, heph.StatusWaiting)
	stopClient(c1)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := reopen(t)
	c2 := docClient(t, st2, newDocToolsLike(t, tools))
	e = &env{t: t, c: c2, st: st2}
	if err := c2.ResumeRun(ctx, r3.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	wantJSON(t, e.waitStatus(r3.ID, heph.StatusCompleted).Output, `{"notify":"sent to dave: v1 for dave"}`)
	if n := tools.calls["pushover_send"].Load(); n != 2 {
		t.Errorf("pushover_send called %d times, want 2 (runs 1 and 3)", n)
	}
}

// testDocPinnedLoader: clients that took their registry before a
// document was stored. A worker registers the version when it calls
// RegisterDocuments again, and a client that resumes a run pinned to it
// loads that exact content by hash from the store.
func testDocPinnedLoader(t *testing.T, b Backend) {
	st, _ := b.New(t)
	tools := newDocTools(t)
	ctx := ctxT(t)
	worker := docClient(t, st, tools) // no document is stored yet
	steer, err := heph.New(&heph.Config{Store: st, PollInterval: 50 * time.Millisecond, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(steer) })
	if err := steer.RegisterDocuments(ctx, newDocToolsLike(t, tools).reg); err != nil {
		t.Fatal(err)
	}
	submitter, err := heph.New(&heph.Config{Store: st, PollInterval: 50 * time.Millisecond, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(submitter) })
	if err := submitter.RegisterDocuments(ctx, newDocToolsLike(t, tools).reg); err != nil {
		t.Fatal(err)
	}
	if _, err := submitter.PutDocument(ctx, "doc-pinned", heph.DocumentYAML, []byte(pinnedV1)); err != nil {
		t.Fatal(err)
	}
	r, err := submitter.StartDocument(ctx, "doc-pinned", 1, nil, &heph.StartOptions{CreatedBy: "erin"})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.RegisterDocuments(ctx, tools.reg); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: worker, st: st}
	e.waitStatus(r.ID, heph.StatusWaiting)
	// steer has not registered doc-pinned version 1: its resume loads it.
	if got, _ := steer.GetRun(ctx, r.ID); len(got.Steps) != 2 || got.Steps[0].Name != "" {
		t.Fatalf("steer knows the flow before the resume: %+v", got.Steps)
	}
	if err := steer.ResumeRun(ctx, r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	wantJSON(t, e.waitStatus(r.ID, heph.StatusCompleted).Output, `{"notify":"sent to erin: v1 for erin"}`)
	if got, _ := steer.GetRun(ctx, r.ID); len(got.Steps) != 2 || got.Steps[0].Name != "hold" || got.Steps[1].Name != "notify" {
		t.Errorf("steer did not load the run's document: steps %+v", got.Steps)
	}
}

// testDocStartErrors: what StartDocument and StartOptions refuse.
func testDocStartErrors(t *testing.T, b Backend) {
	st, _ := b.New(t)
	tools := newDocTools(t)
	ctx := ctxT(t)
	bare := startClient(t, st, nil)
	if _, err := bare.StartDocument(ctx, "doc-pinned", 0, nil, nil); !errors.Is(err, heph.ErrNoDocumentRegistry) {
		t.Errorf("StartDocument without a registry: %v, want ErrNoDocumentRegistry", err)
	}
	c := docClient(t, st, tools)
	if _, err := c.StartDocument(ctx, "doc-missing", 0, nil, nil); !errors.Is(err, heph.ErrDocumentNotFound) {
		t.Errorf("StartDocument of an unknown name: %v, want ErrDocumentNotFound", err)
	}
	bad := strings.Replace(pinnedV1, "pushover_send", "no_such_action", 1)
	if _, err := c.PutDocument(ctx, "doc-bad", heph.DocumentYAML, []byte(bad)); err != nil {
		t.Fatal(err)
	}
	_, err := c.StartDocument(ctx, "doc-bad", 0, nil, nil)
	var pe *flowdoc.Error
	if !errors.As(err, &pe) || pe.Path != "steps.notify.action" || pe.Line != 8 {
		t.Errorf("StartDocument of a document naming an unknown action: %v, want a positioned flowdoc error at steps.notify.action, line 8", err)
	}
	if list, err := c.ListRuns(ctx, nil); err != nil || len(list.Runs) != 0 {
		t.Errorf("failed starts stored runs: %v, %v", list, err)
	}
	// created_by is the client's to set, not the caller's metadata.
	who := flow.New("doc-who")
	flow.Step(who, "who", func(ctx context.Context, _ any) (string, error) {
		return flow.CreatedBy(ctx)
	})
	if err := c.Register(who.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartRun(ctx, "doc-who", nil, &heph.StartOptions{Metadata: map[string]any{"created_by": "mallory"}}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("StartRun with metadata created_by: %v, want ErrInvalidInput", err)
	}
	r, err := c.Run(ctx, "doc-who", nil, &heph.StartOptions{CreatedBy: "frank"})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, r.Output, `{"who":"frank"}`)
}
