package clock_test

import (
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
)

func TestFakeUntil(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	f := clock.NewFake(start)
	due := start.Add(time.Second)
	// The deadline is read, the clock moves, then the wait registers: it
	// still fires at the deadline, not a second later.
	now := f.Now()
	f.Advance(500 * time.Millisecond)
	after := f.After(due.Sub(now)) // relative: due at start+1.5s
	until := clock.Until(f, due)   // absolute: due at start+1s
	f.Advance(500 * time.Millisecond)
	select {
	case <-until:
	default:
		t.Fatal("Until did not fire when the clock reached its time")
	}
	select {
	case <-after:
		t.Fatal("After fired early")
	default:
	}
	// A time that has passed fires at once.
	select {
	case <-clock.Until(f, start):
	default:
		t.Fatal("Until of a past time did not fire at once")
	}
	// The real clock waits for the time.
	select {
	case <-clock.Until(clock.Real{}, time.Now().Add(-time.Second)):
	case <-time.After(10 * time.Second):
		t.Fatal("Until of a past time on the real clock did not fire")
	}
}
