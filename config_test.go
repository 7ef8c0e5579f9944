package hephaestus

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// Observation 8's last part: errors are logged by default, not discarded.
func TestDefaultLoggerWritesSomewhere(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(prev)
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := New(&Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	c.cfg.Logger.Error("a failing decision")
	if !strings.Contains(buf.String(), "a failing decision") {
		t.Fatalf("the default logger wrote %q; want the program's default logger", buf.String())
	}
}
