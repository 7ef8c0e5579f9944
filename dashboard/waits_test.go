package dashboard_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
)

// runHTML reads a run page as the insecure dashboard serves it.
func runHTML(t *testing.T, e *env, id string) string {
	t.Helper()
	resp, err := httpGet(e.url+"/runs/"+id, "")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /runs/%s: %d, %v", id, resp.StatusCode, err)
	}
	return string(b)
}

// The run page's "Waiting for" panel lists what the run waits for: a
// flow's waiting step with its events; the signal and update a
// workflow's phase accepts, which its graph also draws as pending
// nodes. A finished run has no panel.
func TestRunPageWaitingFor(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	gate := e.start("gate", nil)
	e.waitStatus(gate, heph.StatusWaiting)
	page := runHTML(t, e, gate)
	if !strings.Contains(page, `id="run-waits"`) || !strings.Contains(page, `<li data-kind="step"><span class="badge">step</span> step &#34;hold&#34; to be resumed with go</li>`) {
		t.Errorf("the gate run's page has no waiting step in its panel:\n%s", panelOf(page))
	}

	r, err := e.client.StartWorkflow(context.Background(), "tally", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		page = runHTML(t, e, r.ID)
		if strings.Contains(page, `data-kind="signal"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling for the decision, not timing it
	}
	for _, want := range []string{
		`<li data-kind="signal"><span class="badge">signal</span> signal finish</li>`,
		`<li data-kind="update"><span class="badge">update</span> update add</li>`,
		`data-step="waiting:signal:finish" data-state="waiting"`,
		`data-step="waiting:update:add" data-state="waiting"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the workflow's page lacks %s:\n%s", want, panelOf(page))
		}
	}
	if err := e.client.SignalWorkflow(context.Background(), r.ID, "finish", "now"); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(r.ID, heph.StatusCompleted)
	page = runHTML(t, e, r.ID)
	if strings.Contains(page, `id="run-waits"`) || strings.Contains(page, `waiting:signal`) {
		t.Errorf("the finished workflow's page still shows waits:\n%s", panelOf(page))
	}
}

// panelOf is the page's "Waiting for" panel, for failure messages.
func panelOf(page string) string {
	i := strings.Index(page, `id="run-waits"`)
	if i < 0 {
		return "(no panel)"
	}
	return page[i:min(len(page), i+1500)]
}
