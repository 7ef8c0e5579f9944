package hephaestus

import (
	"slices"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/notify"
	"github.com/hephaestus-go/hephaestus/store"
)

// The public constants of webhooks are those internal/notify sends.
func TestWebhookConstantsMatchNotify(t *testing.T) {
	pairs := [][2]string{
		{WebhookRunStarted, notify.RunStarted}, {WebhookRunCompleted, notify.RunCompleted}, {WebhookRunFailed, notify.RunFailed},
		{WebhookRunCancelled, notify.RunCancelled}, {WebhookStepCompleted, notify.StepCompleted}, {WebhookStepFailed, notify.StepFailed},
		{WebhookGateOpened, notify.GateOpened}, {WebhookGateDecided, notify.GateDecided}, {WebhookScheduleTickFailed, notify.ScheduleTickFailed},
		{WebhookTest, notify.Test}, {WebhookIDHeader, notify.HeaderID}, {WebhookEventHeader, notify.HeaderEvent},
		{WebhookTimestampHeader, notify.HeaderTimestamp}, {WebhookSignatureHeader, notify.HeaderSignature},
		{WebhookFormatJSON, notify.FormatJSON}, {WebhookFormatSlack, notify.FormatSlack}, {WebhookTest, store.WebhookTestEvent},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("public %q, internal/notify %q", p[0], p[1])
		}
	}
	want := []string{WebhookRunStarted, WebhookRunCompleted, WebhookRunFailed, WebhookRunCancelled, WebhookStepCompleted, WebhookStepFailed,
		WebhookGateOpened, WebhookGateDecided, WebhookScheduleTickFailed}
	if !slices.Equal(WebhookEventTypes(), want) {
		t.Errorf("WebhookEventTypes() = %v, want %v", WebhookEventTypes(), want)
	}
}
