package dashboard_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	hephaestus "github.com/hephaestus-go/hephaestus"
)

// /runs/{key::value} shows the run that the business id names, and reads
// the rest of the page by the run's id; an unknown one is a 404.
func TestRunPageByBusinessID(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	r, err := e.client.StartWorkflow(context.Background(), "tally", 3, &hephaestus.WorkflowOptions{ID: "t-1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.BusinessID != "id::t-1" {
		t.Fatalf("business id %q", r.BusinessID)
	}
	page := getPage(t, e.url+"/runs/id::t-1")
	if !strings.Contains(page, r.ID) || !strings.Contains(page, "/api/v1/runs/"+r.ID+"/history") {
		t.Fatalf("the page of id::t-1 does not show run %s:\n%s", r.ID, page)
	}
	res, err := httpGet(e.url+"/runs/id::nope", "")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /runs/id::nope: %d, want 404", res.StatusCode)
	}
}
