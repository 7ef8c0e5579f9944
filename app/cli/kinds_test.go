package cli_test

import (
	"encoding/json"
	"testing"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/app/demo"
)

// heph ls, heph show and heph start name a job's run job and a document's
// run document (both are flow runs in the store), in tables and -o json.
func TestKindsNamedCLI(t *testing.T) {
	t.Parallel()
	c, env := demoServer(t)
	j, err := hephaestus.InsertJob(t.Context(), c, demo.EmailKind, demo.Email{To: "ada@example.com", Subject: "hi"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.StartDocument(t.Context(), demo.ExpenseDoc, 0, demo.Expense{Employee: "ada", Amount: 12, Category: "travel"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := hephaestus.StartWorkflow(t.Context(), c, demo.WorkspaceWorkflow, demo.WorkspaceRequest{Account: "a", Plan: "free", Region: "eu"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "start", ok(t, env, "start", demo.EmailJob, "--kind", "job", "--input", `{"to": "bob@example.com", "subject": "x"}`), `^run \S+ started: job example\.email v\d+, `)
	ls := ok(t, env, "ls")
	wantLines(t, "ls", ls, `^ID\s+BUSINESS ID\s+KIND\s+WORKFLOW`, `^`+j.ID+`\s+\S+\s+job\s+example\.email\s`, `^`+doc.ID+`\s+\S+\s+document\s+example\.expense\s`, `^`+wf.ID+`\s+\S+\s+workflow\s+example\.workspace\s`)
	wantLines(t, "show job", ok(t, env, "show", j.ID), `^kind:\s+job$`)
	wantLines(t, "show document", ok(t, env, "show", doc.ID), `^kind:\s+document$`)

	var list struct {
		Runs []struct{ ID, Kind string }
	}
	if err := json.Unmarshal([]byte(ok(t, env, "ls", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{j.ID: "job", doc.ID: "document", wf.ID: "workflow"}
	for _, r := range list.Runs {
		if k, ok := want[r.ID]; ok && r.Kind != k {
			t.Errorf("ls -o json: run %s has kind %q, want %s", r.ID, r.Kind, k)
		}
	}
}
