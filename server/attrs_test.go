package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
)

// POST /runs with search_attributes, GET /runs/{id} showing them and GET
// /runs?where= filtering by them; an attribute not declared, at start or in
// the filter, is a 400 naming the field.
func TestSearchAttributesAPI(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		st := b.open(t)
		c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		f := flow.New("attrs.api").SearchAttribute("amount", flow.AttrInt).SearchAttribute("region", flow.AttrKeywordList)
		flow.Step(f, "s", func(ctx context.Context, in int) (int, error) { return in, nil })
		if err := c.Register(f.MustBuild()); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		e := serve(t, st, c, nil)

		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"name": "attrs.api",
			"search_attributes": map[string]any{"amout": 5}}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `did you mean "amount"`) {
			t.Errorf("a typo at start: %q", p.Detail)
		}
		var small, big Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "attrs.api", "input": 1,
			"search_attributes": map[string]any{"amount": 5, "region": []string{"eu"}}}, http.StatusCreated, &small)
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "attrs.api", "input": 2,
			"search_attributes": map[string]any{"amount": 500, "region": []string{"us"}}}, http.StatusCreated, &big)
		var got Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+big.ID, nil, http.StatusOK, &got)
		if got.SearchAttributes["amount"] != float64(500) {
			t.Fatalf("search_attributes %v", got.SearchAttributes)
		}
		var l RunList
		e.api.call(http.MethodGet, "/api/v1/runs?where="+url.QueryEscape("amount > 100 and region in [us, apac]"), nil, http.StatusOK, &l)
		if len(l.Runs) != 1 || l.Runs[0].ID != big.ID {
			t.Fatalf("where: %+v", l.Runs)
		}
		p = e.api.do(req{method: http.MethodGet, path: "/api/v1/runs?where=" + url.QueryEscape("amount >> 1")}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, "at 9") || !strings.Contains(p.Detail, "where") {
			t.Errorf("a bad filter: %+v", p)
		}
		// A bulk delete over the filter: a typo is refused at once; the
		// filter deletes the run it keeps and only that one.
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/operations", body: map[string]any{"action": "delete",
			"filter": map[string]any{"where": "amout > 100"}}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `did you mean "amount"`) {
			t.Errorf("a typo in a bulk filter: %+v", p)
		}
		e.waitStatus(big.ID, heph.StatusCompleted)
		e.waitStatus(small.ID, heph.StatusCompleted)
		var op Operation
		e.api.call(http.MethodPost, "/api/v1/operations", map[string]any{"action": "delete",
			"filter": map[string]any{"where": "amount > 100"}}, http.StatusAccepted, &op)
		if got := e.waitOperation(op.ID); got.Status != "completed" || got.Done != 1 {
			t.Fatalf("the bulk delete: %+v", got)
		}
		e.api.do(req{method: http.MethodGet, path: "/api/v1/runs/" + big.ID}).problem(t, http.StatusNotFound)
		e.api.call(http.MethodGet, "/api/v1/runs/"+small.ID, nil, http.StatusOK, &got)
	})
}

// POST /tasks/complete with search_attributes upserts them with the
// result; an attribute not declared is a 400 naming it that writes
// nothing, and the claim still holds.
func TestCompleteWithSearchAttributes(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, &Config{})
		admin := e.token("admin", RoleAdmin)
		e.api.token = e.token("py", RoleWorker)
		var r Run
		e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", token: admin, body: map[string]any{"name": "remote", "input": map[string]string{"text": "hi"}}}).decode(t, &r)
		task := e.claimOne("shout")
		p := e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/complete", body: map[string]any{"token": task.Token, "output": "HI",
			"search_attributes": map[string]any{"loudnes": 3}}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `did you mean "loudness"`) {
			t.Fatalf("a typo: %+v", p)
		}
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/tasks/complete", body: map[string]any{"token": task.Token, "output": "HI",
			"search_attributes": map[string]any{"loudness": "very"}}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, "loudness") {
			t.Fatalf("a string for an int: %+v", p)
		}
		e.api.call(http.MethodPost, "/api/v1/tasks/complete", map[string]any{"token": task.Token, "output": "HI",
			"search_attributes": map[string]any{"loudness": 11}}, http.StatusOK, nil)
		e.api.token = admin
		var done Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+r.ID+"/result?wait=60s", nil, http.StatusOK, &done)
		if done.Status != "completed" || done.SearchAttributes["loudness"] != float64(11) {
			t.Fatalf("the run: %+v", done)
		}
		var l RunList
		e.api.call(http.MethodGet, "/api/v1/runs?flow=remote&where="+url.QueryEscape("loudness > 10"), nil, http.StatusOK, &l)
		if len(l.Runs) != 1 || l.Runs[0].ID != r.ID {
			t.Fatalf("where: %+v", l.Runs)
		}

		// A workflow's start sets the attributes it declares.
		p = e.api.do(req{method: http.MethodPost, path: "/api/v1/runs", body: map[string]any{"kind": "workflow", "name": "counter", "input": 1,
			"search_attributes": map[string]any{"teem": "core"}}}).problem(t, http.StatusBadRequest)
		if !strings.Contains(p.Detail, `did you mean "team"`) {
			t.Fatalf("a typo at a workflow's start: %+v", p)
		}
		var wr Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"kind": "workflow", "name": "counter", "input": 1,
			"search_attributes": map[string]any{"team": "core"}}, http.StatusCreated, &wr)
		e.api.call(http.MethodGet, "/api/v1/runs?where="+url.QueryEscape("team = core"), nil, http.StatusOK, &l)
		if len(l.Runs) != 1 || l.Runs[0].ID != wr.ID || l.Runs[0].SearchAttributes["team"] != "core" {
			t.Fatalf("where over a workflow's attribute: %+v", l.Runs)
		}
	})
}
