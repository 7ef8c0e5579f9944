package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
)

// getPage reads a page's HTML.
func (e *env) getPage(path string) string {
	e.t.Helper()
	res, err := httpGet(e.url+path, e.admin)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %v\n%s", path, res.StatusCode, err, b)
	}
	return string(b)
}

// The runs list and the run page name a run's kind as the API does:
// flow, document, job (all three stored as flow runs) and workflow.
func TestKindsNamed(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	ctx := context.Background()
	flowRun := e.start("order", order{ID: "a1", Amount: 10})
	doc, err := e.client.StartDocument(ctx, "expense", 0, map[string]int{"amount": 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := e.client.StartWorkflow(ctx, "tally", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	mail, err := heph.InsertJob(ctx, e.client, mailKind, mailArgs{To: "ops@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list := e.getPage("/")
	for _, c := range []struct{ id, kind string }{{flowRun, "flow"}, {doc.ID, "document"}, {wf.ID, "workflow"}, {mail.ID, "job"}} {
		if k := e.apiRun(c.id).Kind; k != c.kind {
			t.Errorf("run %s: the API's kind is %q, want %s", c.id, k, c.kind)
		}
		row := regexp.MustCompile(`(?s)<tr data-run="` + c.id + `".*?</tr>`).FindString(list)
		if !regexp.MustCompile(`<span class="kind">` + c.kind + `</span>`).MatchString(row) {
			t.Errorf("run %s: the runs list's row does not say %s:\n%s", c.id, c.kind, row)
		}
		page := e.getPage("/runs/" + c.id)
		if !regexp.MustCompile(`data-kind="`+c.kind+`"`).MatchString(page) || !regexp.MustCompile(`<span class="kind-name">`+c.kind+`</span>`).MatchString(page) {
			t.Errorf("run %s: the run page does not say %s", c.id, c.kind)
		}
	}
}
