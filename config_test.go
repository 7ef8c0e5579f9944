package hephaestus

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

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

// The watchdog stops a task LeaseDuration/5 before a lease it could not
// extend ends, so a heartbeat interval above half the lease would stop
// healthy tasks before their first heartbeat: it is refused.
func TestHeartbeatIntervalAtMostHalfTheLease(t *testing.T) {
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = New(&Config{Store: st, LeaseDuration: 30 * time.Second, HeartbeatInterval: 25 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "HeartbeatInterval 25s must be at most half of LeaseDuration 30s") {
		t.Fatalf("New with a 25s heartbeat for a 30s lease: %v, want the limit explained", err)
	}
	if _, err := New(&Config{Store: st, LeaseDuration: 30 * time.Second, HeartbeatInterval: 15 * time.Second}); err != nil {
		t.Fatalf("New with half the lease: %v", err)
	}
}

// A retention policy that covers nothing is refused, naming it.
func TestRetentionPolicyCoversSomething(t *testing.T) {
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, p := range []RetentionPolicy{{Completed: time.Hour}, {Workflows: []string{""}}} {
		_, err := New(&Config{Store: st, RetentionPolicies: []RetentionPolicy{{Queue: "jobs"}, p}})
		if err == nil || !strings.Contains(err.Error(), "RetentionPolicies[1]") {
			t.Errorf("New with policy %+v: %v; want an error naming RetentionPolicies[1]", p, err)
		}
	}
}
