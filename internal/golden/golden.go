// Package golden compares a test's output with a file under testdata, or
// rewrites the file: the golden files of the graph renderings (flow,
// internal/graphtext) and of the dashboard's pictures. For tests only.
package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Check compares got with testdata/name; with update it writes got there
// instead. rerun is the command that rewrites the file, for the message
// when it is missing.
func Check(t testing.TB, name, got string, update bool, rerun string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run %s to create it)", err, rerun)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got); rerun with -update if the change is intended:\n%s", path, diff)
	}
}
