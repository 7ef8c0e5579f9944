// Package cli_test runs the heph binary end to end: it builds it once,
// starts heph server on a SQLite file or a PostgreSQL database, and runs
// every command as a subprocess against it, checking output and exit
// codes.
package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// hephBin is the binary the tests run, built by TestMain.
var hephBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "heph-cli-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hephBin = filepath.Join(dir, "heph")
	build := exec.Command("go", "build", "-o", hephBin, "github.com/hephaestus-go/hephaestus/cmd/heph")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build heph:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}
