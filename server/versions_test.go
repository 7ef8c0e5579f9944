package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
)

// vflows are versions 1 and 2 of flow "vflow".
func vflows() []*flow.Flow {
	var fs []*flow.Flow
	for v := 1; v <= 2; v++ {
		b := flow.New("vflow").Version(v)
		flow.Step(b, "only", func(ctx context.Context, in any) (int, error) { return v, nil })
		fs = append(fs, b.MustBuild())
	}
	return fs
}

// The version routes: rules set, read and cleared; bad rules are 400
// naming the field; retire refuses new starts (409) and records who;
// delete hides a version.
func TestVersionRoutes(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		if err := e.client.Register(vflows()...); err != nil {
			t.Fatal(err)
		}
		api := e.api
		const base = "/api/v1/definitions/vflow"

		var vs Versions
		api.call(http.MethodGet, base+"/versions", nil, http.StatusOK, &vs)
		if vs.Name != "vflow" || vs.Rule != nil || vs.Latest != 2 || len(vs.Versions) != 2 || vs.Versions[0].State != "active" {
			t.Fatalf("versions = %+v", vs)
		}
		api.do(req{method: http.MethodGet, path: "/api/v1/definitions/nothing/versions"}).problem(t, http.StatusNotFound)
		api.do(req{method: http.MethodGet, path: base + "/version-rule"}).problem(t, http.StatusNotFound)

		// Bad rules: 400 naming the field.
		for _, tc := range []struct {
			body  any
			field string
		}{
			{map[string]any{"type": "percentage", "split": map[string]int{"1": 90, "2": 5}}, "split"},
			{map[string]any{"type": "field", "field": "plan", "map": map[string]int{"x": 2}}, "default"},
			{map[string]any{"type": "pinned"}, "version"},
		} {
			p := api.do(req{method: http.MethodPut, path: base + "/version-rule", body: tc.body}).problem(t, http.StatusBadRequest)
			if len(p.Errors) != 1 || p.Errors[0].Path != tc.field {
				t.Errorf("PUT %v: problem %+v, want the field %q", tc.body, p, tc.field)
			}
		}
		p := api.do(req{method: http.MethodPut, path: base + "/version-rule", body: map[string]any{"type": "pinned", "version": 7}}).problem(t, http.StatusNotFound)
		if !strings.Contains(p.Detail, "no version 7") {
			t.Errorf("unknown version: %+v", p)
		}
		api.do(req{method: http.MethodPut, path: base + "/version-rule", body: `{"type":"pinned","version":1,"extra":1}`, invalid: true}).problem(t, http.StatusBadRequest)

		var rule heph.VersionRule
		api.call(http.MethodPut, base+"/version-rule", map[string]any{"type": "pinned", "version": 1}, http.StatusOK, &rule)
		if rule.Type != "pinned" || rule.Version != 1 {
			t.Fatalf("PUT rule = %+v", rule)
		}
		var run Run
		api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "vflow", "input": nil}, http.StatusCreated, &run)
		var why string
		if err := json.Unmarshal(run.Metadata[heph.MetaVersionRule], &why); err != nil || run.Version != 1 || why != "pinned" {
			t.Fatalf("run under the pinned rule: version %d, metadata %s", run.Version, run.Metadata)
		}

		// Retire 1: the rule's starts are refused, who retired it recorded.
		api.call(http.MethodPost, base+"/versions/1/retire", nil, http.StatusOK, &vs)
		if vs.Versions[0].State != "retired" || vs.Versions[0].ChangedBy != "insecure" || vs.Latest != 2 || vs.Versions[0].ActiveRuns+vs.Versions[0].FinishedRuns != 1 {
			t.Fatalf("after retire: %+v", vs.Versions[0])
		}
		p = api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"name": "vflow"}}).problem(t, http.StatusConflict)
		if !strings.Contains(p.Detail, "version 1, chosen by the version rule (pinned 1: pinned), is retired") {
			t.Errorf("start on a retired version: %+v", p)
		}
		api.do(req{method: http.MethodPut, path: base + "/version-rule", body: map[string]any{"type": "pinned", "version": 1}}).problem(t, http.StatusConflict)
		api.call(http.MethodDelete, base+"/version-rule", nil, http.StatusNoContent, nil)
		api.do(req{method: http.MethodDelete, path: base + "/version-rule"}).problem(t, http.StatusNotFound)
		api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "vflow"}, http.StatusCreated, &run)
		if run.Version != 2 {
			t.Fatalf("after clear: version %d", run.Version)
		}
		api.call(http.MethodPost, base+"/versions/1/unretire", nil, http.StatusOK, &vs)
		if vs.Versions[0].State != "active" {
			t.Fatalf("after unretire: %+v", vs.Versions[0])
		}

		// Bad versions in the path.
		api.do(req{method: http.MethodPost, path: base + "/versions/abc/retire", unchecked: true}).problem(t, http.StatusBadRequest)
		api.do(req{method: http.MethodPost, path: base + "/versions/9/retire"}).problem(t, http.StatusNotFound)
		api.do(req{method: http.MethodGet, path: base + "/versions?include_deleted=maybe", unchecked: true}).problem(t, http.StatusBadRequest)

		// Delete 1: hidden, shown with include_deleted, its run readable.
		api.call(http.MethodDelete, base+"/versions/1", nil, http.StatusNoContent, nil)
		api.call(http.MethodGet, base+"/versions", nil, http.StatusOK, &vs)
		if len(vs.Versions) != 1 || vs.Versions[0].Version != 2 {
			t.Fatalf("after delete: %+v", vs.Versions)
		}
		api.call(http.MethodGet, base+"/versions?include_deleted=true", nil, http.StatusOK, &vs)
		if len(vs.Versions) != 2 || vs.Versions[0].State != "deleted" {
			t.Fatalf("with deleted: %+v", vs.Versions)
		}
		api.do(req{method: http.MethodPost, path: base + "/versions/1/unretire"}).problem(t, http.StatusBadRequest)
	})
}
