package postgres_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/migrate"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// TestWebhookCaptureMigration: a store without an enabled webhook has no
// capture trigger; a schema from before 0022 with an enabled webhook
// keeps capturing once migrated (the migration re-creates the triggers),
// and disabling the last enabled webhook drops them.
func TestWebhookCaptureMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	cfg := &postgres.Config{DSN: dsn, Schema: "hooks"}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	triggers := func() int {
		t.Helper()
		var n int
		if err := connect(t, dsn).QueryRow(ctx, "SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "+
			"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'hooks' "+
			"AND t.tgname IN ('history_webhooks', 'schedule_ticks_webhooks')").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s := open(t, cfg)
	if n := triggers(); n != 0 {
		t.Fatalf("a new store has %d capture triggers, want none", n)
	}
	wh := &store.Webhook{ID: "wh", URL: "https://example.com", Events: []string{"run.started"}, Format: "json", Enabled: true,
		Secret: []byte("s"), CreatedAt: now}
	if err := s.CreateWebhook(ctx, wh); err != nil {
		t.Fatal(err)
	}
	if n := triggers(); n != 2 {
		t.Fatalf("with an enabled webhook: %d capture triggers, want 2", n)
	}
	s.Close()
	err := postgres.WithMigrationLock(ctx, cfg, func(ctx context.Context, conn *sql.Conn) error {
		want := migrationsFrom(t, 22)
		v, err := migrate.Down(ctx, conn, postgres.Migrations(), migrate.Postgres, len(want))
		if err == nil && !slices.Equal(v, want) {
			t.Fatalf("reverted %v, want %v", v, want)
		}
		return err
	})
	if err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	s = open(t, cfg)
	if n := triggers(); n != 2 {
		t.Fatalf("migrated with an enabled webhook: %d capture triggers, want 2", n)
	}
	res, err := s.Apply(ctx, &store.ApplyParams{Now: now, Changes: []store.Change{{Create: &store.NewRun{ID: "r1", Workflow: "wf",
		Kind: hephtype.KindFlow, Status: hephtype.StatusRunning, History: []store.NewEvent{{Kind: hephtype.EventRunStarted}}}}}})
	if err != nil || res.Changes[0].Err != nil {
		t.Fatal(err, res)
	}
	if evs, err := s.WebhookEvents(ctx, 10); err != nil || len(evs) != 1 || evs[0].RunID != "r1" {
		t.Fatalf("captured after the migration: %+v, %v; want r1's start", evs, err)
	}
	off := false
	if _, err := s.UpdateWebhook(ctx, &store.WebhookUpdate{ID: "wh", Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if n := triggers(); n != 0 {
		t.Fatalf("with the webhook disabled: %d capture triggers, want none", n)
	}
}
