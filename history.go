package hephaestus

import (
	"context"
	"fmt"
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
		ch, stop := c.watches.Watch(runID)
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
	var h []HistoryEvent
	err := commit.Poll(ctx, &commit.PollParams{
		Clock: c.cfg.Clock, Changed: changed, MinPoll: c.cfg.MinPollInterval, MaxPoll: c.cfg.PollInterval, Wait: wait,
		Read: func() (done bool, err error) {
			h, err = read()
			return len(h) > 0, err
		},
	})
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("history of run %s: %w", runID, err)
	}
	return h, err
}
