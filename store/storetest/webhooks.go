package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// RunWebhooks is the conformance suite of store.Webhooks: newStore
// returns a fresh, empty store for each test, which must also be a
// store.Store (the capture of events is tested through Apply).
func RunWebhooks(t *testing.T, newStore func(t *testing.T) store.Admin) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Admin)
	}{
		{"CRUD", testWebhooksCRUD},
		{"Capture", testWebhooksCapture},
		{"Deliveries", testWebhookDeliveries},
		{"Update", testWebhookUpdate},
		{"CaptureFollowsEnabled", testWebhookCaptureFollowsEnabled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

func newWebhook(id string, enabled bool, created time.Time) *store.Webhook {
	return &store.Webhook{ID: id, URL: "https://example.com/hook/" + id, Events: []string{"run.failed", "gate.opened"},
		Workflows: []string{"orders"}, Tags: []string{"prod"}, Format: "json", Enabled: enabled,
		KeyID: "k1", Nonce: []byte{1, 2, 3}, Secret: []byte{0, 0xff, 'x'}, CreatedBy: "alice", CreatedAt: created}
}

// Webhooks: create, refuse a duplicate and invalid input, get and list
// what was given, delete (and refuse to delete what is gone).
func testWebhooksCRUD(t *testing.T, s store.Admin) {
	ctx := t.Context()
	if _, err := s.GetWebhook(ctx, "wh1"); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Fatalf("GetWebhook of none: %v, want ErrWebhookNotFound", err)
	}
	a := newWebhook("wh1", true, at(time.Second))
	if err := s.CreateWebhook(ctx, a); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	b := newWebhook("wh0", false, at(2*time.Second))
	b.KeyID, b.Nonce, b.Workflows, b.Tags = "", nil, nil, nil
	if err := s.CreateWebhook(ctx, b); err != nil {
		t.Fatalf("CreateWebhook wh0: %v", err)
	}
	wantErr(t, "CreateWebhook again", s.CreateWebhook(ctx, newWebhook("wh1", true, at(3*time.Second))), store.ErrWebhookExists)
	bad := newWebhook("wh2", true, at(time.Second))
	bad.Events = nil
	wantErr(t, "CreateWebhook without events", s.CreateWebhook(ctx, bad), hephtype.ErrInvalidInput)
	got, err := s.GetWebhook(ctx, "wh1")
	if err != nil {
		t.Fatalf("GetWebhook: %v", err)
	}
	diff(t, "GetWebhook", a, got)
	list, err := s.ListWebhooks(ctx)
	if err != nil {
		t.Fatalf("ListWebhooks: %v", err)
	}
	if len(list) != 2 || list[1].ID != "wh0" || list[1].Enabled || list[1].KeyID != "" || len(list[1].Nonce) != 0 || len(list[1].Workflows) != 0 {
		t.Fatalf("ListWebhooks = %+v, want wh1 then wh0 (disabled, in clear)", list)
	}
	diff(t, "ListWebhooks[0]", a, list[0])
	if err := s.DeleteWebhook(ctx, "wh1"); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	wantErr(t, "DeleteWebhook again", s.DeleteWebhook(ctx, "wh1"), store.ErrWebhookNotFound)
	wantErr(t, "GetWebhook after delete", func() error { _, err := s.GetWebhook(ctx, "wh1"); return err }(), store.ErrWebhookNotFound)
}

// Capture: the history entries of the kinds webhooks report are captured
// in the commit that appends them, with their run's workflow, business id
// and tags, but only while a webhook is enabled.
func testWebhooksCapture(t *testing.T, s store.Admin) {
	ctx := t.Context()
	st, ok := s.(store.Store)
	if !ok {
		t.Fatalf("%T is no store.Store", s)
	}
	h := &harness{t: t, s: st}
	first := newRun("before")
	first.History = []store.NewEvent{{Kind: hephtype.EventRunStarted}}
	h.create(at(time.Second), first)
	if err := s.CreateWebhook(ctx, newWebhook("off", false, at(time.Second))); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	second := newRun("disabled")
	second.History = []store.NewEvent{{Kind: hephtype.EventRunStarted}}
	h.create(at(time.Second), second)
	if evs, err := s.WebhookEvents(ctx, 10); err != nil || len(evs) != 0 {
		t.Fatalf("WebhookEvents without an enabled webhook = %+v, %v; want none", evs, err)
	}
	if err := s.CreateWebhook(ctx, newWebhook("on", true, at(time.Second))); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	r := newRun("r1")
	r.Tags, r.History = []string{"prod", "eu"}, []store.NewEvent{{Kind: hephtype.EventRunStarted}, {Kind: hephtype.EventStepScheduled, Step: "a"}}
	h.create(at(2*time.Second), r)
	h.mustUpdate(at(3*time.Second), "r1", nil, &store.Update{Status: hephtype.StatusFailed, Error: "boom", History: []store.NewEvent{
		{Kind: hephtype.EventStepStarted, Step: "a", Attempt: 1},
		{Kind: hephtype.EventStepFailed, Step: "a", Attempt: 1, Error: "boom"},
		{Kind: hephtype.EventStepWaiting, Step: "gate", Attempt: 1},
		{Kind: hephtype.EventRunFailed, Error: "boom", Data: raw(`{"x":1}`)},
	}})
	evs, err := s.WebhookEvents(ctx, 10)
	if err != nil {
		t.Fatalf("WebhookEvents: %v", err)
	}
	type ev struct {
		RunID, Kind, Step, Error, Workflow string
		Seq                                int64
		Tags                               []string
	}
	var got []ev
	for i, e := range evs {
		got = append(got, ev{e.RunID, e.Kind, e.Step, e.Error, e.Workflow, e.Seq, e.Tags})
		if i > 0 && e.ID <= evs[i-1].ID {
			t.Errorf("event ids not increasing: %d after %d", e.ID, evs[i-1].ID)
		}
	}
	tags := []string{"prod", "eu"}
	diff(t, "captured events", []ev{
		{"r1", "run_started", "", "", "wf", 1, tags},
		{"r1", "step_failed", "a", "boom", "wf", 4, tags},
		{"r1", "step_waiting", "gate", "", "wf", 5, tags},
		{"r1", "run_failed", "", "boom", "wf", 6, tags},
	}, got)
	if !jsonEqual(evs[3].Data, raw(`{"x":1}`)) || !evs[3].At.Equal(at(3*time.Second)) {
		t.Errorf("run_failed event: data %s at %v", evs[3].Data, evs[3].At)
	}
	if evs, err := s.WebhookEvents(ctx, 2); err != nil || len(evs) != 2 {
		t.Fatalf("WebhookEvents(2) = %d events, %v", len(evs), err)
	}
	// Consumed events are gone; a consumption repeated does no harm.
	consumed := &store.EnqueueDeliveriesParams{Consumed: []int64{evs[0].ID, evs[1].ID}, Now: at(4 * time.Second)}
	for range 2 {
		if err := s.EnqueueWebhookDeliveries(ctx, consumed); err != nil {
			t.Fatalf("EnqueueWebhookDeliveries: %v", err)
		}
	}
	if rest, err := s.WebhookEvents(ctx, 10); err != nil || len(rest) != 2 || rest[0].ID != evs[2].ID {
		t.Fatalf("WebhookEvents after consuming two = %+v, %v", rest, err)
	}
}

func delivery(id, webhook string, next time.Time) *store.WebhookDelivery {
	return &store.WebhookDelivery{ID: id, WebhookID: webhook, Event: "run.failed", RunID: "r1", Body: raw(`{"id":"` + id + `"}`), NextAt: next}
}

func claimDeliveries(t *testing.T, s store.Admin, owner string, now time.Time) []*store.WebhookDelivery {
	t.Helper()
	ds, err := s.ClaimWebhookDeliveries(t.Context(), &store.ClaimDeliveriesParams{Owner: owner, Limit: 10, LeaseFor: time.Minute, Now: now})
	if err != nil {
		t.Fatalf("ClaimWebhookDeliveries: %v", err)
	}
	return ds
}

// Deliveries: enqueued once per id (for a webhook that exists), leased
// to one claimer at a time, each attempt fenced by its lease and logged,
// delivered and dead ones pruned by age, all gone with their webhook.
func testWebhookDeliveries(t *testing.T, s store.Admin) {
	ctx := t.Context()
	if err := s.CreateWebhook(ctx, newWebhook("wh", true, at(0))); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	enq := &store.EnqueueDeliveriesParams{Now: at(time.Second), Deliveries: []*store.WebhookDelivery{
		delivery("d1", "wh", at(time.Second)), delivery("d2", "wh", at(2*time.Second)), delivery("gone", "nowebhook", at(time.Second)),
	}}
	for range 2 {
		if err := s.EnqueueWebhookDeliveries(ctx, enq); err != nil {
			t.Fatalf("EnqueueWebhookDeliveries: %v", err)
		}
	}
	if got := claimDeliveries(t, s, "a", at(0)); len(got) != 0 {
		t.Fatalf("claim before due = %d deliveries", len(got))
	}
	got := claimDeliveries(t, s, "a", at(2*time.Second))
	if len(got) != 2 || got[0].ID != "d1" || got[1].ID != "d2" || got[0].Owner != "a" || got[0].Token != 1 ||
		got[0].Status != store.DeliveryPending || !got[0].LeaseUntil.Equal(at(2*time.Second+time.Minute)) || !jsonEqual(got[0].Body, raw(`{"id":"d1"}`)) {
		t.Fatalf("claim = %+v", got)
	}
	if again := claimDeliveries(t, s, "b", at(3*time.Second)); len(again) != 0 {
		t.Fatalf("claim of leased deliveries = %d", len(again))
	}
	// d1 fails; due again in an hour.
	fail := &store.RecordAttemptParams{ID: "d1", Owner: "a", Token: 1, Status: store.DeliveryPending, Attempt: store.WebhookAttempt{
		Attempt: 1, At: at(3 * time.Second), StatusCode: 503, Error: "503 Service Unavailable", Duration: 250 * time.Millisecond, NextAt: at(time.Hour)}}
	if err := s.RecordWebhookAttempt(ctx, fail); err != nil {
		t.Fatalf("RecordWebhookAttempt: %v", err)
	}
	wantErr(t, "record twice with the same lease", s.RecordWebhookAttempt(ctx, fail), store.ErrLeaseLost)
	// d2's lease expires; b takes it over; a's late record is refused.
	got = claimDeliveries(t, s, "b", at(2*time.Second+time.Minute))
	if len(got) != 1 || got[0].ID != "d2" || got[0].Token != 2 {
		t.Fatalf("claim after the lease ended = %+v", got)
	}
	ok := &store.RecordAttemptParams{ID: "d2", Owner: "a", Token: 1, Status: store.DeliveryDelivered, Attempt: store.WebhookAttempt{Attempt: 1, At: at(time.Hour), StatusCode: 200}}
	wantErr(t, "record with a lost lease", s.RecordWebhookAttempt(ctx, ok), store.ErrLeaseLost)
	ok.Owner, ok.Token = "b", 2
	if err := s.RecordWebhookAttempt(ctx, ok); err != nil {
		t.Fatalf("RecordWebhookAttempt: %v", err)
	}
	ok.ID = "none"
	wantErr(t, "record of no delivery", s.RecordWebhookAttempt(ctx, ok), store.ErrWebhookNotFound)
	got = claimDeliveries(t, s, "c", at(time.Hour))
	if len(got) != 1 || got[0].ID != "d1" || got[0].Attempts != 1 || got[0].LastStatus != 503 {
		t.Fatalf("claim of the retry = %+v", got)
	}
	list, err := s.ListWebhookDeliveries(ctx, &store.ListDeliveriesParams{WebhookID: "wh"})
	if err != nil {
		t.Fatalf("ListWebhookDeliveries: %v", err)
	}
	if len(list) != 2 {
		t.Fatalf("ListWebhookDeliveries = %d deliveries, want 2", len(list))
	}
	byID := map[string]*store.WebhookDelivery{list[0].ID: list[0], list[1].ID: list[1]}
	diff(t, "d1's log", []store.WebhookAttempt{fail.Attempt}, byID["d1"].Log)
	if d := byID["d2"]; d.Status != store.DeliveryDelivered || d.Attempts != 1 || len(d.Log) != 1 || d.Log[0].StatusCode != 200 {
		t.Errorf("d2 = %+v", d)
	}
	if done, err := s.ListWebhookDeliveries(ctx, &store.ListDeliveriesParams{WebhookID: "wh", Status: store.DeliveryDelivered}); err != nil || len(done) != 1 {
		t.Errorf("delivered deliveries = %d, %v; want 1", len(done), err)
	}
	if n, err := s.PruneWebhookDeliveries(ctx, &store.PruneDeliveriesParams{Before: at(2 * time.Hour)}); err != nil || n != 1 {
		t.Fatalf("PruneWebhookDeliveries = %d, %v; want 1 (the delivered one)", n, err)
	}
	if err := s.DeleteWebhook(ctx, "wh"); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	if list, err := s.ListWebhookDeliveries(ctx, &store.ListDeliveriesParams{WebhookID: "wh"}); err != nil || len(list) != 0 {
		t.Fatalf("deliveries after the webhook's deletion = %d, %v", len(list), err)
	}
}

// Update: each field changes alone (nil ones keep theirs), the secret is
// replaced with its key id and nonce, a missing webhook and invalid
// input are refused; the deliveries of a disabled webhook wait until it
// is enabled again, except test deliveries.
func testWebhookUpdate(t *testing.T, s store.Admin) {
	ctx := t.Context()
	if err := s.CreateWebhook(ctx, newWebhook("wh", true, at(0))); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	url, format, off, none := "https://example.org/new", "slack", false, []string{}
	events := []string{"run.started"}
	got, err := s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "wh", URL: &url, Events: &events, Workflows: &none, Format: &format})
	if err != nil {
		t.Fatalf("UpdateWebhook: %v", err)
	}
	want := newWebhook("wh", true, at(0))
	want.URL, want.Events, want.Workflows, want.Format = url, events, nil, format
	diff(t, "UpdateWebhook", want, got)
	secret := &store.WebhookSecret{KeyID: "k2", Nonce: []byte{9, 8}, Secret: []byte("new secret")}
	if got, err = s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "wh", Secret: secret}); err != nil {
		t.Fatalf("UpdateWebhook secret: %v", err)
	}
	want.KeyID, want.Nonce, want.Secret = secret.KeyID, secret.Nonce, secret.Secret
	diff(t, "UpdateWebhook secret", want, got)
	if stored, err := s.GetWebhook(ctx, "wh"); err != nil {
		t.Fatalf("GetWebhook: %v", err)
	} else {
		diff(t, "GetWebhook after updates", want, stored)
	}
	clearSecret := &store.WebhookSecret{Secret: []byte("in clear")}
	if got, err := s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "wh", Secret: clearSecret}); err != nil ||
		got.KeyID != "" || len(got.Nonce) != 0 || string(got.Secret) != "in clear" || got.URL != url {
		t.Fatalf("UpdateWebhook to a secret in clear = %+v, %v", got, err)
	}
	_, err = s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "none", Enabled: &off})
	wantErr(t, "UpdateWebhook of none", err, store.ErrWebhookNotFound)
	_, err = s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "wh", Events: &none})
	wantErr(t, "UpdateWebhook without events", err, hephtype.ErrInvalidInput)

	test := delivery("t1", "wh", at(time.Second))
	test.Event = store.WebhookTestEvent
	enq := &store.EnqueueDeliveriesParams{Now: at(time.Second), Deliveries: []*store.WebhookDelivery{delivery("d1", "wh", at(time.Second)), test}}
	if err := s.EnqueueWebhookDeliveries(ctx, enq); err != nil {
		t.Fatalf("EnqueueWebhookDeliveries: %v", err)
	}
	if got, err = s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "wh", Enabled: &off}); err != nil || got.Enabled {
		t.Fatalf("UpdateWebhook disable = %+v, %v", got, err)
	}
	if ds := claimDeliveries(t, s, "a", at(2*time.Second)); len(ds) != 1 || ds[0].ID != "t1" {
		t.Fatalf("claim while disabled = %+v, want only the test delivery", ds)
	}
	on := true
	if _, err := s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "wh", Enabled: &on}); err != nil {
		t.Fatalf("UpdateWebhook enable: %v", err)
	}
	if ds := claimDeliveries(t, s, "a", at(2*time.Second)); len(ds) != 1 || ds[0].ID != "d1" {
		t.Fatalf("claim once enabled = %+v, want d1", ds)
	}
}

