package commit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/clock"
)

// Watches tells the callers that follow a run (HistoryAfter) that a
// commit of this process changed it. The zero value is ready.
type Watches struct {
	mu sync.Mutex
	m  map[string][]chan struct{}
	// all are the watches of every run (WatchAll).
	all []chan struct{}
}

// WatchAll returns a channel that receives when a commit of this process
// changes (or creates) any run, and the function that ends the watch.
func (w *Watches) WatchAll() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.all = append(w.all, ch)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if i := slices.Index(w.all, ch); i >= 0 {
			w.all = slices.Delete(w.all, i, i+1)
		}
	}
}

// Watch returns a channel that receives when the run changes, and the
// function that ends the watch.
func (w *Watches) Watch(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string][]chan struct{}{}
	}
	w.m[runID] = append(w.m[runID], ch)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		chs := w.m[runID]
		for i, c := range chs {
			if c == ch {
				chs = append(chs[:i], chs[i+1:]...)
				break
			}
		}
		if len(chs) == 0 {
			delete(w.m, runID)
		} else {
			w.m[runID] = chs
		}
	}
}

// Committed wakes the watches of the runs a batch changed.
func (w *Watches) Committed(batch []*Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.m) == 0 && len(w.all) == 0 {
		return
	}
	for _, r := range batch {
		if r.Err != nil || r.Res.Run == nil {
			continue
		}
		for _, ch := range w.all {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		for _, ch := range w.m[r.Res.Run.ID] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// PollParams are the parameters of Poll.
type PollParams struct {
	Clock clock.Clock
	// Changed receives when a commit of this process may have made Read
	// done (Watches.Watch); nil: polls only.
	Changed <-chan struct{}
	// MinPoll is the first poll interval, doubled up to MaxPoll, for the
	// changes of other processes.
	MinPoll, MaxPoll time.Duration
	// Wait bounds the wait; at its end Read is called once more.
	Wait time.Duration
	// Read reads and reports whether the wait is over.
	Read func() (done bool, err error)
}

// Poll calls p.Read until it reports done or fails: at once, then when
// p.Changed receives or a poll interval passes, until p.Wait has passed
// (a last read) or ctx ends (ctx's error).
func Poll(ctx context.Context, p *PollParams) error {
	if p == nil || p.Read == nil || p.Clock == nil {
		return errors.New("commit: Poll needs a Clock and a Read")
	}
	done, err := p.Read()
	if err != nil || done || p.Wait <= 0 {
		return err
	}
	deadline := p.Clock.After(p.Wait)
	poll := p.MinPoll
	for {
		select {
		case <-p.Changed:
		case <-p.Clock.After(poll):
			poll = min(poll*2, p.MaxPoll)
		case <-deadline:
			_, err := p.Read()
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
		if done, err = p.Read(); err != nil || done {
			return err
		}
	}
}
