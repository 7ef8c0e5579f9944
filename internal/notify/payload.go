package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The event types a webhook can receive.
const (
	RunStarted         = "run.started"
	RunCompleted       = "run.completed"
	RunFailed          = "run.failed"
	RunCancelled       = "run.cancelled"
	StepCompleted      = "step.completed"
	StepFailed         = "step.failed"
	GateOpened         = "gate.opened"
	GateDecided        = "gate.decided"
	ScheduleTickFailed = "schedule.tick_failed"
	// Test is the type of the deliveries Test sends; every webhook gets
	// it, whatever its filter.
	Test = "webhook.test"
)

// Types lists the event types a webhook can subscribe to, in the order
// the documentation gives them.
var Types = []string{RunStarted, RunCompleted, RunFailed, RunCancelled, StepCompleted, StepFailed, GateOpened, GateDecided, ScheduleTickFailed}

// The body formats.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
)

// typeOf maps a captured event's kind to its event type ("" for none).
var typeOf = map[string]string{
	string(hephtype.EventRunStarted): RunStarted, string(hephtype.EventRunCompleted): RunCompleted,
	string(hephtype.EventRunFailed): RunFailed, string(hephtype.EventRunCancelled): RunCancelled,
	string(hephtype.EventRunTimedOut):   RunFailed,
	string(hephtype.EventStepCompleted): StepCompleted, string(hephtype.EventStepFailed): StepFailed,
	string(hephtype.EventStepWaiting): GateOpened, string(hephtype.EventStepResumed): GateDecided,
	store.EventScheduleTickFailed: ScheduleTickFailed,
}

// TypeOf returns the event type of a captured event's kind, "" when
// webhooks do not report it.
func TypeOf(kind string) string { return typeOf[kind] }

// The delivery headers.
const (
	HeaderID        = "Heph-Delivery-Id"
	HeaderEvent     = "Heph-Event"
	HeaderTimestamp = "Heph-Timestamp"
	HeaderSignature = "Heph-Signature"
)

