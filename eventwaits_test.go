package hephaestus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/workflow"
)

type ewIn struct {
	Event    string        `json:"event"`
	Invoice  int           `json:"invoice"`
	Match    string        `json:"match"`
	LookBack time.Duration `json:"look_back"`
	Timeout  time.Duration `json:"timeout"`
	// ResumeWith is the flow step's AwaitEventOptions.ResumeWith.
	ResumeWith string `json:"resume_with"`
}

const ewMatch = "event.data.invoice == input.invoice"

var ewWorkflow = workflow.New("ew.wf", func(ctx workflow.Context, in ewIn) (string, error) {
	e, err := workflow.WaitForEvent(ctx, in.Event, &workflow.EventWaitOptions{Match: in.Match, Input: in, LookBack: in.LookBack, Timeout: in.Timeout})
	if errors.Is(err, workflow.ErrEventTimeout) {
		return "timeout", nil
	}
	if err != nil {
		return "", err
	}
	return "got " + e.ID + " " + string(e.Data), nil
})

// ewFlow is a flow whose step waits for an event (AwaitEvent) with a step
// timeout, and routes received and timeout to steps that say which came.
func ewFlow(c *heph.Client, name string, timeout time.Duration) *flow.Flow {
	b := flow.New(name).Start("await")
	flow.EventStep(b, "await", func(ctx context.Context, in ewIn) (flow.Result[any], error) {
		if err := c.AwaitEvent(ctx, in.Event, &heph.AwaitEventOptions{Match: in.Match, Input: in, LookBack: in.LookBack, ResumeWith: in.ResumeWith}); err != nil {
			return flow.Result[any]{}, flow.NonRetryable(err)
		}
		return flow.Wait[any](), nil
	}, flow.Events(heph.EventReceived), flow.Waits(timeout))
	flow.Step(b, "got", func(ctx context.Context, in any) (string, error) {
		e, err := flow.Output[heph.EventRecord](ctx, "await")
		return "received " + e.ID + " " + string(e.Data), err
	})
	flow.Step(b, "late", func(ctx context.Context, in any) (string, error) { return "timed out", nil })
	b.Edge("await", heph.EventReceived, "got").Edge("await", flow.EventTimeout, "late")
	return b.MustBuild()
}

// deliveredWaits waits until every event wait of a run is delivered
// (or closed), and returns them.
func deliveredWaits(t *testing.T, ctx context.Context, c *heph.Client, runID string) []*heph.EventWait {
	t.Helper()
	var ws []*heph.EventWait
	waitFor(t, ctx, func() bool {
		var err error
		if ws, err = c.EventWaits(ctx, runID); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.DeliveredAt.IsZero() {
				return false
			}
		}
		return len(ws) > 0
	})
	return ws
}

