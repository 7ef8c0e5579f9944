package dashboard_test

import (
	"context"
	"html"
	"strings"
	"testing"
	"time"
)

// The run page shows the build that started a workflow run, and the
// workers page each worker's build.
func TestBuildsShown(t *testing.T) {
	e := newEnv(t, true, registerRunDefinitions)
	r, err := e.client.StartWorkflow(context.Background(), "tally", 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	build := html.EscapeString(e.client.BuildID())
	if page := getPage(t, e.url+"/runs/"+r.ID); !strings.Contains(page, `id="run-build"`) || !strings.Contains(page, ">"+build+"</dd>") {
		t.Fatalf("the run page does not show build %s", build)
	}
	// The worker record is written after Start, by the client's
	// maintenance loop.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(getPage(t, e.url+"/workers"), `<td class="mono build">`+build+`</td>`) {
		if time.Now().After(deadline) {
			t.Fatalf("the workers page does not show build %s", build)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
