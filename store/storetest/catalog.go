package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

func catalogDef(kind, name string, version int, build, hash string) *store.Definition {
	return &store.Definition{
		Kind: kind, Name: name, Version: version, BuildID: build, Hash: hash,
		Spec: raw(`{"name":"` + name + `","hash":"` + hash + `"}`), InputSchema: raw(`{"type":"object"}`),
		Queues: []string{"default", "q2"}, Handlers: []string{kind + ":" + name}, Schedules: []string{"nightly"},
	}
}

// testCatalog: a publish is idempotent by hash, a changed flow or job kind
// version is refused (and the rest of the batch stored), a workflow keeps
// a row per build, and a build published again with another hash replaces
// its row; list and get filter and order as documented.
func testCatalog(t *testing.T, h *harness) {
	ctx := t.Context()
	s := h.s
	publish := func(now time.Time, by string, ds ...*store.Definition) error {
		return s.PublishDefinitions(ctx, &store.PublishDefinitionsParams{Definitions: ds, Now: now, By: by})
	}
	f1 := catalogDef(store.DefinitionFlow, "orders", 1, "b1", "h1")
	f2 := catalogDef(store.DefinitionFlow, "orders", 2, "b1", "h2")
	j1 := catalogDef(store.DefinitionJob, "email", 1, "b1", "hj")
	w1 := catalogDef(store.DefinitionWorkflow, "saga", 0, "b1", "hw1")
	w1.InputSchema, w1.Schedules = nil, nil
	if err := publish(at(0), "worker-a", f1, f2, j1, w1, f1); err != nil {
		t.Fatalf("publish: %v", err)
	}
	// Again, by another process of another build: nothing changes.
	again := *f1
	again.BuildID = "b2"
	if err := publish(at(time.Minute), "worker-b", &again, j1); err != nil {
		t.Fatalf("publish again: %v", err)
	}
	got, err := s.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionFlow, Name: "orders", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := *f1
	want.PublishedAt, want.PublishedBy = at(0).Truncate(time.Microsecond), "worker-a"
	if d := cmp.Diff(&want, got, opts); d != "" {
		t.Fatalf("GetDefinition (-want +got):\n%s", d)
	}
	// Version 0 is the highest.
	if got, err := s.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionFlow, Name: "orders"}); err != nil || got.Version != 2 || got.Hash != "h2" {
		t.Fatalf("latest: %+v, %v", got, err)
	}
	// A changed version is refused, naming it; the rest is stored.
	changed := catalogDef(store.DefinitionFlow, "orders", 1, "b3", "other")
	f3 := catalogDef(store.DefinitionFlow, "orders", 3, "b3", "h3")
	err = publish(at(2*time.Minute), "worker-c", changed, f3)
	var conflict *store.DefinitionConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, hephtype.ErrFlowConflict) || conflict.Name != "orders" || conflict.Version != 1 ||
		conflict.Stored != "h1" || conflict.Published != "other" || !strings.Contains(err.Error(), "new version") {
		t.Fatalf("changed version: %v (%+v)", err, conflict)
	}
	if got, err := s.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionFlow, Name: "orders", Version: 1}); err != nil || got.Hash != "h1" {
		t.Fatalf("refused version changed: %+v, %v", got, err)
	}
	if _, err := s.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionFlow, Name: "orders", Version: 3}); err != nil {
		t.Fatalf("version 3, published with the refused one: %v", err)
	}
	// Two changed contents of one version in one batch: refused too.
	dup := catalogDef(store.DefinitionJob, "sms", 1, "b1", "x")
	dup2 := catalogDef(store.DefinitionJob, "sms", 1, "b1", "y")
	if err := publish(at(2*time.Minute), "worker-c", dup, dup2); !errors.As(err, &conflict) || conflict.Name != "sms" {
		t.Fatalf("two contents of one version in a batch: %v", err)
	}
	// Workflows: a row per build; a build published again with another
	// hash replaces its row.
	w2 := catalogDef(store.DefinitionWorkflow, "saga", 0, "b2", "hw2")
	w1b := catalogDef(store.DefinitionWorkflow, "saga", 0, "b1", "hw1-fixed")
	if err := publish(at(3*time.Minute), "worker-d", w2, w1b); err != nil {
		t.Fatalf("publish workflow builds: %v", err)
	}
	ws, err := s.ListDefinitions(ctx, &store.ListDefinitionsParams{Kind: store.DefinitionWorkflow})
	if err != nil {
		t.Fatal(err)
	}
	var builds []string
	for _, w := range ws {
		builds = append(builds, w.BuildID+"="+w.Hash+"@"+w.PublishedBy)
	}
	// Newest first within a version.
	if d := cmp.Diff([]string{"b1=hw1-fixed@worker-d", "b2=hw2@worker-d"}, builds); d != "" && cmp.Diff([]string{"b2=hw2@worker-d", "b1=hw1-fixed@worker-d"}, builds) != "" {
		t.Fatalf("workflow rows: %v", builds)
	}
	if got, err := s.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionWorkflow, Name: "saga", BuildID: "b1"}); err != nil || got.Hash != "hw1-fixed" || got.InputSchema == nil || !got.PublishedAt.Equal(at(3*time.Minute).Truncate(time.Microsecond)) {
		t.Fatalf("workflow build b1, replaced: %+v, %v", got, err)
	}
	all, err := s.ListDefinitions(ctx, &store.ListDefinitionsParams{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range all {
		keys = append(keys, d.Kind+"/"+d.Name+"/"+string(rune('0'+d.Version)))
	}
	wantKeys := []string{"flow/orders/1", "flow/orders/2", "flow/orders/3", "job/email/1", "job/sms/1", "workflow/saga/0", "workflow/saga/0"}
	if d := cmp.Diff(wantKeys, keys); d != "" {
		t.Fatalf("ListDefinitions order (-want +got):\n%s", d)
	}
	if named, err := s.ListDefinitions(ctx, &store.ListDefinitionsParams{Name: "email"}); err != nil || len(named) != 1 || named[0].Kind != store.DefinitionJob {
		t.Fatalf("list by name: %+v, %v", named, err)
	}
	if _, err := s.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionFlow, Name: "email"}); !errors.Is(err, store.ErrDefinitionNotFound) {
		t.Fatalf("job kind got as a flow: %v", err)
	}
	if _, err := s.GetDefinition(ctx, &store.GetDefinitionParams{Kind: store.DefinitionFlow, Name: "orders", Version: 9}); !errors.Is(err, store.ErrDefinitionNotFound) {
		t.Fatalf("missing version: %v", err)
	}
}

