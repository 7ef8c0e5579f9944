package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// shop is a user's module with a workflow that sleeps on the real clock
// and prices with a helper of another package of the module that reads
// it, and a deterministic workflow with an activity that does I/O.
var shop = map[string]string{
	"pricing/pricing.go": `package pricing

import "time"

// Quote prices n at the current second.
func Quote(n int) int { return n * time.Now().Second() }

// Double is deterministic.
func Double(n int) int { return 2 * n }
`,
	"bad/bad.go": `package bad

import (
	"time"

	"example.com/shop/pricing"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var Order = workflow.New("order", func(ctx workflow.Context, n int) (int, error) {
	time.Sleep(time.Second)
	return pricing.Quote(n), nil
})

var Late = workflow.New("late", func(ctx workflow.Context, n int) (int, error) {
	return stamp(), nil
})

func stamp() int { return time.Now().Second() }
`,
	"good/good.go": `package good

import (
	"context"
	"os"
	"time"

	"example.com/shop/pricing"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var Host = workflow.NewActivity("host", func(ctx context.Context, _ struct{}) (string, error) {
	return os.Hostname()
})

var Order = workflow.New("order", func(ctx workflow.Context, n int) (int, error) {
	if err := workflow.Sleep(ctx, time.Second); err != nil {
		return 0, err
	}
	_, err := Host.Execute(ctx, struct{}{})
	return pricing.Double(n), err
})
`,
}

// writeShop writes the module shop, which requires this one from its
// directory, into a temporary directory.
func writeShop(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{"go.mod": "module example.com/shop\n\ngo 1.26.0\n\n" +
		"require github.com/hephaestus-go/hephaestus v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/hephaestus-go/hephaestus => " + root + "\n"}
	for name, content := range shop {
		files[name] = content
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.sum"] = string(sum)
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// go vet -vettool=heph runs the determinism linter: the heph binary
// detects go vet's protocol (-V=full, -flags, a .cfg file) and hands over
// to unitchecker. In a user's module, a workflow that sleeps on the real
// clock and calls a helper of another package that reads it fails go vet
// with both findings, and so does heph vet; a deterministic workflow
// passes both.
func TestGoVetVettool(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "heph")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := writeShop(t)
	run := func(name string, args ...string) (string, int) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		// The module cache has every module: nothing is downloaded.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	wantSleep := "bad/bad.go:11:7: time.Sleep in workflow code: use workflow.Sleep(ctx, d)"
	wantQuote := "bad/bad.go:12:17: call of example.com/shop/pricing.Quote (it reaches time.Now at pricing.go:6) in workflow code: use workflow.Now(ctx)"
	wantStamp := "bad/bad.go:19:32: time.Now in workflow code (in stamp, reached from workflow function func literal at bad.go:15): use workflow.Now(ctx)"
	wants := []string{wantSleep, wantQuote, wantStamp}

	out, code := run("go", "vet", "-vettool="+bin, "./bad")
	if code == 0 {
		t.Fatalf("go vet on a bad workflow exited 0, want non-zero\n%s", out)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("go vet output lacks %q:\n%s", want, out)
		}
	}
	if out, code := run("go", "vet", "-vettool="+bin, "./good", "./pricing"); code != 0 {
		t.Errorf("go vet on a good workflow: exit %d\n%s", code, out)
	}
	testHephVet(t, bin, run, wants)
}

// testHephVet checks heph vet in the shop module: each finding once, by
// file:line:column, exit 1, and the findings as JSON with -o json; a
// deterministic workflow prints nothing (JSON: []) and exits 0.
func testHephVet(t *testing.T, bin string, run func(name string, args ...string) (string, int), wants []string) {
	t.Helper()
	out, code := run(bin, "vet", "./...")
	if code != 1 || strings.Count(out, "\n") != len(wants) {
		t.Errorf("heph vet ./...: exit %d, want 1 and %d lines:\n%s", code, len(wants), out)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("heph vet ./... lacks %q:\n%s", want, out)
		}
	}
	out, code = run(bin, "vet", "-o", "json", "./bad")
	var found []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Package string `json:"package"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(out), &found); code != 1 || err != nil {
		t.Fatalf("heph vet -o json ./bad: exit %d (want 1), %v\n%s", code, err, out)
	}
	var got []string
	for _, f := range found {
		if f.Package != "example.com/shop/bad" {
			t.Errorf("finding %+v: package %q, want example.com/shop/bad", f, f.Package)
		}
		got = append(got, fmt.Sprintf("%s:%d:%d: %s", f.File, f.Line, f.Column, f.Message))
	}
	same := len(got) == len(wants)
	for i := 0; same && i < len(got); i++ {
		same = strings.HasPrefix(got[i], wants[i])
	}
	if !same {
		t.Errorf("heph vet -o json ./bad, as file:line:col: message:\n%s\nwant, in this order, lines starting with:\n%s", strings.Join(got, "\n"), strings.Join(wants, "\n"))
	}
	if out, code := run(bin, "vet", "./good"); code != 0 || out != "" {
		t.Errorf("heph vet ./good: exit %d, want 0 and nothing printed:\n%s", code, out)
	}
	out, code = run(bin, "vet", "-o", "json", "./good")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("heph vet -o json ./good: exit %d, want 0 and []:\n%s", code, out)
	}
}
