package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	heph "github.com/hephaestus-go/hephaestus"

	"github.com/hephaestus-go/hephaestus/server"
)

// A definition's page draws a node per step.
func TestDefinitionDAG(t *testing.T) {
	e := newPagesEnv(t, true)
	b := newBrowser(t)
	for _, c := range []struct {
		path  string
		steps []string
	}{
		{"/definitions/order?version=2", []string{"charge", "reserve", "ship", "validate"}},
		{"/definitions/leave", []string{"record", "review"}},
	} {
		b.open(e.url + c.path)
		var got []string
		b.eval(`Array.from(document.querySelectorAll("#definition-dag g.node:not(.kind-start):not(.kind-done)")).map(n => n.dataset.step)`, &got)
		slices.Sort(got)
		if !slices.Equal(got, c.steps) {
			t.Errorf("%s: the DAG's steps are %v, want %v", c.path, got, c.steps)
		}
		b.noErrors(c.path)
	}
	if s := b.text("#document-source"); !strings.Contains(s, "Grant this leave?") {
		t.Errorf("the leave document's source reads %q", s)
	}
}

// An invalid document's error is shown at its line, which the gutter
// marks and whose link moves the cursor there; a valid one is submitted
// and listed.
func TestSubmitDocument(t *testing.T) {
	e := newPagesEnv(t, true)
	b := newBrowser(t)
	b.open(e.url + "/definitions")
	setText := func(s string) {
		b.run("type the document", chromedp.Evaluate(fmt.Sprintf(`(() => { const t = document.querySelector("#doc-content"); t.value = %q; t.dispatchEvent(new Event("input")); })()`, s), nil))
	}
	const bad = "name: hello\nsteps:\n  first:\n    approval: true\n    on: {approved: second, rejected: done}\n  second:\n    action: no.such.action\n    done: true\n"
	setText(bad)
	b.run("validate", chromedp.Click("#doc-validate", chromedp.ByQuery))
	b.waitJS("the errors listed", `!document.querySelector("#doc-errors").hidden`)
	var lines []string
	b.eval(`Array.from(document.querySelectorAll("#doc-errors li")).map(li => li.dataset.line + " " + li.textContent)`, &lines)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "7 line 7:13") || !strings.Contains(lines[0], "no.such.action") {
		t.Errorf("the errors read %q, want one at line 7:13 naming the action", lines)
	}
	var marked []string
	b.eval(`Array.from(document.querySelectorAll("#doc-gutter .bad")).map(s => s.dataset.line)`, &marked)
	if !slices.Equal(marked, []string{"7"}) {
		t.Errorf("the gutter marks lines %v, want 7", marked)
	}
	b.run("go to the error", chromedp.Click("#doc-errors a.goto-line", chromedp.ByQuery))
	var at int
	b.eval(`document.querySelector("#doc-content").selectionStart`, &at)
	want := strings.Index(bad, "no.such.action") // line 7, column 13
	if at != want {
		t.Errorf("the cursor is at %d, want %d (line 7, column 13)", at, want)
	}
	b.expectFailedLoad(422, "/api/v1/documents/validate")
	b.noErrors("validating an invalid document")

	good := strings.Replace(bad, "    action: no.such.action\n", "    approval: true\n    on: {approved: done, rejected: done}\n", 1)
	good = strings.Replace(good, "    done: true\n", "", 1)
	setText(good)
	b.run("validate", chromedp.Click("#doc-validate", chromedp.ByQuery))
	b.waitJS("valid", `document.querySelector("#doc-status").classList.contains("valid")`)
	if n := b.count("#doc-gutter .bad"); n != 0 {
		t.Errorf("%d lines still marked after a valid validation", n)
	}
	b.actOK("submit", "#doc-submit", nil)
	b.waitJS("the document listed", `document.querySelector('#definitions-list tr[data-name="hello"][data-kind="document"]') !== null`)
	var d server.Document
	e.apiGet("/api/v1/documents/hello", &d)
	if d.Version != 1 || d.Content == nil || *d.Content != good {
		t.Errorf("the stored document: %+v", d)
	}
	b.noErrors("submitting a document")
}

// getPage reads a dashboard page of an insecure env as HTML.
func getPage(t *testing.T, url string) string {
	t.Helper()
	res, err := httpGet(url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, res.StatusCode, err)
	}
	return string(body)
}

// A definition's page shows its catalog rows, input schema, schedules and
// workers, and a Start run form with a field per property of the input
// schema; a document has no form.
func TestDefinitionPageCatalog(t *testing.T) {
	e := newPagesEnv(t, true)
	// The client's worker record is written by its registry just after
	// Start: wait for the page to count it.
	page := getPage(t, e.url+"/definitions/report")
	for deadline := time.Now().Add(time.Minute); !strings.Contains(page, `id="definition-served">yes`) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		page = getPage(t, e.url+"/definitions/report")
	}
	for _, want := range []string{`id="definition-published"`, `id="definition-schema"`, `"name"`, `<a href="/schedules" class="mono">` + reportSchedule + `</a>`,
		`id="start-run" data-kind="job" data-name="report" data-version=""`, `<input name="name" data-type="string">`, `name="_raw"`, `id="definition-served">yes`} {
		if !strings.Contains(page, want) {
			t.Errorf("the report page lacks %s", want)
		}
	}
	if page := getPage(t, e.url+"/definitions/leave"); strings.Contains(page, `id="start-run"`) {
		t.Error("a document's page has a Start run form")
	}
}

// The Start run form starts a run with the input made of its fields, as
// the signed-in user, and opens the run's page.
func TestStartRunForm(t *testing.T) {
	e := newPagesEnv(t, false)
	b := newBrowser(t)
	b.login(e.url, e.admin)
	b.open(e.url + "/definitions/report")
	b.run("fill in the name", chromedp.SetValue(`#start-run input[name="name"]`, "from-the-form", chromedp.ByQuery))
	b.run("start", chromedp.Click(`#start-run button[type="submit"]`, chromedp.ByQuery))
	b.run("the run's page", chromedp.WaitReady("#run-id", chromedp.ByQuery))
	var path string
	b.eval(`location.pathname`, &path)
	r := e.waitStatus(strings.TrimPrefix(path, "/runs/"), heph.StatusCompleted)
	if string(r.Input) != `{"name":"from-the-form"}` {
		t.Errorf("the run's input is %s", r.Input)
	}
	b.noErrors("start run")
}