// testCatalogValidation: bad definitions are refused naming what is wrong,
// and nothing of the batch is stored.
func testCatalogValidation(t *testing.T, h *harness) {
	ctx := t.Context()
	for name, tc := range map[string]struct {
		d    *store.Definition
		want string
	}{
		"kind":             {catalogDef("document", "d", 1, "", "h"), `Kind "document"`},
		"name":             {catalogDef(store.DefinitionFlow, "", 1, "", "h"), "Name must be"},
		"flow version":     {catalogDef(store.DefinitionFlow, "f", 0, "", "h"), "Version must be positive"},
		"workflow version": {catalogDef(store.DefinitionWorkflow, "w", 2, "", "h"), "Version must be 0"},
		"hash":             {catalogDef(store.DefinitionJob, "j", 1, "", ""), "Hash is empty"},
		"spec":             {&store.Definition{Kind: store.DefinitionJob, Name: "j", Version: 1, Hash: "h", Spec: raw("{")}, "Spec is not JSON"},
	} {
		ok := catalogDef(store.DefinitionFlow, "fine", 1, "", "h")
		err := h.s.PublishDefinitions(ctx, &store.PublishDefinitionsParams{Definitions: []*store.Definition{ok, tc.d}, Now: at(0)})
		if !errors.Is(err, hephtype.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "definition 1") {
			t.Errorf("%s: %v, want ErrInvalidInput naming definition 1 and %q", name, err, tc.want)
		}
	}
	if ds, err := h.s.ListDefinitions(ctx, &store.ListDefinitionsParams{}); err != nil || len(ds) != 0 {
		t.Fatalf("a refused batch stored %d definitions (%v)", len(ds), err)
	}
}
