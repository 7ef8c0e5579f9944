package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

// Sign and Verify agree; a changed body, another secret, a stale or
// future timestamp, or a malformed header fail, each saying why.
func TestSignVerify(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	body := []byte(`{"id":"whd_1"}`)
	sig := Sign("whsec_a", now.Unix(), body)
	if !strings.HasPrefix(sig, "v1=") || len(sig) != 3+64 {
		t.Fatalf("signature %q", sig)
	}
	ts := "1900000000"
	if err := Verify("whsec_a", ts, sig, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if err := Verify("whsec_a", ts, "v0=x, "+sig, body, now, time.Minute); err != nil {
		t.Errorf("Verify with several values: %v", err)
	}
	for _, tc := range []struct {
		name, secret, ts, sig string
		body                  []byte
		now                   time.Time
		want                  string
	}{
		{"body", "whsec_a", ts, sig, []byte(`{"id":"whd_2"}`), now, "no signature"},
		{"secret", "whsec_b", ts, sig, body, now, "no signature"},
		{"stale", "whsec_a", ts, sig, body, now.Add(6 * time.Minute), "away from now"},
		{"future", "whsec_a", ts, sig, body, now.Add(-6 * time.Minute), "away from now"},
		{"timestamp", "whsec_a", "soon", sig, body, now, "not Unix seconds"},
	} {
		err := Verify(tc.secret, tc.ts, tc.sig, tc.body, tc.now, 5*time.Minute)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// The delivery id is stable for a (webhook, event) and differs across
// webhooks and events.
func TestDeliveryID(t *testing.T) {
	a, b := DeliveryID("wh1", "r1:4"), DeliveryID("wh1", "r1:4")
	if a != b || !strings.HasPrefix(a, "whd_") || len(a) != 4+32 {
		t.Fatalf("ids %q %q", a, b)
	}
	if DeliveryID("wh2", "r1:4") == a || DeliveryID("wh1", "r1:5") == a {
		t.Error("ids collide")
	}
}

// Filters: enabled, the type listed, one of the workflows, one of the
// tags; an event of no run passes no workflow or tag filter.
func TestMatches(t *testing.T) {
	w := &store.Webhook{Enabled: true, Events: []string{RunFailed}}
	if !Matches(w, RunFailed, "orders", nil) || Matches(w, RunStarted, "orders", nil) {
		t.Error("type filter")
	}
	w.Workflows, w.Tags = []string{"orders"}, []string{"prod", "eu"}
	if !Matches(w, RunFailed, "orders", []string{"eu"}) || Matches(w, RunFailed, "orders", []string{"us"}) ||
		Matches(w, RunFailed, "refunds", []string{"eu"}) || Matches(w, RunFailed, "", nil) {
		t.Error("workflow and tag filters")
	}
	w.Enabled = false
	if Matches(w, RunFailed, "orders", []string{"eu"}) {
		t.Error("a disabled webhook matched")
	}
}

// The backoff doubles from Backoff up to MaxBackoff.
func TestBackoff(t *testing.T) {
	s := New(&Config{Backoff: time.Minute, MaxBackoff: 10 * time.Minute})
	var got []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, s.backoff(n))
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
}

// Payloads: the json body names the run, step, decision and its record;
// the slack body is {"text"} and tells how to decide a gate; a schedule
// event names the schedule instead of a run.
func TestPayloads(t *testing.T) {
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	e := &store.WebhookEvent{RunID: "r1", Seq: 7, Kind: "step_resumed", Step: "approve", Name: "approved", Data: json.RawMessage(`{"actor":"bob"}`),
		At: at, Workflow: "orders", BusinessID: "order::42", Tags: []string{"prod"}}
	p := payloadOf("whd_x", TypeOf(e.Kind), e)
	b, err := body(FormatJSON, p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"whd_x","type":"gate.decided","time":"2031-01-02T03:04:05Z","run":{"id":"r1","workflow":"orders","business_id":"order::42","tags":["prod"]},` +
		`"step":"approve","event":"approved","data":{"actor":"bob"},"message":"step approve of run order::42 (orders) was decided: approved by bob"}`
	if string(b) != want {
		t.Errorf("json body\n%s\nwant\n%s", b, want)
	}
	e.Kind, e.Name, e.Data = "step_waiting", "", nil
	b, _ = body(FormatSlack, payloadOf("whd_y", TypeOf(e.Kind), e))
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 || !strings.Contains(m["text"], "heph approve r1 approve") || !strings.Contains(m["text"], "gate.opened") {
		t.Errorf("slack body %s (%v)", b, err)
	}
	tick := &store.WebhookEvent{Kind: store.EventScheduleTickFailed, Step: "nightly", Error: "no such flow", At: at}
	p = payloadOf("whd_z", TypeOf(tick.Kind), tick)
	if p.Run != nil || p.Step != "" || p.Schedule == nil || p.Schedule.ID != "nightly" || !strings.Contains(p.Message, "no such flow") {
		t.Errorf("tick payload %+v", p)
	}
	if eventKey(tick) == eventKey(e) || TypeOf("step_scheduled") != "" {
		t.Error("keys or types")
	}
}
