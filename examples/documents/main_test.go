package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunsTheResearchDocument(t *testing.T) {
	var out strings.Builder
	db := filepath.Join(t.TempDir(), "d.db")
	if err := run(&out, db, "", `{"topic": "AI safety", "created_by": "james"}`); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"completed", `"to james: Research on AI safety complete: notes on ai"`, "step_completed", "notify"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "nothing_found ->") {
		t.Errorf("took the else branch:\n%s", s)
	}
}

func TestReportsDocumentErrors(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(doc, []byte("name: bad\nsteps:\n  a: {action: nope, done: true}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(&strings.Builder{}, filepath.Join(dir, "d.db"), doc, `{}`)
	if err == nil || !strings.Contains(err.Error(), `bad.yaml:3:15: steps.a.action: unknown action "nope"`) {
		t.Errorf("error %v", err)
	}
}
