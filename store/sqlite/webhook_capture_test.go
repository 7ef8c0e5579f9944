package sqlite

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/store"
)

// captureTriggerCount counts the webhook capture triggers in the schema.
func captureTriggerCount(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.reader.QueryRowContext(t.Context(), "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "+
		"AND name IN ('events_webhooks', 'schedule_ticks_webhooks', 'schedule_ticks_webhooks_update')").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWebhookCaptureMigration: a store without an enabled webhook has no
// capture trigger (its history inserts do no webhook work); a database
// from before 0020 with an enabled webhook keeps capturing once
// migrated (the triggers are re-created on open), and one whose webhooks
// are all disabled loses the triggers.
func TestWebhookCaptureMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "h.db")
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Open(t.Context(), &Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if n := captureTriggerCount(t, s); n != 0 {
		t.Fatalf("a new store has %d capture triggers, want none", n)
	}
	wh := &store.Webhook{ID: "wh", URL: "https://example.com", Events: []string{"run.started"}, Format: "json", Enabled: true,
		Secret: []byte("s"), CreatedAt: now}
	if err := s.CreateWebhook(t.Context(), wh); err != nil {
		t.Fatal(err)
	}
	if n := captureTriggerCount(t, s); n != 3 {
		t.Fatalf("with an enabled webhook: %d capture triggers, want 3", n)
	}
	want := migrationsFrom(t, 20)
	if got := must(migrate.Down(t.Context(), s.writer, Migrations(), migrate.SQLite, len(want)))(t); !slices.Equal(got, want) {
		t.Fatalf("migrate down: reverted %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, &Config{Path: path})
	if n := captureTriggerCount(t, s); n != 3 {
		t.Fatalf("migrated with an enabled webhook: %d capture triggers, want 3", n)
	}
	res, err := s.Apply(t.Context(), &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{ID: "r1", Workflow: "wf",
		Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, History: []store.NewEvent{{Kind: hephtype.EventRunStarted}}}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatal(err, res)
	}
	if evs, err := s.WebhookEvents(t.Context(), 10); err != nil || len(evs) != 1 || evs[0].RunID != "r1" {
		t.Fatalf("captured after the migration: %+v, %v; want r1's start", evs, err)
	}
	off := false
	if _, err := s.UpdateWebhook(t.Context(), &store.WebhookUpdate{ID: "wh", Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if n := captureTriggerCount(t, s); n != 0 {
		t.Fatalf("with the webhook disabled: %d capture triggers, want none", n)
	}
}
