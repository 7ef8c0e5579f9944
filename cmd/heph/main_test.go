package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// go vet -vettool=heph runs the determinism linter: the heph binary
// detects go vet's protocol (-V=full, -flags, a .cfg file) and hands over
// to unitchecker. A workflow that reads the clock fails go vet with both
// findings; a deterministic one passes.
func TestGoVetVettool(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "heph")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	vet := func(pkg string) (string, error) {
		cmd := exec.Command("go", "vet", "-vettool="+bin, pkg)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := vet("./app/cli/testdata/vet/bad")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("go vet on a bad workflow: %v, want a non-zero exit\n%s", err, out)
	}
	for _, want := range []string{
		"bad.go:13:7: time.Sleep in workflow code: use workflow.Sleep(ctx, d)",
		"bad.go:17:38: time.Now in workflow code (in stamp, reached from workflow function func literal at bad.go:12): use workflow.Now(ctx)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("go vet output lacks %q:\n%s", want, out)
		}
	}
	if out, err := vet("./app/cli/testdata/vet/good"); err != nil {
		t.Errorf("go vet on a good workflow: %v\n%s", err, out)
	}
}
