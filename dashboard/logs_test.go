package dashboard_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
)

// The run page's Logs section shows each attempt's records, per step and
// attempt, in order, with the marker of dropped records.
func TestRunPageLogs(t *testing.T) {
	var tries atomic.Int32
	e := newEnv(t, true, func(ctx context.Context, c *heph.Client) error {
		b := flow.New("chatty")
		flow.Step(b, "fetch", func(ctx context.Context, in string) (string, error) {
			log := flow.Logger(ctx)
			if tries.Add(1) == 1 {
				log.Error("upstream <down>", "status", 503)
				return "", errors.New("upstream down")
			}
			for i := range 80 { // 80 KiB: the oldest of them are dropped
				log.Info("page "+strings.Repeat("x", 1000), "i", i)
			}
			return in, nil
		}, flow.Retry(flow.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
		return c.Register(b.MustBuild())
	})
	id := e.start("chatty", "x")
	e.waitStatus(id, heph.StatusCompleted)
	resp, err := http.Get(e.url + "/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("run page: %d %v", resp.StatusCode, err)
	}
	page := string(body)
	logs := page[strings.Index(page, `id="run-logs"`):strings.Index(page, `id="run-history"`)]
	groups := regexp.MustCompile(`<details class="log-attempt" open data-step="([^"]+)" data-attempt="(\d+)">`).FindAllStringSubmatch(logs, -1)
	if len(groups) != 2 || groups[0][1] != "fetch" || groups[0][2] != "1" || groups[1][2] != "2" {
		t.Fatalf("attempt groups %v", groups)
	}
	if !strings.Contains(logs, "upstream &lt;down&gt;") || !strings.Contains(logs, `class="level-ERROR"`) {
		t.Errorf("the failed attempt's record is not shown, escaped, as an error:\n%s", logs[:min(len(logs), 2000)])
	}
	if !regexp.MustCompile(`class="level-WARN dropped"><td class="mono">[^<]+</td><td>WARN</td><td>1\d earlier log records of this attempt were dropped`).MatchString(logs) {
		t.Errorf("no marker of the dropped records")
	}
	if n := strings.Count(logs, "<tr data-seq="); n < 60 || n > 70 {
		t.Errorf("%d records shown, want the marker, one of attempt 1 and attempt 2's newest 64 KiB", n)
	}
	if !strings.Contains(logs, `href="/api/v1/runs/`+id+`/logs"`) {
		t.Error("no download link of the logs")
	}
}
