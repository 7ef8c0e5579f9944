package wfrt

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hephaestus-go/hephaestus/internal/replay"
)

// newParkedInstance returns an instance whose workflow waits for a signal:
// a live coroutine that Close must end.
func newParkedInstance(t *testing.T, runID string) *replay.Instance {
	t.Helper()
	inst, err := replay.New(&replay.Config{RunID: runID, Workflow: func(u *replay.Unit, _ json.RawMessage) (json.RawMessage, error) {
		return u.WaitSignal("never")
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := inst.Decide(&replay.Activation{Events: []replay.Event{replay.Started("w", nil, 1, start)}, Time: start}); err != nil {
		t.Fatal(err)
	}
	return inst
}

func TestStickyCacheBoundAndEviction(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := newStickyCache(3)
	defer s.close()
	insts := map[string]*replay.Instance{}
	for i := range 5 {
		id := fmt.Sprint("r", i)
		e := s.lock(id)
		e.inst = newParkedInstance(t, id)
		insts[id] = e.inst
		s.unlock(e)
	}
	if n := s.len(); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	// The oldest two were evicted (and closed); the others are cached.
	for i, want := range []bool{true, true, true, false, false} {
		id := fmt.Sprint("r", (i+2)%5)
		e := s.lock(id)
		if got := e.inst != nil; got != want {
			t.Errorf("%s cached: %t, want %t", id, got, want)
		}
		if e.inst != nil && e.inst != insts[id] {
			t.Errorf("%s: another instance", id)
		}
		s.unlock(e)
	}
	if _, err := insts["r0"].Decide(&replay.Activation{Time: time.Now()}); err != replay.ErrClosed {
		t.Errorf("an evicted instance was not closed: %v", err)
	}
	// An entry without an instance holds no slot (looking up r0 made room
	// for it, as a decision would, evicting r2).
	if n := s.len(); n != 2 {
		t.Fatalf("%d entries after looking up evicted runs, want 2", n)
	}
	s.evict("r4")
	s.close()
	if n := s.len(); n != 0 {
		t.Fatalf("%d entries after close", n)
	}
	// A closed cache keeps nothing.
	e := s.lock("late")
	e.inst = newParkedInstance(t, "late")
	s.unlock(e)
	if n := s.len(); n != 0 {
		t.Fatalf("%d entries after close", n)
	}
}

// TestStickyCacheConcurrent hammers a small cache from many goroutines:
// an entry is held by one goroutine at a time, and nothing leaks.
func TestStickyCacheConcurrent(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := newStickyCache(2)
	defer s.close()
	holders := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := fmt.Sprint("r", (g+i)%5)
				e := s.lock(id)
				mu.Lock()
				holders[id]++
				if holders[id] != 1 {
					t.Errorf("%s held by %d goroutines", id, holders[id])
				}
				mu.Unlock()
				if e.inst == nil && i%3 == 0 {
					e.inst = newParkedInstance(t, id)
				}
				if i%7 == 0 {
					e.drop()
				}
				mu.Lock()
				holders[id]--
				mu.Unlock()
				s.unlock(e)
			}
		})
	}
	wg.Wait()
	if n := s.len(); n > 2 {
		t.Fatalf("%d entries, bound 2", n)
	}
	s.close()
}