// Sign returns the signature header value of body sent at ts (Unix
// seconds): "v1=" and the hex HMAC-SHA256, keyed with the webhook's
// secret, of "<ts>.<body>".
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a delivery as a receiver does: the timestamp header is
// within tolerance of now and one of the signature header's v1 values is
// the HMAC of "<timestamp>.<body>" with secret.
func Verify(secret string, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook: %s %q is not Unix seconds", HeaderTimestamp, timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook: %s is %v away from now, more than %v", HeaderTimestamp, d.Round(time.Second), tolerance)
	}
	want := Sign(secret, ts, body)
	for v := range strings.SplitSeq(signature, ",") {
		if hmac.Equal([]byte(strings.TrimSpace(v)), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("webhook: no signature in %s matches the body", HeaderSignature)
}

// DeliveryID returns the id of the delivery of the event key to a
// webhook: the same for every retry and every dispatch of that event.
func DeliveryID(webhookID, eventKey string) string {
	sum := sha256.Sum256([]byte(webhookID + "\x00" + eventKey))
	return "whd_" + hex.EncodeToString(sum[:16])
}

// eventKey names a captured event for good: its run and place in the
// history, or its schedule and tick.
func eventKey(e *store.WebhookEvent) string {
	if e.RunID == "" {
		return "schedule:" + e.Step + ":" + e.At.UTC().Format(time.RFC3339Nano)
	}
	return e.RunID + ":" + strconv.FormatInt(e.Seq, 10)
}

// Matches reports whether webhook w wants an event of type typ about a
// run of workflow with tags (workflow "" for an event of no run): it is
// enabled, lists the type, and its workflow and tag filters (when set)
// hold: the run's workflow is one of Workflows, and it has one of Tags.
func Matches(w *store.Webhook, typ, workflow string, tags []string) bool {
	if !w.Enabled || !slices.Contains(w.Events, typ) {
		return false
	}
	if len(w.Workflows) > 0 && !slices.Contains(w.Workflows, workflow) {
		return false
	}
	if len(w.Tags) > 0 && !slices.ContainsFunc(w.Tags, func(t string) bool { return slices.Contains(tags, t) }) {
		return false
	}
	return true
}

// Payload is the JSON body of a delivery (format json).
type Payload struct {
	// ID is the delivery's id (also in the Heph-Delivery-Id header).
	ID   string    `json:"id"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Run  *RunRef   `json:"run,omitempty"`
	// Step names the step (run events of no step leave it out);
	// Attempt its attempt.
	Step    string `json:"step,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Event is the event a step completed with, or the decision of a
	// gate (approved, rejected, or the event it was resumed with).
	Event string `json:"event,omitempty"`
	Error string `json:"error,omitempty"`
	// Data is a gate's decision: {"actor", "groups", "comment",
	// "decided_at"} for approval gates, the resume payload otherwise.
	Data     json.RawMessage `json:"data,omitempty"`
	Schedule *ScheduleRef    `json:"schedule,omitempty"`
	// Message says what happened, for people.
	Message string `json:"message"`
}

// RunRef names the run of an event.
type RunRef struct {
	ID         string   `json:"id"`
	Workflow   string   `json:"workflow,omitempty"`
	BusinessID string   `json:"business_id,omitempty"`
	Tags       []string `json:"tags,omitempty"`
}

// ScheduleRef names the schedule and tick of a schedule event.
type ScheduleRef struct {
	ID   string    `json:"id"`
	Tick time.Time `json:"tick"`
}

// payloadOf is the payload of a captured event of type typ for the
// delivery id.
func payloadOf(id, typ string, e *store.WebhookEvent) *Payload {
	p := &Payload{ID: id, Type: typ, Time: e.At.UTC(), Step: e.Step, Attempt: e.Attempt, Error: e.Error}
	if e.RunID == "" {
		p.Step, p.Schedule = "", &ScheduleRef{ID: e.Step, Tick: e.At.UTC()}
	} else {
		p.Run = &RunRef{ID: e.RunID, Workflow: e.Workflow, BusinessID: e.BusinessID, Tags: e.Tags}
	}
	switch typ {
	case StepCompleted, GateDecided:
		p.Event = e.Name
	}
	if typ == GateDecided {
		p.Data = e.Data
	}
	p.Message = message(p)
	return p
}

// message says what a payload reports, in one line.
func message(p *Payload) string {
	run := ""
	if p.Run != nil {
		run = p.Run.ID
		if p.Run.BusinessID != "" {
			run = p.Run.BusinessID
		}
		run = fmt.Sprintf("run %s (%s)", run, p.Run.Workflow)
	}
	switch p.Type {
	case RunStarted:
		return run + " started"
	case RunCompleted:
		return run + " completed"
	case RunFailed:
		return run + " failed: " + p.Error
	case RunCancelled:
		return run + " was cancelled"
	case StepCompleted:
		return fmt.Sprintf("step %s of %s completed (%s)", p.Step, run, p.Event)
	case StepFailed:
		return fmt.Sprintf("step %s of %s failed after %d attempts: %s", p.Step, run, p.Attempt, p.Error)
	case GateOpened:
		return fmt.Sprintf("step %s of %s waits for a decision", p.Step, run)
	case GateDecided:
		return fmt.Sprintf("step %s of %s was decided: %s%s", p.Step, run, p.Event, actorOf(p.Data))
	case ScheduleTickFailed:
		return fmt.Sprintf("schedule %s could not start its run for the tick of %s: %s", p.Schedule.ID, p.Schedule.Tick.Format(time.RFC3339), p.Error)
	case Test:
		return "a test delivery from Hephaestus"
	}
	return p.Type
}

// actorOf returns " by <actor>" when a gate decision names one.
func actorOf(data json.RawMessage) string {
	var d struct {
		Actor string `json:"actor"`
	}
	if json.Unmarshal(data, &d) != nil || d.Actor == "" {
		return ""
	}
	return " by " + d.Actor
}

// body encodes a payload in a webhook's format: the payload itself (json)
// or a Slack message {"text": ...} (slack).
func body(format string, p *Payload) (json.RawMessage, error) {
	if format == FormatSlack {
		return json.Marshal(map[string]string{"text": slackText(p)})
	}
	return json.Marshal(p)
}

// slackText is the Slack message of a payload: what happened, with the
// run and step in code spans.
func slackText(p *Payload) string {
	icon := map[string]string{RunFailed: ":x:", StepFailed: ":x:", ScheduleTickFailed: ":x:", RunCompleted: ":white_check_mark:",
		GateOpened: ":raised_hand:", GateDecided: ":ballot_box_with_check:"}[p.Type]
	text := fmt.Sprintf("*%s* %s", p.Type, p.Message)
	if icon != "" {
		text = icon + " " + text
	}
	if p.Type == GateOpened {
		text += fmt.Sprintf("\nDecide it: `heph approve %s %s` or `heph reject %s %s`", p.Run.ID, p.Step, p.Run.ID, p.Step)
	}
	return text
}

// TestPayload is the body of a test delivery to a webhook.
func TestPayload(format, id string, now time.Time) (json.RawMessage, error) {
	p := &Payload{ID: id, Type: Test, Time: now.UTC()}
	p.Message = message(p)
	return body(format, p)
}
