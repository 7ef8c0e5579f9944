package e2e

import (
	"encoding/json"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

const waitUntilDoc = `
name: doc-remind
steps:
  hold:
    wait_until: "{{input.due}}"
    next: send
  send:
    action: pushover_send
    args: {message: "due {{steps.hold.output.until}}"}
    done: true
`

// testDocWaitUntil: a document step with wait_until holds its run until
// the runtime's clock reaches the time from the input (its task snoozed
// once until then, the next step not run), then the run goes on; a time
// already past does not wait.
func testDocWaitUntil(t *testing.T, b Backend) {
	tools := newDocTools(t)
	clk := &laterClock{}
	e := newEnv(t, b, func(c *heph.Config) { c.Clock = clk }, tools.load(t, "remind.yaml", waitUntilDoc))
	ctx := ctxT(t)
	due := clk.Now().Add(time.Hour).UTC().Truncate(time.Second)
	r, err := e.c.StartRun(ctx, "doc-remind", map[string]any{"due": due.Format(time.RFC3339)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the wait_until step's snooze", func() bool { return count(e.history(r.ID), hephtype.EventStepSnoozed, "hold") > 0 })
	h := e.history(r.ID)
	if n := count(h, hephtype.EventStepStarted, "send"); n != 0 || tools.calls["pushover_send"].Load() != 0 {
		t.Fatalf("the next step ran before the time (%d starts)", n)
	}
	for _, ev := range h {
		if ev.Kind == hephtype.EventStepSnoozed {
			var d struct {
				ReadyAt time.Time `json:"ready_at"`
			}
			if err := json.Unmarshal(ev.Data, &d); err != nil || d.ReadyAt.Before(due) {
				t.Fatalf("the snooze %s: ready before the time %v (%v)", ev.Data, due, err)
			}
		}
	}
	// The clock reaches the time: the step completes with it, the next
	// step runs once.
	clk.shift.Store(int64(time.Hour))
	done := e.waitStatus(r.ID, heph.StatusCompleted)
	wantJSON(t, done.Output, `{"send":"sent to : due `+due.Format(time.RFC3339)+`"}`)
	h = e.history(r.ID)
	if n := count(h, hephtype.EventStepCompleted, "hold"); n != 1 {
		t.Errorf("hold completed %d times", n)
	}
	if got := tools.calls["pushover_send"].Load(); got != 1 {
		t.Errorf("send ran %d times, want 1", got)
	}
	// A time already past: no snooze.
	past, err := e.c.Run(ctx, "doc-remind", map[string]any{"due": clk.Now().Add(-time.Minute).UTC().Format(time.RFC3339)}, nil)
	if err != nil || past.Status != heph.StatusCompleted {
		t.Fatalf("a past time: %+v, %v", past, err)
	}
	if n := count(e.history(past.ID), hephtype.EventStepSnoozed, ""); n != 0 {
		t.Errorf("a past time snoozed %d times", n)
	}
}
