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

// The run page's steps table shows each step's start, end, duration and
// a failed step's error, and lists each attempt with its outcome, worker
// and error in the attempts expander.
func TestRunPageStepTimes(t *testing.T) {
	var tries atomic.Int32
	e := newEnv(t, true, func(ctx context.Context, c *heph.Client) error {
		b := flow.New("timed")
		flow.Step(b, "flaky", func(ctx context.Context, in string) (string, error) {
			if tries.Add(1) == 1 {
				return "", errors.New("first <try> fails")
			}
			return in, nil
		}, flow.Retry(flow.RetryPolicy{MaxAttempts: 2, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Jitter: -1}))
		flow.Step(b, "boom", func(ctx context.Context, in string) (string, error) {
			return "", flow.NonRetryable(errors.New("card declined"))
		}, flow.DependsOn("flaky"))
		return c.Register(b.MustBuild())
	})
	id := e.start("timed", "x")
	e.waitStatus(id, heph.StatusFailed)
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
	steps := page[strings.Index(page, `id="run-steps"`):]
	steps = steps[:strings.Index(steps, "</table>\n</div>")]
	stamp := `\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ`
	for _, want := range []string{
		`<tr data-step="flaky" data-status="completed">`,
		`<tr class="attempt" data-attempt="1" data-outcome="retrying"><td>1</td>\s*<td>retrying</td><td>[0-9a-f]+</td><td>` + stamp + `</td><td>` + stamp + `</td><td>` + stamp + `</td><td>[^<]+</td>\s*<td><span class="error">first &lt;try&gt; fails</span>`,
		`<tr class="attempt" data-attempt="2" data-outcome="completed">`,
		`<tr data-step="boom" data-status="failed">[\s\S]*<td>` + stamp + `</td><td>` + stamp + `</td>\s*<td>[^<]+</td><td></td>\s*<td><span class="error step-error">card declined</span>`,
	} {
		if !regexp.MustCompile(want).MatchString(steps) {
			t.Errorf("the steps table does not match %s:\n%s", want, steps)
		}
	}
}
