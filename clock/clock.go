// Package clock is the one source of time for the Hephaestus runtime.
//
// Production code uses Real; tests use a Fake and move time explicitly, so
// that timers, backoffs and leases are tested without sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and waits for it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the time once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Until returns a channel that receives the time once the clock reaches
// t: at once when t has passed. Prefer it to After(t.Sub(c.Now())) when
// the deadline is a point in time: a Fake clock then fires it on the
// Advance that reaches t, even one that comes between reading the time and
// registering the wait (which After, relative to the time it registers
// at, would push one step later).
func Until(c Clock, t time.Time) <-chan time.Time {
	if u, ok := c.(interface {
		Until(time.Time) <-chan time.Time
	}); ok {
		return u.Until(t)
	}
	return c.After(t.Sub(c.Now()))
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a clock that moves only when told to. The zero value starts at
// the zero time; use NewFake for a realistic start.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives once the clock has been advanced
// by at least d.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	return ch
}

// Until returns a channel that receives once the clock reaches t.
func (f *Fake) Until(t time.Time) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(f.now) {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: t, ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires every wait that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	keep := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
		} else {
			keep = append(keep, w)
		}
	}
	f.waiters = keep
}

// Waiters returns the number of pending waits: tests use it to know that
// a goroutine has gone to sleep before they advance the clock.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}
