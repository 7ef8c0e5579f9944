package hephaestus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/store"
)

// HistoryAfter returns the entries of a run's history whose sequence
// number is above after, in order: the way to follow a run (pass the Seq
// of the last entry seen). When there are none and wait is positive, it
// waits up to wait (on the client's clock) for the next one, and returns
// an empty list if none came. A change that this client commits wakes it
// at once; a change of another process is seen by a poll that starts at
// Config.MinPollInterval and doubles up to Config.PollInterval. It fails
// with ErrRunNotFound for a run that does not exist (or was deleted while
// it waited), and with ctx's error when ctx ends first.
func (c *Client) HistoryAfter(ctx context.Context, runID string, after int64, wait time.Duration) ([]HistoryEvent, error) {
	var changed <-chan struct{}
	if wait > 0 {
		ch, stop := c.watches.watch(runID)
		defer stop()
		changed = ch
	}
	read := func() ([]HistoryEvent, error) {
		h, err := c.cfg.Store.History(ctx, &store.HistoryParams{RunID: runID, AfterSeq: after})
		if err != nil {
			return nil, fmt.Errorf("history of run %s: %w", runID, err)
		}
		if h == nil {
			h = []HistoryEvent{}
		}
		return h, nil
	}
	h, err := read()
	if err != nil || len(h) > 0 || wait <= 0 {
		return h, err
	}
	deadline := c.cfg.Clock.After(wait)
	poll := c.cfg.MinPollInterval
	for {
		select {
		case <-changed:
		case <-c.cfg.Clock.After(poll):
			poll = min(poll*2, c.cfg.PollInterval)
		case <-deadline:
			return read()
		case <-ctx.Done():
			return nil, fmt.Errorf("history of run %s: %w", runID, ctx.Err())
		}
		if h, err = read(); err != nil || len(h) > 0 {
			return h, err
		}
	}
}

// runWatches tells the callers of HistoryAfter that a commit of this
// client changed their run.
type runWatches struct {
	mu sync.Mutex
	m  map[string][]chan struct{}
}

// watch returns a channel that receives when the run changes, and the
// function that ends the watch.
func (w *runWatches) watch(runID string) (<-chan struct{}, func()) {
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

// committed wakes the watches of the runs a batch changed.
func (w *runWatches) committed(batch []*commit.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.m) == 0 {
		return
	}
	for _, r := range batch {
		if r.Err != nil || r.Res.Run == nil {
			continue
		}
		for _, ch := range w.m[r.Res.Run.ID] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}
