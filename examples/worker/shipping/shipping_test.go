package shipping_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/examples/worker/shipping"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

// The README's server section: a process with none of the worker's code
// (as `heph server` is) starts a shipment and inserts an invoice on the
// SQLite file the worker serves; the worker runs them; bad input is
// refused by the published schema, naming the field.
func TestWorkerBesideACodelessProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "heph.db")
	open := func() *sqlite.Store {
		st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	w, err := shipping.NewClient(open(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop(context.Background()) }()

	// The codeless process works no queue: it only starts runs.
	c, err := heph.New(&heph.Config{Store: open(), Queues: map[string]int{"none": 0}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.StartRun(ctx, "shipment", json.RawMessage(`{"order": "o-1", "weight_kg": 30}`), &heph.StartOptions{BusinessValue: "o-1"})
	if err != nil {
		t.Fatalf("start a flow only the worker has: %v", err)
	}
	done, err := c.WaitRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Label shipping.Label `json:"label"`
	}
	if done.Status != heph.StatusCompleted || json.Unmarshal(done.Output, &out) != nil || out.Label.Tracking != "freight-o-1" {
		t.Fatalf("run %s: %s, output %s; want completed with a freight label", done.ID, done.Status, done.Output)
	}

	j, err := c.InsertJobJSON(ctx, "invoice", json.RawMessage(`{"order": "o-1", "amount": 90}`), nil)
	if err != nil {
		t.Fatalf("insert a job kind only the worker has: %v", err)
	}
	if r, err := c.WaitRun(ctx, j.ID); err != nil || r.Status != heph.StatusCompleted {
		t.Fatalf("invoice job: %v, %v; want completed", r, err)
	}

	_, err = c.StartRun(ctx, "shipment", json.RawMessage(`{"order": "o-2", "weight_kg": "heavy"}`), &heph.StartOptions{BusinessValue: "o-2"})
	if !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "/weight_kg") {
		t.Fatalf("bad input: %v; want ErrInvalidInput naming /weight_kg", err)
	}
}
