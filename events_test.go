package hephaestus_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
)

// SendEvent: stored once per id (a re-send returns the first, marked
// duplicate), listed newest first, bad input refused with the field
// named, the payload bound by MaxPayloadSize, and PruneEvents deleting
// only what Config.EventRetention no longer keeps.
func TestEvents(t *testing.T) {
	clk := clock.NewFake(time.Date(2032, 3, 1, 0, 0, 0, 0, time.UTC))
	c := docClient(t, filepath.Join(t.TempDir(), "events.db"), clk)
	ctx := t.Context()

	first, err := c.SendEvent(ctx, "order.paid", map[string]any{"order": 1}, &heph.SendEventOptions{ID: "pay-1"})
	if err != nil || first.Duplicate || first.ID != "pay-1" || !first.At.Equal(clk.Now()) {
		t.Fatalf("send: %+v, %v", first, err)
	}
	again, err := c.SendEvent(ctx, "other", json.RawMessage(`2`), &heph.SendEventOptions{ID: "pay-1"})
	if err != nil || !again.Duplicate || again.Seq != first.Seq || again.Name != "order.paid" || string(again.Data) != `{"order":1}` {
		t.Fatalf("re-send: %+v, %v", again, err)
	}
	clk.Advance(40 * 24 * time.Hour)
	fresh, err := c.SendEvent(ctx, "order.paid", nil, nil)
	if err != nil || len(fresh.ID) != 36 || fresh.Seq <= first.Seq || fresh.Data != nil {
		t.Fatalf("send without id or data: %+v, %v", fresh, err)
	}
	es, err := c.ListEvents(ctx, nil)
	if err != nil || len(es) != 2 || es[0].ID != fresh.ID || es[1].ID != "pay-1" {
		t.Fatalf("list: %+v, %v", es, err)
	}

	for _, tc := range []struct {
		name string
		data any
		opts *heph.SendEventOptions
		want string
	}{
		{"", nil, nil, "event name must be 1 to 200 bytes"},
		{strings.Repeat("n", 201), nil, nil, "(it is 201)"},
		{"x", nil, &heph.SendEventOptions{ID: strings.Repeat("i", 201)}, "event id must be"},
		{"x", json.RawMessage(`{"a":`), nil, "not valid JSON"},
		{"x", make(chan int), nil, "data"},
		{"x", strings.Repeat("d", 2<<20), nil, "over the limit"},
	} {
		if _, err := c.SendEvent(ctx, tc.name, tc.data, tc.opts); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("send %.20q: %v, want ErrInvalidInput naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := c.ListEvents(ctx, &heph.ListEventsOptions{Field: "a", Value: json.RawMessage(`[1]`)}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("a list filter with an array value: %v", err)
	}
	if _, err := c.GetEvent(ctx, "none"); !errors.Is(err, heph.ErrEventNotFound) {
		t.Errorf("get a missing event: %v", err)
	}

	// pay-1 is 40 days old, past the default retention of 30 days.
	n, err := c.PruneEvents(ctx)
	if err != nil || n != 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	if _, err := c.GetEvent(ctx, "pay-1"); !errors.Is(err, heph.ErrEventNotFound) {
		t.Errorf("pay-1 after the prune: %v", err)
	}
	if _, err := c.GetEvent(ctx, fresh.ID); err != nil {
		t.Errorf("the fresh event after the prune: %v", err)
	}
}
