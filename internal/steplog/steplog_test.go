package steplog_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hephaestus-go/hephaestus/internal/steplog"
	"github.com/hephaestus-go/hephaestus/store"
)

func TestHandlerStoresRedactsAndPassesOn(t *testing.T) {
	var out bytes.Buffer
	base := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := steplog.NewBuffer(steplog.Attempt{RunID: "r", Step: "s", Index: -1, Attempt: 2, Worker: "w"})
	b.AddSecret("hunter22")
	b.AddSecret("abc") // too short to redact
	log := b.Logger(base)
	log.Debug("not stored")
	log.With("Authorization", "Bearer x").WithGroup("g").Info("login hunter22 abc", "user", "ann", "api_token", 5,
		slog.Group("db", "dsn", "postgres://u:hunter22@h/db"), "err", errors.New("bad hunter22"), "empty", slog.GroupValue())
	recs := b.Drain()
	if len(recs) != 1 {
		t.Fatalf("stored %d records, want 1 (debug is not stored)", len(recs))
	}
	r := recs[0]
	if r.RunID != "r" || r.Step != "s" || r.Index != 0 || r.Attempt != 2 || r.Worker != "w" || r.Level != slog.LevelInfo || r.Time.IsZero() {
		t.Errorf("record = %+v", r)
	}
	if r.Message != "login [redacted] abc" {
		t.Errorf("message = %q", r.Message)
	}
	want := `{"Authorization":"[redacted]","g":{"user":"ann","api_token":"[redacted]","db":{"dsn":"postgres://u:[redacted]@h/db"},"err":"bad [redacted]"}}`
	if string(r.Attrs) != want {
		t.Errorf("attrs = %s\nwant    %s", r.Attrs, want)
	}
	if err := r.Check(); err != nil {
		t.Errorf("stored record invalid: %v", err)
	}
	passed := out.String()
	if strings.Contains(passed, "hunter22") || !strings.Contains(passed, "not stored") || !strings.Contains(passed, `"run":"r"`) {
		t.Errorf("passed on to the process's logger:\n%s", passed)
	}
	if b.Drain() != nil {
		t.Error("a drained buffer is not empty")
	}
}

func TestBufferBound(t *testing.T) {
	b := steplog.NewBuffer(steplog.Attempt{RunID: "r", Step: "s", Attempt: 1})
	log := b.Logger(nil)
	big := strings.Repeat("x", 1000)
	for range 100 {
		log.Info(big)
	}
	recs := b.Drain()
	size := 0
	for _, r := range recs[1:] {
		size += r.Size()
	}
	if recs[0].Dropped != 100-len(recs[1:]) || size > store.MaxLogBytesPerAttempt || len(recs[1:]) != store.MaxLogBytesPerAttempt/1000 {
		t.Fatalf("marker %d, kept %d records of %d bytes", recs[0].Dropped, len(recs)-1, size)
	}
	// A failed write puts them back, with the marker's count.
	b.Requeue(recs)
	log.Info("later")
	again := b.Drain()
	if again[0].Dropped != recs[0].Dropped || len(again) != len(recs)+1 || again[len(again)-1].Message != "later" {
		t.Fatalf("after requeue: marker %d, last %q", again[0].Dropped, again[len(again)-1].Message)
	}
	// A record too large is cut.
	log.Info(strings.Repeat("y", 20000), "a", strings.Repeat("z", 20000))
	r := b.Drain()[0]
	if err := r.Check(); err != nil || !strings.HasSuffix(r.Message, "[truncated]") {
		t.Fatalf("large record: %v, %d bytes", err, r.Size())
	}
}
