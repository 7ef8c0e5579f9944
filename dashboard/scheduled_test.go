package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/job"
)

type reminder struct {
	To string `json:"to"`
}

var remindJob = job.MustNew("remind", func(ctx context.Context, j *job.Job[reminder]) error { return nil }, nil)

// dueSoon is how a row says a job due 24 hours from a moment ago is due.
var dueSoon = regexp.MustCompile(`>in 2[34]h<`)

// rowOf is the runs table's row of a run in a page.
func rowOf(t *testing.T, page, id string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<tr data-run="`+id+`"`)
	if !ok {
		t.Fatalf("no row of run %s in the page", id)
	}
	row, _, _ := strings.Cut(rest, "</tr>")
	return row
}

// A job due tomorrow shows as scheduled, with when it is due, in the
// runs list and on its page; the scheduled filter lists it alone and is
// not combined with other statuses.
func TestScheduledRuns(t *testing.T) {
	e := newEnv(t, true, func(ctx context.Context, c *heph.Client) error { return c.RegisterJobs(remindJob) })
	due := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	later, err := heph.InsertJob(t.Context(), e.client, remindJob, reminder{To: "later"}, &heph.JobOptions{RunAt: due})
	if err != nil {
		t.Fatal(err)
	}
	done := e.start("order", order{ID: "a1", Amount: 10})
	e.waitStatus(done, heph.StatusCompleted)

	page := string(e.getOK("/"))
	stamp := due.Format("2006-01-02 15:04:05Z")
	if row := rowOf(t, page, later.ID); !strings.Contains(row, `status-scheduled`) || !strings.Contains(row, "due "+stamp) || !dueSoon.MatchString(row) {
		t.Errorf("the row of the job due later does not show it scheduled, due %s in about 24h:\n%s", stamp, row)
	}
	if row := rowOf(t, page, done); strings.Contains(row, "scheduled") || !strings.Contains(row, "status-completed") {
		t.Errorf("the row of the run that completed:\n%s", row)
	}
	filtered := string(e.getOK("/?status=scheduled"))
	if !strings.Contains(filtered, `data-run="`+later.ID+`"`) || strings.Contains(filtered, `data-run="`+done+`"`) {
		t.Errorf("status=scheduled does not list the scheduled job alone")
	}
	res, err := httpGet(e.url+"/?status=scheduled&status=failed", "")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "status scheduled is shown alone") {
		t.Errorf("scheduled with failed: %d %s", res.StatusCode, body)
	}

	run := string(e.getOK("/runs/" + later.ID))
	h1, _, _ := strings.Cut(run[strings.Index(run, "<h1>"):], "</h1>")
	if !strings.Contains(h1, "status-scheduled") {
		t.Errorf("the run page's title: %s", h1)
	}
	if !strings.Contains(run, `<dd id="run-due">`+stamp) {
		t.Errorf("the run page does not say when the job is due (%s)", stamp)
	}
}
