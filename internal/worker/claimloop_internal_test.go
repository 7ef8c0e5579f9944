package worker

import (
	"context"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
)

// nextWake wakes the loop after its jittered poll, or at the queue's
// earlier known ready time; a ready time already past is due at once and
// forgotten.
func TestNextWake(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p := New(&Config{Clock: fake, Queues: map[string]int{"q": 1}, MinPollInterval: time.Second, PollInterval: 8 * time.Second})
	l := p.newQueueLoop(&running{claimCtx: context.Background()}, "q", 1)
	l.lookAhead = false // no store to ask
	start := fake.Now()

	inPoll := func(at time.Time) bool {
		return !at.Before(start.Add(800*time.Millisecond)) && !at.After(start.Add(1200*time.Millisecond))
	}
	if at, due := l.nextWake(); due || !inPoll(at) {
		t.Fatalf("nothing ready: nextWake = %v, %v; want within 1s ±20%% of %v, not due", at, due, start)
	}
	p.noteReady("q", start.Add(time.Hour))
	if at, due := l.nextWake(); due || !inPoll(at) {
		t.Fatalf("ready in an hour: nextWake = %v, %v; want the poll, not due", at, due)
	}
	ready := start.Add(100 * time.Millisecond)
	p.noteReady("q", ready)
	if at, due := l.nextWake(); due || !at.Equal(ready) {
		t.Fatalf("ready before the poll: nextWake = %v, %v; want %v, not due", at, due, ready)
	}
	fake.Advance(200 * time.Millisecond)
	if _, due := l.nextWake(); !due {
		t.Fatal("ready time past: nextWake not due")
	}
	if at, ok := p.localReady("q"); ok {
		t.Fatalf("a due ready time stays noted: %v", at)
	}
}
