package telemetry_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/internal/telemetry"
)

func TestSubscribeEmitUnsubscribe(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := telemetry.New(fake)
	var a, b []telemetry.Event
	unA := h.Subscribe(func(e telemetry.Event) { a = append(a, e) })
	h.Subscribe(func(e telemetry.Event) { b = append(b, e) })
	h.Emit(telemetry.Event{Kind: telemetry.RunStarted, RunID: "r1"})
	unA()
	h.Emit(telemetry.Event{Kind: telemetry.RunFailed, RunID: "r1", Err: errors.New("boom")})
	if len(a) != 1 || a[0].Kind != telemetry.RunStarted || a[0].RunID != "r1" {
		t.Fatalf("first subscriber got %+v, want only run.started of r1", a)
	}
	if !a[0].Time.Equal(fake.Now()) {
		t.Fatalf("event time %v, want the clock's %v", a[0].Time, fake.Now())
	}
	if len(b) != 2 || b[1].Kind != telemetry.RunFailed || b[1].Err == nil {
		t.Fatalf("second subscriber got %+v, want run.started then run.failed with its error", b)
	}
}

func TestEmitWithoutSubscribers(t *testing.T) {
	h := telemetry.New(nil)
	h.Emit(telemetry.Event{Kind: telemetry.WorkerStarted}) // must not panic
}