// Event waits, in a workflow and in a flow step, on both backends: each
// gets the first matching event, once (a non-matching one and a second
// match are ignored); look-back admits an event sent before the wait, and
// without it that event does not match; the timeout fires when nothing
// matches; a bad expression fails the run, naming it.
func TestEventWaits(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			c := startClient(t, ctx, &heph.Config{Store: open(t), PollInterval: 20 * time.Millisecond, Logger: quietLogger()}, func(c *heph.Client) error {
				if err := c.RegisterWorkflows(ewWorkflow); err != nil {
					return err
				}
				return c.Register(ewFlow(c, "ew.flow", time.Minute), ewFlow(c, "ew.flow.short", 500*time.Millisecond))
			})
			send := func(event, id string, invoice int) {
				t.Helper()
				if _, err := c.SendEvent(ctx, event, map[string]any{"invoice": invoice}, &heph.SendEventOptions{ID: id}); err != nil {
					t.Fatal(err)
				}
			}
			registered := func(runID string) {
				t.Helper()
				waitFor(t, ctx, func() bool {
					ws, err := c.EventWaits(ctx, runID)
					if err != nil {
						t.Fatal(err)
					}
					return len(ws) == 1
				})
			}
			check := func(what string, f func(t *testing.T)) { t.Run(what, f) }

			check("workflow", func(t *testing.T) {
				r, err := c.StartWorkflow(ctx, "ew.wf", ewIn{Event: "inv.wf", Invoice: 7, Match: ewMatch, Timeout: time.Minute}, nil)
				if err != nil {
					t.Fatal(err)
				}
				registered(r.ID)
				send("inv.wf", "wf-other", 8)
				send("inv.wf", "wf-m1", 7)
				send("inv.wf", "wf-m2", 7)
				done, err := c.WaitRun(ctx, r.ID)
				if err != nil || !strings.Contains(string(done.Output), "got wf-m1") {
					t.Fatalf("run: %+v %v", done, err)
				}
				// Dispatch again: the second match changes nothing.
				if _, err := c.DispatchEventWaits(ctx); err != nil {
					t.Fatal(err)
				}
				h, err := c.History(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, e := range h {
					if e.Kind == hephtype.EventSignalReceived && strings.HasPrefix(e.Name, "heph.event:") {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d heph.event signals in the history, want 1", n)
				}
				ws := deliveredWaits(t, ctx, c, r.ID)
				if len(ws) != 1 || ws[0].MatchedEventID != "wf-m1" || ws[0].Kind != "workflow" {
					t.Fatalf("waits: %+v", *ws[0])
				}
				if ws, err := c.EventWaitsMatched(ctx, "wf-m1"); err != nil || len(ws) != 1 || ws[0].RunID != r.ID {
					t.Errorf("waits matched by wf-m1: %+v %v", ws, err)
				}
				if ws, err := c.EventWaitsMatched(ctx, "wf-m2"); err != nil || len(ws) != 0 {
					t.Errorf("waits matched by wf-m2: %+v %v", ws, err)
				}
			})

			check("workflow look-back", func(t *testing.T) {
				send("inv.lb", "lb-1", 3)
				send("inv.nolb", "nolb-1", 3)
				lb, err := c.StartWorkflow(ctx, "ew.wf", ewIn{Event: "inv.lb", Invoice: 3, Match: ewMatch, LookBack: time.Minute}, nil)
				if err != nil {
					t.Fatal(err)
				}
				nolb, err := c.StartWorkflow(ctx, "ew.wf", ewIn{Event: "inv.nolb", Invoice: 3, Match: ewMatch, Timeout: 700 * time.Millisecond}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r, err := c.WaitRun(ctx, lb.ID); err != nil || !strings.Contains(string(r.Output), "got lb-1") {
					t.Errorf("look-back: %+v %v", r, err)
				}
				if r, err := c.WaitRun(ctx, nolb.ID); err != nil || string(r.Output) != `"timeout"` {
					t.Errorf("without look-back: %+v %v", r, err)
				}
			})

			check("workflow bad match", func(t *testing.T) {
				r, err := c.StartWorkflow(ctx, "ew.wf", ewIn{Event: "inv.bad", Match: "event.data.invoice =="}, nil)
				if err != nil {
					t.Fatal(err)
				}
				done, err := c.WaitRun(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if done.Status != heph.StatusFailed || !strings.Contains(done.Error, "event.data.invoice ==") {
					t.Errorf("the run with a bad match: %s %q, want failed naming the expression", done.Status, done.Error)
				}
			})

			check("flow step", func(t *testing.T) {
				r, err := c.StartRun(ctx, "ew.flow", ewIn{Event: "inv.flow", Invoice: 5, Match: ewMatch}, nil)
				if err != nil {
					t.Fatal(err)
				}
				registered(r.ID)
				send("inv.flow", "fl-other", 6)
				send("inv.flow", "fl-m1", 5)
				send("inv.flow", "fl-m2", 5)
				done, err := c.WaitRun(ctx, r.ID)
				if err != nil || !strings.Contains(string(done.Output), "received") || !strings.Contains(string(done.Output), "fl-m1") {
					t.Fatalf("run: %s %v", done.Output, err)
				}
				// The wait is marked delivered just after the resume.
				ws := deliveredWaits(t, ctx, c, r.ID)
				if len(ws) != 1 || ws[0].MatchedEventID != "fl-m1" || ws[0].Step != "await" || ws[0].Kind != "step" {
					t.Fatalf("waits: %+v", *ws[0])
				}
			})

			check("flow step look-back and timeout", func(t *testing.T) {
				send("inv.flb", "flb-1", 4)
				lb, err := c.StartRun(ctx, "ew.flow", ewIn{Event: "inv.flb", Invoice: 4, Match: ewMatch, LookBack: time.Minute}, nil)
				if err != nil {
					t.Fatal(err)
				}
				to, err := c.StartRun(ctx, "ew.flow.short", ewIn{Event: "inv.flb", Invoice: 4, Match: ewMatch}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if r, err := c.WaitRun(ctx, lb.ID); err != nil || !strings.Contains(string(r.Output), "flb-1") {
					t.Errorf("look-back: %s %v", r.Output, err)
				}
				if r, err := c.WaitRun(ctx, to.ID); err != nil || !strings.Contains(string(r.Output), "timed out") {
					t.Errorf("timeout: %s %v", r.Output, err)
				}
			})

			check("flow step resumed with an undeclared event", func(t *testing.T) {
				r, err := c.StartRun(ctx, "ew.flow", ewIn{Event: "inv.undeclared", Invoice: 9, Match: ewMatch, ResumeWith: "nope"}, nil)
				if err != nil {
					t.Fatal(err)
				}
				registered(r.ID)
				send("inv.undeclared", "und-1", 9)
				// The wait is matched, cannot resume the step, and is closed
				// (not retried on every pass); the step still waits, for its
				// timeout (a minute) or a resume by hand.
				ws := deliveredWaits(t, ctx, c, r.ID)
				if len(ws) != 1 || ws[0].MatchedEventID != "und-1" {
					t.Fatalf("waits: %+v", *ws[0])
				}
				if got, err := c.GetRun(ctx, r.ID); err != nil || got.Status != heph.StatusWaiting {
					t.Errorf("run: %+v %v, want still waiting", got, err)
				}
				if err := c.CancelRun(ctx, r.ID, "test over"); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

const invoiceDoc = `name: invoices
steps:
  await_paid:
    wait:
      event: invoice.paid
      match: event.data.invoice == input.invoice
      look_back: 1m
      timeout: 1m
    on: {received: paid, timeout: late}
  paid: {action: note, args: {what: paid}, done: true}
  late: {action: note, args: {what: late}, done: true}
`

// A document step waits for an event (wait: {event, match, look_back}):
// the matching event resumes it with received, once; bad keys of the wait
// are refused with their line and field.
func TestDocumentEventWait(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			reg := flowdoc.NewRegistry()
			if err := flowdoc.RegisterAction(reg, "note", func(ctx context.Context, call flowdoc.ActionCall, in map[string]any) (any, error) {
				return in["what"], nil
			}); err != nil {
				t.Fatal(err)
			}
			c := startClient(t, ctx, &heph.Config{Store: open(t), PollInterval: 20 * time.Millisecond, Logger: quietLogger()}, func(c *heph.Client) error { return nil })
			if _, err := c.PutDocument(ctx, "invoices", heph.DocumentYAML, []byte(invoiceDoc)); err != nil {
				t.Fatal(err)
			}
			if err := c.RegisterDocuments(ctx, reg); err != nil {
				t.Fatal(err)
			}
			if _, err := c.SendEvent(ctx, "invoice.paid", map[string]any{"invoice": 1}, &heph.SendEventOptions{ID: "doc-early"}); err != nil {
				t.Fatal(err)
			}
			r, err := c.StartDocument(ctx, "invoices", 0, map[string]any{"invoice": 2}, nil)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, func() bool { ws, err := c.EventWaits(ctx, r.ID); return err == nil && len(ws) == 1 })
			for _, id := range []string{"doc-other", "doc-m1", "doc-m2"} {
				inv := 2
				if id == "doc-other" {
					inv = 3
				}
				if _, err := c.SendEvent(ctx, "invoice.paid", map[string]any{"invoice": inv}, &heph.SendEventOptions{ID: id}); err != nil {
					t.Fatal(err)
				}
			}
			done, err := c.WaitRun(ctx, r.ID)
			if err != nil || done.Status != heph.StatusCompleted || !strings.Contains(string(done.Output), "paid") {
				t.Fatalf("run: %+v %v", done, err)
			}
			if ws := deliveredWaits(t, ctx, c, r.ID); len(ws) != 1 || ws[0].MatchedEventID != "doc-m1" || ws[0].Step != "await_paid" {
				t.Fatalf("waits: %+v", *ws[0])
			}
		})
	}
	for _, bad := range []struct{ doc, want string }{
		{"name: b\nsteps:\n  a:\n    wait: {event: x, match: 'event.data.n >'}\n    on: {received: done}\n", "b.yaml:4:"},
		{"name: b\nsteps:\n  a:\n    wait: {match: 'true'}\n    done: true\n", "match is set without event"},
		{"name: b\nsteps:\n  a:\n    wait: {event: x, look_back: soon}\n    on: {received: done}\n", "look_back"},
	} {
		_, err := flowdoc.Parse("b.yaml", []byte(bad.doc))
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), "wait") {
			t.Errorf("parse %q: %v, want an error naming %q", bad.doc, err, bad.want)
		}
	}
}

// A flow step's resume by an event wait can find the step not waiting
// and, before delivery decides what that means, the step commits its
// Wait: the step waits now, so the delivery must try again, not call the
// wait done (the event would be lost and the run would wait for ever;
// TestChaosEventWaits/postgres lost one so in CI under load).
func TestEventWaitTriedAgainWhenTheStepWaitsByNow(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			c := startClient(t, ctx, &heph.Config{Store: open(t), PollInterval: 20 * time.Millisecond, Logger: quietLogger()}, func(c *heph.Client) error {
				return c.Register(ewFlow(c, "ew.flow", time.Hour))
			})
			r, err := c.StartRun(ctx, "ew.flow", ewIn{Event: "inv.never", Invoice: 1, Match: ewMatch}, nil)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, ctx, func() bool {
				steps, err := c.Steps(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range steps {
					if s.Name == "await" {
						return hephtype.StepStatus(s.Status) == hephtype.StepWaiting
					}
				}
				return false
			})
			if err := heph.StepNotWaiting(ctx, c, r.ID, "await"); err == nil {
				t.Fatal("a waiting step's wait was called done after a resume that found it not waiting")
			}
			// A step that ended is done waiting: the wait is closed.
			if err := c.ResumeRun(ctx, r.ID, heph.EventReceived, &heph.ResumeOptions{Step: "await", Payload: heph.EventRecord{ID: "by-hand"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.WaitRun(ctx, r.ID); err != nil {
				t.Fatal(err)
			}
			if err := heph.StepNotWaiting(ctx, c, r.ID, "await"); err != nil {
				t.Fatalf("an ended step's wait: %v, want done", err)
			}
		})
	}
}
