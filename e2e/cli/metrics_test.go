package cli_test

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/app/demo"
)

// scrape GETs the server's /metrics and returns its status and body.
func scrape(t *testing.T, srv *server) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sample returns the value of the first sample of metric whose labels
// include every one of labels (name="value").
func sample(body, metric string, labels ...string) (float64, bool) {
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(metric) + `\{([^}]*)\} (\S+)$`)
	for line := range strings.SplitSeq(body, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		all := true
		for _, l := range labels {
			all = all && strings.Contains(m[1], l)
		}
		if all {
			v, err := strconv.ParseFloat(m[2], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// The server exports its metrics at GET /metrics (Prometheus text): after
// the seeded example runs, the run counters count them.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"HEPH_EXAMPLES=true", "HEPH_INSECURE=true"}, "--sqlite", t.TempDir()+"/heph.db")
	api := apiClient(t, srv)
	want := expectedOutcomes()
	eventually(t, "the seeded runs' outcomes", func() bool { return outcomes(t, api) == want })
	var body string
	eventually(t, "the run counters on /metrics", func() bool {
		code, b := scrape(t, srv)
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d\n%s", code, b)
		}
		body = b
		started, ok1 := sample(b, "heph_runs_started_total", `workflow="`+demo.OrderFlow+`"`, `kind="flow"`)
		completed, ok2 := sample(b, "heph_runs_completed_total", `workflow="`+demo.OrderFlow+`"`)
		return ok1 && ok2 && started >= 1 && completed >= 1
	})
	for _, m := range []string{"heph_step_duration_seconds_bucket", "heph_commit_batch_size_bucket", "heph_task_claims_total", "heph_queue_depth", "heph_runs_active"} {
		if !strings.Contains(body, "\n"+m+"{") {
			t.Errorf("/metrics has no %s:\n%s", m, body)
		}
	}
	if strings.Contains(body, "run_id") {
		t.Errorf("/metrics names a run id:\n%s", body)
	}
	// The API is still served around it.
	if _, err := http.Get(srv.url + "/healthz"); err != nil {
		t.Fatal(err)
	}
}

// OTEL_METRICS_EXPORTER=none serves no /metrics; an unknown exporter is
// refused with the variable named.
func TestMetricsExporterChoice(t *testing.T) {
	t.Parallel()
	srv := startServer(t, []string{"OTEL_METRICS_EXPORTER=none", "HEPH_INSECURE=true"}, "--sqlite", t.TempDir()+"/heph.db")
	if code, body := scrape(t, srv); code == http.StatusOK && strings.Contains(body, "heph_") {
		t.Fatalf("GET /metrics with the exporter off: %d\n%s", code, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, hephBin, "server", "--addr", "127.0.0.1:0", "--sqlite", t.TempDir()+"/heph.db", "--insecure")
	cmd.Env = append(baseEnv(), "OTEL_METRICS_EXPORTER=zipkin")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `OTEL_METRICS_EXPORTER="zipkin"`) {
		t.Fatalf("an unknown exporter: %v\n%s", err, out)
	}
}
