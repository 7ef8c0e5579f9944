package runsteps

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// ev is a history entry at ms milliseconds.
func ev(ms int, kind hephtype.EventKind, step string, index, attempt int, opts ...func(*Event)) Event {
	e := Event{Kind: kind, Step: step, Index: index, Attempt: attempt, At: at(ms)}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func withErr(s string) func(*Event)  { return func(e *Event) { e.Error = s } }
func withName(s string) func(*Event) { return func(e *Event) { e.Name = s } }
func withData(v any) func(*Event) {
	return func(e *Event) { b, _ := json.Marshal(v); e.Data = b }
}

// started is a step_started entry whose attempt began at startMS on worker.
func started(ms int, step string, index, attempt, startMS int, worker string) Event {
	return ev(ms, hephtype.EventStepStarted, step, index, attempt, withData(StartedData{Worker: worker, StartedAt: at(startMS), Claim: 1}))
}

// summary writes steps compactly: "key status start..end [n outcome worker ready/start..end error] waits".
func summary(steps []*Step) string {
	ms := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprint(t.Sub(t0).Milliseconds())
	}
	var b strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&b, "%s(%s) %s %s..%s", s.Key, s.Kind, s.Status, ms(s.Start), ms(s.End))
		if s.Error != "" {
			fmt.Fprintf(&b, " err=%q", s.Error)
		}
		for _, a := range s.Attempts {
			fmt.Fprintf(&b, " [%d %s %s %s/%s..%s", a.N, a.Outcome, nameOr(a.Worker, "-"), ms(a.Ready), ms(a.Start), ms(a.End))
			if a.Error != "" {
				fmt.Fprintf(&b, " %q", a.Error)
			}
			if a.Reexecution {
				b.WriteString(" re")
			}
			if len(a.Details) > 0 {
				b.WriteString(" " + string(a.Details))
			}
			b.WriteString("]")
		}
		for _, w := range s.Waits {
			fmt.Fprintf(&b, " wait(%s..%s %s %s %s)", ms(w.From), ms(w.To), w.Outcome, w.Event, w.Actor)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestDerive(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{{
		name: "a flow step retried, then one that fails",
		in: Input{Finished: true, End: at(100), States: []State{{"charge", "completed", 2}, {"ship", "failed", 1}, {"never", "pending", 0}},
			Events: []Event{
				ev(0, hephtype.EventRunStarted, "", 0, 0),
				ev(0, hephtype.EventStepScheduled, "charge", -1, 1),
				started(10, "charge", -1, 1, 2, "w1"),
				ev(10, hephtype.EventStepFailed, "charge", -1, 1, withErr("card declined")),
				ev(10, hephtype.EventStepRetrying, "charge", -1, 2, withData(map[string]any{"backoff": int64(5 * time.Millisecond), "ready_at": at(15)})),
				started(30, "charge", -1, 2, 20, "w2"),
				ev(30, hephtype.EventStepCompleted, "charge", -1, 2),
				ev(30, hephtype.EventStepScheduled, "ship", -1, 1),
				started(50, "ship", -1, 1, 40, "w1"),
				ev(50, hephtype.EventStepFailed, "ship", -1, 1, withErr("no address")),
				ev(50, hephtype.EventRunFailed, "", 0, 0, withErr("ship failed")),
			}},
		want: `charge(step) completed 2..30 [1 retrying w1 0/2..10 "card declined"] [2 completed w2 15/20..30]
ship(step) failed 40..50 err="no address" [1 failed w1 30/40..50 "no address"]
never(step) pending -..-
`,
	}, {
		name: "a map's elements, one retried; the map fails with the run",
		in: Input{Finished: true, End: at(60), States: []State{{"price", "failed", 1}},
			Events: []Event{
				ev(0, hephtype.EventMapExpanded, "price", 2, 0),
				started(10, "price", 0, 1, 5, "w1"),
				ev(10, hephtype.EventItemCompleted, "price", 0, 1),
				started(20, "price", 1, 1, 5, "w2"),
				ev(20, hephtype.EventItemFailed, "price", 1, 1, withErr("boom")),
				ev(60, hephtype.EventRunFailed, "price", 0, 0, withErr("price failed")),
			}},
		want: `price(step) failed 0..60 err="price failed" [1 failed - -/0..60 "price failed"]
price #0(item) completed 5..10 [1 completed w1 0/5..10]
price #1(item) failed 5..20 err="boom" [1 failed w2 0/5..20 "boom"]
`,
	}, {
		name: "a workflow: an activity retried, a timer, a child",
		in: Input{Finished: true, End: at(200),
			Events: []Event{
				ev(0, hephtype.EventStepScheduled, "", 1, 1, withName("fetch")),
				started(10, "", 1, 1, 3, "w1"),
				ev(10, hephtype.EventStepRetrying, "", 1, 2, withName("fetch"), withErr("503"), withData(map[string]any{"ready_at": at(12)})),
				started(20, "", 1, 2, 14, "w1"),
				ev(20, hephtype.EventStepCompleted, "", 1, 2, withName("fetch")),
				ev(30, hephtype.EventTimerStarted, "", 2, 0),
				ev(80, hephtype.EventTimerFired, "", 2, 0),
				ev(90, hephtype.EventChildStarted, "", 3, 0, withName("bill")),
				ev(150, hephtype.EventChildFailed, "", 3, 0, withErr("no card")),
			}},
		want: `fetch #1(activity) completed 3..20 [1 retrying w1 0/3..10 "503"] [2 completed w1 12/14..20]
timer #2(timer) completed 30..80 wait(30..80 completed  )
child bill #3(child) failed 90..150 err="no card" [1 failed - -/90..150 "no card"]
`,
	}, {
		name: "a step waits, is resumed, then snoozes",
		in: Input{End: at(500), States: []State{{"approve", "completed", 1}, {"poll", "scheduled", 1}},
			Events: []Event{
				ev(0, hephtype.EventStepScheduled, "approve", -1, 1),
				started(5, "approve", -1, 1, 1, "w1"),
				ev(5, hephtype.EventStepWaiting, "approve", -1, 1),
				ev(100, hephtype.EventStepResumed, "approve", -1, 1, withName("approved"), withData(map[string]string{"actor": "ann"})),
				ev(100, hephtype.EventStepCompleted, "approve", -1, 1),
				ev(100, hephtype.EventStepScheduled, "poll", -1, 1),
				started(110, "poll", -1, 1, 105, "w1"),
				ev(110, hephtype.EventStepSnoozed, "poll", -1, 1, func(e *Event) { e.Data = json.RawMessage(`"1s"`) }),
			}},
		want: `approve(step) completed 1..100 [1 completed w1 0/1..5] wait(5..100 completed approved ann)
poll(step) scheduled 105..- [1 snoozed w1 100/105..110] [1 queued - 1110/-..-]
`,
	}, {
		name: "a running attempt is read from its open task",
		in: Input{End: at(50), States: []State{{"charge", "scheduled", 1}, {"later", "scheduled", 1}},
			Events: []Event{
				ev(0, hephtype.EventStepScheduled, "charge", -1, 1),
				ev(0, hephtype.EventStepScheduled, "later", -1, 1),
			},
			Tasks: []Task{
				{Kind: "step", Step: "charge", Index: -1, Attempt: 1, ReadyAt: at(0), Owner: "w9", LeaseUntil: at(90), Claims: 2, Details: json.RawMessage(`{"page":3}`)},
				{Kind: "step", Step: "later", Index: -1, Attempt: 1, ReadyAt: at(1000)},
				{Kind: "decision", Step: "", Index: 0},
			}},
		want: `charge(step) running -..- [1 running w9 0/-..- re {"page":3}]
later(step) scheduled -..- [1 queued - 0/-..-]
`,
	}, {
		name: "an expired lease is no running attempt",
		in: Input{End: at(100), States: []State{{"charge", "scheduled", 1}},
			Events: []Event{ev(0, hephtype.EventStepScheduled, "charge", -1, 1)},
			Tasks:  []Task{{Kind: "step", Step: "charge", Index: -1, Attempt: 1, ReadyAt: at(0), Owner: "w9", LeaseUntil: at(90), Claims: 1}}},
		want: "charge(step) scheduled -..- [1 queued - 0/-..-]\n",
	}, {
		name: "a run cancelled while a step was queued",
		in: Input{Finished: true, End: at(40), States: []State{{"charge", "cancelled", 1}},
			Events: []Event{ev(0, hephtype.EventStepScheduled, "charge", -1, 1), ev(40, hephtype.EventRunCancelled, "", 0, 0)}},
		want: "charge(step) cancelled -..40 [1 cancelled - 0/-..40]\n",
	}, {
		name: "no history",
		in:   Input{End: at(0)},
		want: "",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := summary(Derive(&tc.in)); got != tc.want {
				t.Errorf("Derive:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestDuration(t *testing.T) {
	s := &Step{Start: at(10)}
	if got := s.Duration(at(40)); got != 30*time.Millisecond {
		t.Errorf("running step's duration %v, want 30ms so far", got)
	}
	s.End = at(20)
	if got := s.Duration(at(40)); got != 10*time.Millisecond {
		t.Errorf("ended step's duration %v, want 10ms", got)
	}
	if got := (&Step{}).Duration(at(40)); got != 0 {
		t.Errorf("unstarted step's duration %v, want 0", got)
	}
}
