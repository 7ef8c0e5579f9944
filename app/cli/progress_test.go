package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hephaestus-go/hephaestus/app/cli"
)

// hephTerm runs heph against url with standard error as a terminal, so
// that progress bars draw.
func hephTerm(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &cli.Env{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string {
		if k == cli.EnvAddr {
			return url
		}
		return ""
	}, IsTerminal: func(s any) bool { return s == any(&errOut) }}
	code := cli.Main(t.Context(), args, env)
	return code, out.String(), errOut.String()
}

// TestBulkProgress follows a bulk operation to its end with a progress
// bar. The server is a stand-in that answers as the API does.
func TestBulkProgress(t *testing.T) {
	t.Parallel()
	var polls atomic.Int32
	var filter json.RawMessage
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "POST" && r.URL.Path == "/api/v1/operations":
			var body struct {
				Action string
				Filter json.RawMessage
			}
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			filter = body.Filter
			w.WriteHeader(202)
			_, _ = io.WriteString(w, `{"id": "op1", "action": "cancel", "status": "pending", "total": 0, "done": 0, "failed": 0}`)
		case r.Method == "GET" && r.URL.Path == "/api/v1/operations/op1":
			if polls.Add(1) == 1 {
				_, _ = io.WriteString(w, `{"id": "op1", "action": "cancel", "status": "running", "total": 3, "done": 1, "failed": 0}`)
				return
			}
			_, _ = io.WriteString(w, `{"id": "op1", "action": "cancel", "status": "completed", "total": 3, "done": 2, "failed": 1, "errors": ["run r3: already finished"], "created_by": "root"}`)
		default:
			w.WriteHeader(404)
		}
	}))
	defer ts.Close()
	code, out, errOut := hephTerm(t, ts.URL, "cancel", "--tag", "x", "--status", "waiting", "--all-matching")
	if code != cli.ExitFailure || !strings.Contains(out, "3 matched, 2 done, 1 failed") || !strings.Contains(out, "error: run r3: already finished") {
		t.Fatalf("bulk cancel: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "cancel") || !strings.Contains(errOut, "3 / 3") || !strings.Contains(errOut, "1 of 3 runs failed") {
		t.Fatalf("bulk cancel: no progress bar or failure on stderr:\n%q", errOut)
	}
	var f struct {
		Statuses []string
		Tags     []string
	}
	if err := json.Unmarshal(filter, &f); err != nil || len(f.Statuses) != 1 || f.Statuses[0] != "waiting" || f.Tags[0] != "x" {
		t.Fatalf("filter sent: %s", filter)
	}
}

// TestBackfillProgress sends a backfill in parts with a progress bar and
// prints each run once.
func TestBackfillProgress(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/api/v1/schedules/s/backfill" {
			w.WriteHeader(404)
			return
		}
		calls.Add(1)
		var span struct{ From, To string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &span)
		w.Header().Set("Content-Type", "application/json")
		// The tick at each part's ends: the boundaries repeat.
		_ = json.NewEncoder(w).Encode(map[string][]string{"run_ids": {"s@" + span.From, "s@" + span.To}})
	}))
	defer ts.Close()
	code, out, errOut := hephTerm(t, ts.URL, "schedules", "backfill", "s", "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-11T00:00:00Z")
	if code != 0 || calls.Load() != 10 {
		t.Fatalf("backfill: exit %d, %d calls\n%s%s", code, calls.Load(), out, errOut)
	}
	if !strings.Contains(out, "schedule s: 11 runs for the ticks from 2025-01-01T00:00:00Z to 2025-01-11T00:00:00Z") ||
		strings.Count(out, "s@2025-01-05T00:00:00Z") != 1 {
		t.Fatalf("backfill output:\n%s", out)
	}
	if !strings.Contains(errOut, "backfill") || !strings.Contains(errOut, "10 / 10") {
		t.Fatalf("backfill: no progress bar:\n%q", errOut)
	}
}