// CaptureFollowsEnabled: events are captured exactly while at least one
// webhook is enabled, through creates, enables, disables and deletes of
// two webhooks interleaved.
func testWebhookCaptureFollowsEnabled(t *testing.T, s store.Admin) {
	ctx := t.Context()
	st, ok := s.(store.Store)
	if !ok {
		t.Fatalf("%T is no store.Store", s)
	}
	h := &harness{t: t, s: st}
	n := 0
	var want []string
	// run starts a run; captured says whether its run_started must be.
	run := func(captured bool) {
		t.Helper()
		n++
		r := newRun(fmt.Sprintf("r%d", n))
		r.History = []store.NewEvent{{Kind: hephtype.EventRunStarted}}
		h.create(at(time.Duration(n)*time.Second), r)
		if captured {
			want = append(want, r.ID)
		}
	}
	set := func(id string, enabled bool) {
		t.Helper()
		if _, err := s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: id, Enabled: &enabled}); err != nil {
			t.Fatalf("UpdateWebhook %s enabled=%v: %v", id, enabled, err)
		}
	}
	run(false)
	if err := s.CreateWebhook(ctx, newWebhook("a", true, at(0))); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	run(true) // captured after create
	set("a", false)
	run(false) // nothing while all are disabled
	set("a", false)
	run(false) // disabling again changes nothing
	set("a", true)
	run(true) // resumes after enable
	if err := s.CreateWebhook(ctx, newWebhook("b", true, at(0))); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	set("a", false)
	run(true) // b is still enabled
	set("a", true)
	set("b", false)
	run(true) // a is
	set("a", false)
	run(false) // neither is
	set("b", true)
	set("a", true)
	if err := s.DeleteWebhook(ctx, "a"); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	run(true) // b is
	if err := s.DeleteWebhook(ctx, "b"); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	run(false) // delete of the last one stops capture
	if err := s.CreateWebhook(ctx, newWebhook("c", false, at(0))); err != nil {
		t.Fatalf("CreateWebhook: %v", err)
	}
	run(false) // created disabled
	evs, err := s.WebhookEvents(ctx, 100)
	if err != nil {
		t.Fatalf("WebhookEvents: %v", err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.RunID)
	}
	diff(t, "runs whose start was captured", want, got)
}
