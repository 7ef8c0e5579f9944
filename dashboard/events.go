package dashboard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/server"
)

// describeEvent says in one short English line what a history entry
// records: "step charge_payment attempt 2 failed: card declined",
// "timer 1h started", "signal checkout received", "run completed".
// An entry of a kind it does not know is "entry <kind>".
func describeEvent(e server.Event) string {
	if hephtype.EventKind(e.Kind) == hephtype.EventStepRetrying && e.Error != "" {
		// A workflow's activity: the failure is on this entry.
		return fmt.Sprintf("%s attempt %d failed: %s; it %s", subject(e), e.Attempt-1, e.Error, retryOf(e))
	}
	s, ok := describeRunEvent(e)
	if !ok {
		s, ok = describeStepEvent(e)
	}
	if !ok {
		s, ok = describeOtherEvent(e)
	}
	if !ok {
		s = "entry " + e.Kind
		if e.Step != "" {
			s += " of step " + e.Step
		}
	}
	if e.Error != "" {
		s += ": " + e.Error
	}
	return s
}

// retryOf says when a step_retrying entry's step runs again: "retries as
// attempt 3 in 2s".
func retryOf(e server.Event) string {
	retry := "retries as attempt " + strconv.Itoa(e.Attempt)
	if d, ok := backoffOf(e); ok {
		retry += " in " + fmtDur(d)
	}
	return retry
}

// describeRunEvent describes the entries of a run's life (describeEvent,
// without the error); false for another kind.
func describeRunEvent(e server.Event) (string, bool) {
	var s string
	switch hephtype.EventKind(e.Kind) {
	case hephtype.EventRunStarted:
		s = "run started"
		if e.Name != "" {
			s = "run of " + e.Name + " started"
		}
	case hephtype.EventRunCompleted:
		s = "run completed"
	case hephtype.EventRunFailed:
		s = "run failed"
		if e.Step != "" && e.Error == "" {
			s += " at step " + e.Step
		}
	case hephtype.EventRunCancelled:
		s = "run cancelled"
	case hephtype.EventRunTimedOut:
		s = "run timed out"
	case hephtype.EventRunPaused, hephtype.EventRunUnpaused:
		s = "run " + strings.TrimPrefix(e.Kind, "run_")
		if e.Name != "" {
			s += " by " + e.Name
		}
	case hephtype.EventRunContinued:
		s = "run continued as new"
	case hephtype.EventWorkflowReset:
		s = "workflow reset"
		if e.Name != "" {
			s += ": linked to run " + e.Name
		}
	case hephtype.EventRunRetried:
		s = "run retried from its failed steps"
	case hephtype.EventRunReset:
		s = "run reset to step " + e.Step
		if e.Name != "" {
			s += " by " + e.Name
		}
	default:
		return "", false
	}
	return s, true
}

// describeStepEvent describes the entries of a step, a map's elements
// and a workflow's activities (describeEvent, without the error); false
// for another kind.
func describeStepEvent(e server.Event) (string, bool) {
	subj := subject(e)
	var s string
	switch hephtype.EventKind(e.Kind) {
	case hephtype.EventStepScheduled:
		s = subj + attemptOf(e, true) + " scheduled"
	case hephtype.EventStepStarted:
		s = subj + attemptOf(e, true) + " started"
		if w := dataString(e.Data, "worker"); w != "" {
			s += " on worker " + w
		}
	case hephtype.EventStepCompleted:
		s = subj + attemptOf(e, true) + " completed"
		if !isActivity(e) && e.Name != "" && e.Name != "ok" {
			s += " with event " + e.Name
		}
	case hephtype.EventStepFailed:
		s = subj + attemptOf(e, false) + " failed"
	case hephtype.EventStepRetrying:
		s = subj + " " + retryOf(e)
	case hephtype.EventStepSkipped:
		s = subj + " skipped"
	case hephtype.EventStepWaiting:
		s = subj + " waiting"
	case hephtype.EventStepResumed:
		s = subj + " resumed"
		if e.Name != "" {
			s += " with " + e.Name
		}
		if a := dataString(e.Data, "actor"); a != "" {
			s += " by " + a
		}
		if c := dataString(e.Data, "comment"); c != "" {
			s += " (" + strconv.Quote(c) + ")"
		}
	case hephtype.EventStepCancelled:
		s = subj + " cancelled"
	case hephtype.EventStepSnoozed:
		s = subj + attemptOf(e, false) + " snoozed"
		var d string
		if json.Unmarshal(e.Data, &d) == nil && d != "" {
			if dd, err := time.ParseDuration(d); err == nil {
				d = fmtDur(dd)
			}
			s += " for " + d
		}
	case hephtype.EventMapExpanded:
		s = fmt.Sprintf("map step %s expanded to %d %s", e.Step, e.Index, plural(e.Index, "element", "elements"))
	case hephtype.EventItemCompleted:
		s = fmt.Sprintf("step %s element %d%s completed", e.Step, e.Index, attemptOf(e, true))
	case hephtype.EventItemFailed:
		s = fmt.Sprintf("step %s element %d%s failed", e.Step, e.Index, attemptOf(e, false))
	default:
		return "", false
	}
	return s, true
}

