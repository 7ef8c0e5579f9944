package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
)

// The example program on a fresh SQLite file: the push to main starts one
// deploy run (its redelivery none), the push to a feature branch is
// skipped by the filter, and the forged push is refused.
func TestWebhookProgram(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	runErr := run(t.Context(), t.TempDir()+"/webhook.db", demoSecret, "")
	os.Stdout = stdout
	_ = w.Close()
	var out bytes.Buffer
	if _, err := io.Copy(&out, r); err != nil {
		t.Fatal(err)
	}
	if runErr != nil {
		t.Fatalf("%v\n%s", runErr, out.String())
	}
	for _, want := range []string{
		"push to main             -> 201 Created",
		"the same delivery again  -> 200 OK",
		"push to feature          -> 201 Created",
		"forged push to main      -> 401 Unauthorized",
		`completed {"deploy":"deployed 59b20b8 (pushed by ada)"}`,
		"push to feature: skipped by the trigger's filter",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
}
