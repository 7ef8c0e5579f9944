package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
)

type shopOrder struct {
	Item  string `json:"item" jsonschema:"required"`
	Count int    `json:"count"`
}

// A server whose client has no Go code lists, shows, draws and starts a
// flow that a worker process published to the catalog; the worker runs
// it.
func TestCatalogServerWithoutCode(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		st := b.open(t)
		ctx := context.Background()
		worker, err := heph.New(&heph.Config{Store: st, Logger: quietLogger(), BuildID: "w1"})
		if err != nil {
			t.Fatal(err)
		}
		fb := flow.New("shop")
		flow.Input[shopOrder](fb)
		flow.Step(fb, "pack", func(ctx context.Context, o shopOrder) (string, error) { return strings.Repeat(o.Item, o.Count), nil })
		if err := worker.Register(fb.MustBuild()); err != nil {
			t.Fatal(err)
		}
		if err := worker.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = worker.Stop(context.Background()) })
		bare, err := heph.New(&heph.Config{Store: st, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bare.Stop(context.Background()) })
		e := serve(t, st, bare, nil)

		var ds []Definition
		e.api.call(http.MethodGet, "/api/v1/definitions", nil, http.StatusOK, &ds)
		if len(ds) != 1 || ds[0].Kind != "flow" || ds[0].Name != "shop" || ds[0].Latest != 1 || ds[0].Local || len(ds[0].Published) != 1 ||
			ds[0].Published[0].BuildID != "w1" || !strings.Contains(string(ds[0].Published[0].InputSchema), `"item"`) || ds[0].Published[0].Spec != nil {
			t.Fatalf("definitions of a server without code: %+v", ds)
		}
		var s Schedule
		e.api.call(http.MethodPost, "/api/v1/schedules", map[string]any{"id": "hourly-shop", "target_kind": "flow", "target_name": "shop", "cron": "0 * * * *",
			"input": map[string]any{"item": "a", "count": 1}, "paused": true}, http.StatusCreated, &s)
		var d DefinitionDetail
		e.api.call(http.MethodGet, "/api/v1/definitions/shop?kind=flow", nil, http.StatusOK, &d)
		if len(d.Published) != 1 || !strings.Contains(string(d.Published[0].Spec), `"pack"`) || len(d.Schedules) != 1 || d.Schedules[0] != "hourly-shop" {
			t.Fatalf("definition detail: %+v", d)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/definitions/nope"}).problem(t, http.StatusNotFound)
		e.api.do(req{method: http.MethodGet, path: "/api/v1/definitions/shop?kind=flowz", invalid: true}).problem(t, http.StatusBadRequest)

		var g struct {
			Flow  string                `json:"flow"`
			Nodes []struct{ ID string } `json:"nodes"`
		}
		e.api.call(http.MethodGet, "/api/v1/definitions/shop/graph", nil, http.StatusOK, &g)
		if g.Flow != "shop" || len(g.Nodes) == 0 {
			t.Fatalf("graph of a catalog flow: %+v", g)
		}
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"kind": "flow", "name": "shop", "input": map[string]any{"item": "a", "count": "two"}}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, "/count") {
			t.Fatalf("a bad input field: %+v", p)
		}
		var r Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "flow", "name": "shop", "input": map[string]any{"item": "ab", "count": 2}}, http.StatusCreated, &r)
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &r)
		if r.Status != "completed" {
			t.Fatalf("run started from the catalog: %+v", r)
		}
	})
}