// describeOtherEvent describes the entries of timers, signals, updates,
// patches, child workflows and decisions (describeEvent, without the
// error); false for another kind.
func describeOtherEvent(e server.Event) (string, bool) {
	var s string
	switch hephtype.EventKind(e.Kind) {
	case hephtype.EventTimerStarted:
		s = timerName(e)
		if d, ok := timerDuration(e); ok {
			s = strings.Replace(s, "timer", "timer "+fmtDur(d), 1)
		}
		s += " started"
	case hephtype.EventTimerFired:
		s = timerName(e) + " fired"
	case hephtype.EventTimerCancelled:
		s = timerName(e) + " cancelled"
	case hephtype.EventSignalReceived:
		s = "signal " + e.Name + " received"
	case hephtype.EventUpdateAccepted:
		s = "update " + e.Name + " accepted"
	case hephtype.EventUpdateRejected:
		s = "update " + e.Name + " rejected"
	case hephtype.EventUpdateDone:
		s = "update " + e.Name + " completed"
		if e.Error != "" {
			s = "update " + e.Name + " failed"
		}
	case hephtype.EventMarker:
		s = "patch " + e.Name + " recorded"
	case hephtype.EventAttributesUpserted:
		s = "search attributes upserted"
	case hephtype.EventChildStarted:
		s = "child workflow " + e.Name + " #" + strconv.Itoa(e.Index) + " started"
	case hephtype.EventChildCompleted:
		s = "child workflow " + nameOr(e.Name, "#"+strconv.Itoa(e.Index)) + " completed"
	case hephtype.EventChildFailed:
		s = "child workflow " + nameOr(e.Name, "#"+strconv.Itoa(e.Index)) + " failed"
	case hephtype.EventChildCancelled:
		s = "cancellation of child workflow " + nameOr(e.Name, "#"+strconv.Itoa(e.Index)) + " requested"
	case hephtype.EventDecision:
		s = "workflow code ran (decision)"
	default:
		return "", false
	}
	return s, true
}

// subject names what a step entry is about: "step charge_payment",
// "step price_items element 2", or a workflow's "activity charge #2".
func subject(e server.Event) string {
	switch {
	case isActivity(e) && e.Name != "":
		return "activity " + e.Name + " #" + strconv.Itoa(e.Index)
	case isActivity(e):
		return "activity #" + strconv.Itoa(e.Index)
	case e.Index > 0:
		return fmt.Sprintf("step %s element %d", e.Step, e.Index)
	}
	return "step " + e.Step
}

// isActivity reports whether a step entry is an activity of a code-first
// workflow: those name the activity in Name and keep Step empty, or a
// record of the call site (a JSON object) on step_scheduled.
func isActivity(e server.Event) bool {
	return e.Step == "" || strings.HasPrefix(e.Step, "{")
}

// attemptOf is " attempt N", left out for a first attempt when first is
// set (a scheduled or completed step says nothing of attempt 1).
func attemptOf(e server.Event, first bool) string {
	if e.Attempt == 0 || (first && e.Attempt == 1) {
		return ""
	}
	return " attempt " + strconv.Itoa(e.Attempt)
}

// timerName is "timer #4" for a workflow's timer, or "timer of step
// approve" for the deadline of a flow's waiting step.
func timerName(e server.Event) string {
	if e.Step != "" && !strings.HasPrefix(e.Step, "{") {
		return "timer of step " + e.Step
	}
	return "timer #" + strconv.Itoa(e.Index)
}

// timerDuration reads a timer_started entry's duration: a workflow's
// "duration" in nanoseconds, or a flow's "after" ("1h0m0s").
func timerDuration(e server.Event) (time.Duration, bool) {
	var d struct {
		Duration *int64 `json:"duration"`
		After    string `json:"after"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return 0, false
	}
	if d.Duration != nil {
		return time.Duration(*d.Duration), true
	}
	if dd, err := time.ParseDuration(d.After); err == nil {
		return dd, true
	}
	return 0, false
}

// backoffOf reads the backoff of a step_retrying entry (nanoseconds).
func backoffOf(e server.Event) (time.Duration, bool) {
	var d struct {
		Backoff *int64 `json:"backoff"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.Backoff == nil {
		return 0, false
	}
	return time.Duration(*d.Backoff), true
}

// dataString returns a string field of an entry's data, or "".
func dataString(data json.RawMessage, field string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[field], &s) != nil {
		return ""
	}
	return s
}

func nameOr(name, alt string) string {
	if name != "" {
		return name
	}
	return alt
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// fmtDur writes a duration short and rounded for people: 0s, 120ms,
// 1.2s, 45s, 2m, 2m30s, 1h, 1h30m, 3d.
func fmtDur(d time.Duration) string {
	neg := d < 0
	if neg {
		d = -d
	}
	var s string
	switch {
	case d == 0:
		s = "0s"
	case d < time.Millisecond:
		s = strconv.FormatInt(int64(d/time.Microsecond), 10) + "µs"
	case d < time.Second:
		s = strconv.FormatInt(int64(d.Round(time.Millisecond)/time.Millisecond), 10) + "ms"
	case d < 10*time.Second:
		s = strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', -1, 64) + "s"
	case d < time.Minute:
		s = strconv.FormatInt(int64(d.Round(time.Second)/time.Second), 10) + "s"
	case d < time.Hour:
		d = d.Round(time.Second)
		s = strconv.FormatInt(int64(d/time.Minute), 10) + "m"
		if sec := d % time.Minute; sec != 0 {
			s += strconv.FormatInt(int64(sec/time.Second), 10) + "s"
		}
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		s = strconv.FormatInt(int64(d/time.Hour), 10) + "h"
		if m := d % time.Hour; m != 0 {
			s += strconv.FormatInt(int64(m/time.Minute), 10) + "m"
		}
	default:
		s = strconv.FormatInt(int64(d.Round(24*time.Hour)/(24*time.Hour)), 10) + "d"
	}
	if neg {
		s = "-" + s
	}
	return s
}
