package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
)

// The definitions the pages' tests need, on top of newEnv's flows: two
// documents with approval gates (leave: alice or the group hr, with a
// deadline; purchase: bob), a job kind that declares a daily schedule,
// and a paused queue with limits.

// leaveDoc is a leave request: approved by alice or a member of hr
// within three days, then recorded.
const leaveDoc = `name: leave
description: a leave request
steps:
  review:
    approval:
      prompt: "Grant this leave?"
      assignees: {users: [alice], groups: [hr]}
      deadline: 72h
    on: {approved: record, rejected: done, expired: done}
  record:
    action: leave.record
    done: true
`

// purchaseDoc is a purchase that bob approves.
const purchaseDoc = `name: purchase
steps:
  sign:
    approval:
      prompt: "Buy it?"
      assignees: {users: [bob]}
    on: {approved: done, rejected: done}
`

// reportSchedule is the id of the report job kind's schedule: daily at
// 03:00 UTC.
const reportSchedule = "nightly-report"

// reportKind is a job kind that completes at once.
var reportKind = job.MustNew("report", func(ctx context.Context, j *job.Job[struct {
	Name string `json:"name"`
}]) error {
	return nil
}, &job.Options[struct {
	Name string `json:"name"`
}]{Schedules: []job.Schedule{{ID: reportSchedule, Cron: "0 3 * * *", Input: map[string]string{"name": "nightly"}}}})

// batchQueue is a queue that no worker serves, paused, with a concurrency
// limit of 5 (2 per key) and a rate limit of 10 a minute.
const batchQueue = "batch"

// pagesSetup registers the pages' definitions on a client.
func pagesSetup(ctx context.Context, c *heph.Client) error {
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "leave.record", func(ctx context.Context, _ flowdoc.ActionCall, in any) (string, error) {
		return "recorded", nil
	}); err != nil {
		return err
	}
	for name, doc := range map[string]string{"leave": leaveDoc, "purchase": purchaseDoc} {
		if _, err := c.PutDocument(ctx, name, heph.DocumentYAML, []byte(doc)); err != nil {
			return err
		}
	}
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		return err
	}
	if err := c.RegisterJobs(reportKind); err != nil {
		return err
	}
	if err := c.SetQueue(ctx, batchQueue, heph.QueueOptions{MaxRunning: 5, MaxRunningPerKey: 2,
		Rate: heph.RateLimit{Limit: 10, Period: time.Minute}}); err != nil {
		return err
	}
	return c.PauseQueue(ctx, batchQueue)
}

// newPagesEnv is newEnv with the pages' definitions.
func newPagesEnv(t *testing.T, insecure bool) *env {
	t.Helper()
	return newEnv(t, insecure, pagesSetup)
}

// startDoc starts a run of the latest version of a stored document.
func (e *env) startDoc(name string, input any) string {
	e.t.Helper()
	r, err := e.client.StartDocument(context.Background(), name, 0, input, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// token makes an API token and returns its secret.
func (e *env) token(name, role string) string {
	e.t.Helper()
	_, _, secret, err := server.NewToken(context.Background(), e.store.(store.Admin), &server.TokenParams{Principal: name, Role: role}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// getOK reads a path (a page or the API) as the admin token (none on an
// insecure server), failing the test on an answer other than 200.
func (e *env) getOK(path string) []byte {
	e.t.Helper()
	res, err := httpGet(e.url+path, e.admin)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, res.StatusCode, strings.TrimSpace(string(body)))
	}
	return body
}

// apiGet reads the API as the admin token (none on an insecure server)
// into out, failing the test on an answer other than 200.
func (e *env) apiGet(path string, out any) {
	e.t.Helper()
	if err := json.Unmarshal(e.getOK(path), out); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
}
