package cli

import (
	"strings"
	"testing"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// heph show prints a "Waiting for:" block, one line per wait (the
// signals and updates a workflow accepts on one line each), after the
// run's fields; a run that waits for nothing has no block.
func TestShowWaitingFor(t *testing.T) {
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	r := &apiclient.Run{ID: "r1", Kind: "workflow", Workflow: "onboarding", Version: 1, Status: "waiting", CreatedAt: now, UpdatedAt: now,
		WaitingFor: []apiclient.Wait{
			{Kind: "signal", Name: "activate"},
			{Kind: "signal", Name: "cancel"},
			{Kind: "update", Name: "rename"},
			{Kind: "timer", Due: at(3 * time.Hour)},
			{Kind: "gate", Step: "manager_ok", Users: []string{"ann"}, Groups: []string{"finance"}, Due: at(48 * time.Hour)},
			{Kind: "step", Step: "hold", Events: []string{"paid", "lost"}},
			{Kind: "child", Name: "kyc", RunID: "c1"},
			{Kind: "queue_paused", Step: "send", Queue: "emails"},
			{Kind: "queue_limit", Step: "send", Queue: "emails", Limit: 2},
			{Kind: "concurrency_key", Name: "acme", Step: "send", Queue: "emails", Limit: 1},
			{Kind: "rate_limit", Step: "send", Queue: "emails", Limit: 10, Due: at(time.Minute)},
			{Kind: "no_worker", Name: `activity "charge"`, Step: "charge", Queue: "default"},
			{Kind: "scheduled", Step: "remind", Queue: "default", Due: at(24 * time.Hour)},
		}}
	var b strings.Builder
	if err := printRun(&b, r, nil, now); err != nil {
		t.Fatal(err)
	}
	want := `
Waiting for:
  signal, any of: activate, cancel
  update rename
  timer until 2026-11-27T10:00:00Z (in 3h)
  approval "manager_ok" by ann, group finance, deadline 2026-11-29T07:00:00Z (in 2d) (heph approve r1 manager_ok)
  step "hold" to be resumed with paid or lost (heph resume r1 paid --step hold)
  child run c1 (workflow kyc)
  queue "emails" is paused (step send)
  queue "emails" is full: at most 2 running (step send)
  concurrency key "acme" on queue "emails": at most 1 running (step send)
  queue "emails" rate limit of 10 reached, next window 2026-11-27T07:01:00Z (in 1m) (step send)
  no live worker for activity "charge" on queue default (step charge)
  step remind due 2026-11-28T07:00:00Z (in 24h) on queue default
`
	if !strings.Contains(b.String(), want) {
		t.Errorf("show printed:\n%s\nwant the block:%s", b.String(), want)
	}

	one := &apiclient.Run{ID: "r2", Status: "waiting", WaitingFor: []apiclient.Wait{{Kind: "signal", Name: "activate"}}}
	b.Reset()
	if err := printRun(&b, one, nil, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Waiting for:\n  signal activate (heph signal r2 activate)\n") {
		t.Errorf("one signal:\n%s", b.String())
	}
	b.Reset()
	if err := printRun(&b, &apiclient.Run{ID: "r3", Status: "completed"}, nil, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Waiting for") {
		t.Errorf("a run that waits for nothing:\n%s", b.String())
	}
}
