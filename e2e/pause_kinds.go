package e2e

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
)

const pauseDoc = `
name: pause-doc
steps:
  hold:
    wait_until: 2031-03-04T06:00:00Z
    next: send
  send:
    action: send
    args: {msg: "{{input.msg}}"}
    done: true
`

// testPauseJobAndDocument: a job paused while it waits for its retry,
// and a stored document's run paused while its wait_until step waits,
// are not claimed when their time comes (the clock moves hours past it);
// after unpause the job's retry runs once and the document's next step
// runs once, and both complete, with one run_paused and one run_unpaused
// each.
func testPauseJobAndDocument(t *testing.T, b Backend) {
	start := time.Date(2031, 3, 4, 5, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	st, _ := b.New(t)
	var attempts, sends atomic.Int32
	flaky := job.MustNew("pause.flaky", func(ctx context.Context, j *job.Job[string]) error {
		if attempts.Add(1) == 1 {
			return errors.New("flaky once")
		}
		return nil
	}, &job.Options[string]{Retry: flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Hour, MaxBackoff: time.Hour}})
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "send", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		Msg string `json:"msg"`
	}) (string, error) {
		sends.Add(1)
		return "sent " + in.Msg, nil
	}); err != nil {
		t.Fatal(err)
	}
	c, err := heph.New(&heph.Config{Store: st, Clock: fc, Queues: map[string]int{"default": 8}, PollInterval: 50 * time.Millisecond, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if err := errors.Join(c.RegisterJobs(flaky), c.RegisterDocuments(ctx, reg)); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(c) })
	e := &env{t: t, c: c, st: st}
	if _, err := c.PutDocument(ctx, "pause-doc", heph.DocumentYAML, []byte(pauseDoc)); err != nil {
		t.Fatal(err)
	}

	jb, err := heph.InsertJob(ctx, c, flaky, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.StartDocument(ctx, "pause-doc", 0, map[string]string{"msg": "hi"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Each waits: the job for its retry an hour on, the document until 6:00.
	waitFor(t, "the job's retry", func() bool { return count(e.history(jb.ID), hephtype.EventStepRetrying, "") == 1 })
	waitFor(t, "the document's wait", func() bool { return count(e.history(doc.ID), hephtype.EventStepSnoozed, "") >= 1 })
	for _, id := range []string{jb.ID, doc.ID} {
		if err := c.PauseRun(ctx, id, &heph.PauseOptions{By: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	fc.Advance(3 * time.Hour)
	for _, task := range e.probeClaim(fc.Now()) {
		if task.RunID == jb.ID || task.RunID == doc.ID {
			t.Fatalf("the task %s of paused run %s was claimable past its time", task.Step, task.RunID)
		}
	}
	if attempts.Load() != 1 || sends.Load() != 0 {
		t.Fatalf("while paused: %d job attempts, %d sends; want 1, 0", attempts.Load(), sends.Load())
	}
	for _, id := range []string{jb.ID, doc.ID} {
		if err := c.UnpauseRun(ctx, id, &heph.UnpauseOptions{By: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{jb.ID, doc.ID} {
		e.waitJobTicking(fc, id, heph.StatusCompleted)
		h := e.history(id)
		if count(h, hephtype.EventRunPaused, "") != 1 || count(h, hephtype.EventRunUnpaused, "") != 1 {
			t.Fatalf("run %s history %v: want one run_paused and one run_unpaused", id, kinds(h))
		}
	}
	if attempts.Load() != 2 || sends.Load() != 1 {
		t.Fatalf("after unpause: %d job attempts, %d sends; want 2, 1", attempts.Load(), sends.Load())
	}
}
