package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/app/cli"
)

// heph vet reports a workflow that reads the clock, with file:line and
// the workflow API to use, exits 1, and prints JSON with -o json; a
// deterministic workflow passes.
func TestVet(t *testing.T) {
	t.Parallel()
	code, out, errOut := heph(t, nil, "vet", "./testdata/vet/bad")
	if code != 1 {
		t.Fatalf("heph vet bad: exit %d, want 1\n%s%s", code, out, errOut)
	}
	wantLines(t, "heph vet bad", out,
		`^testdata/vet/bad/bad\.go:13:7: time\.Sleep in workflow code: use workflow\.Sleep\(ctx, d\)`,
		`^testdata/vet/bad/bad\.go:17:38: time\.Now in workflow code \(in stamp, reached from workflow function func literal at bad\.go:12\): use workflow\.Now\(ctx\)`)
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("heph vet bad: %d lines, want 2 (each finding once):\n%s", n, out)
	}

	code, out, errOut = heph(t, nil, "vet", "-o", "json", "./testdata/vet/bad")
	if code != 1 {
		t.Fatalf("heph vet -o json bad: exit %d, want 1\n%s%s", code, out, errOut)
	}
	var found []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Package string `json:"package"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(out), &found); err != nil {
		t.Fatalf("heph vet -o json: %v\n%s", err, out)
	}
	if len(found) != 2 || found[0].Line != 13 || found[1].Line != 17 || !strings.HasSuffix(found[0].Package, "/testdata/vet/bad") ||
		!strings.HasPrefix(found[1].Message, "time.Now in workflow code") {
		t.Errorf("heph vet -o json: %+v", found)
	}

	if out := ok(t, nil, "vet", "./testdata/vet/good"); out != "" {
		t.Errorf("heph vet good printed %q, want nothing", out)
	}
	if out := ok(t, nil, "vet", "-o", "json", "./testdata/vet/good"); strings.TrimSpace(out) != "[]" {
		t.Errorf("heph vet -o json good printed %q, want []", out)
	}
}

// Only go vet's invocations of a vet tool are taken for one: heph's own
// commands are not.
func TestIsVetTool(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-V=full"}, true},
		{[]string{"-flags"}, true},
		{[]string{"/tmp/go-build1/b001/vet.cfg"}, true},
		{[]string{"-json", "-c=1", "/tmp/go-build1/b001/vet.cfg"}, true},
		{nil, false},
		{[]string{"vet", "./..."}, false},
		{[]string{"validate", "flow.cfg"}, false},
		{[]string{"-V=full", "ls"}, false},
	} {
		if got := cli.IsVetTool(c.args); got != c.want {
			t.Errorf("IsVetTool(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
