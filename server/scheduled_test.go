package server

import (
	"net/http"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
)

// A job due later is shown as scheduled: its run carries scheduled_for
// (in a list and alone), status=scheduled lists it alone, and a job that
// ran carries none; on every backend.
func TestRunScheduledFor(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		ctx := t.Context()
		due := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
		type args = struct {
			To string `json:"to"`
		}
		later, err := heph.InsertJob(ctx, e.client, emailJob, args{To: "later@x"}, &heph.JobOptions{RunAt: due})
		if err != nil {
			t.Fatal(err)
		}
		now, err := heph.InsertJob(ctx, e.client, emailJob, args{To: "now@x"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.waitStatus(now.ID, heph.StatusCompleted)

		var got Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+later.ID, nil, http.StatusOK, &got)
		if got.ScheduledFor == nil || !got.ScheduledFor.Equal(due) || (got.Status != "pending" && got.Status != "running") {
			t.Fatalf("the job due later: status %s, scheduled_for %v; want pending or running, scheduled for %v", got.Status, got.ScheduledFor, due)
		}
		var ran Run
		e.api.call(http.MethodGet, "/api/v1/runs/"+now.ID, nil, http.StatusOK, &ran)
		if ran.ScheduledFor != nil {
			t.Fatalf("the job that ran has scheduled_for %v", ran.ScheduledFor)
		}

		var list RunList
		e.api.call(http.MethodGet, "/api/v1/runs?status=scheduled", nil, http.StatusOK, &list)
		if len(list.Runs) != 1 || list.Runs[0].ID != later.ID || list.Runs[0].ScheduledFor == nil || !list.Runs[0].ScheduledFor.Equal(due) {
			t.Fatalf("status=scheduled listed %+v, want the job due later alone", list.Runs)
		}
		var all RunList
		e.api.call(http.MethodGet, "/api/v1/runs?workflow=email", nil, http.StatusOK, &all)
		seen := map[string]*time.Time{}
		for _, r := range all.Runs {
			seen[r.ID] = r.ScheduledFor
		}
		if len(seen) != 2 || seen[later.ID] == nil || !seen[later.ID].Equal(due) || seen[now.ID] != nil {
			t.Fatalf("the list of jobs: scheduled_for by run %v", seen)
		}
	})
}
