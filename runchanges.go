package hephaestus

import (
	"context"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/commit"
)

// RunChange is a point in the changes of the runs: a run's last change
// time (Run.UpdatedAt) and its id. The zero RunChange is before every
// change.
type RunChange struct {
	At time.Time
	ID string
}

// ChangeOf returns the point of a run's last change.
func ChangeOf(r *Run) RunChange { return RunChange{At: r.UpdatedAt, ID: r.ID} }

// RunsChangedAfter returns the runs that opts keeps (its filters; its
// Cursor must be empty) whose last change (UpdatedAt, then id) comes after
// after, in the order of their changes, at most opts.Limit (default 100):
// the way to follow the runs list (pass the ChangeOf the last run seen).
// A run that changes again comes again, at its new place. When there are
// none and wait is positive, it waits up to wait (on the client's clock)
// for a change and returns an empty list if none came. A commit of this
// client wakes it at once; a change of another process is seen by a poll
// from Config.MinPollInterval doubling up to Config.PollInterval.
//
// The change time is stamped by the process that commits it before its
// transaction ends; a follower that must not miss a change committed late
// by another process reads again a little before its last point and
// drops what it saw.
func (c *Client) RunsChangedAfter(ctx context.Context, opts *ListOptions, after RunChange, wait time.Duration) ([]*Run, error) {
	if opts == nil {
		opts = &ListOptions{}
	}
	if opts.Kind != "" && opts.Kind != KindFlow && opts.Kind != KindWorkflow {
		return nil, fmt.Errorf("runs changed: %w: ListOptions.Kind %q is not %q or %q", ErrInvalidInput, opts.Kind, KindFlow, KindWorkflow)
	}
	if opts.Cursor != "" {
		return nil, fmt.Errorf("runs changed: %w: ListOptions.Cursor is for pages of the list; follow changes with after", ErrInvalidInput)
	}
	params := c.listParams(opts)
	params.ChangedAfter, params.ChangedAfterID = after.At, after.ID
	if params.ChangedAfter.IsZero() {
		params.ChangedAfter = time.Unix(0, 0) // before every change
	}
	var changed <-chan struct{}
	if wait > 0 {
		ch, stop := c.watches.WatchAll()
		defer stop()
		changed = ch
	}
	var out []*Run
	err := commit.Poll(ctx, &commit.PollParams{
		Clock: c.cfg.Clock, Changed: changed, MinPoll: c.cfg.MinPollInterval, MaxPoll: c.cfg.PollInterval, Wait: wait,
		Read: func() (bool, error) {
			p, err := c.cfg.Store.ListRuns(ctx, params)
			if err != nil {
				return false, err
			}
			due, err := c.scheduled(ctx, p.Runs)
			if err != nil {
				return false, err
			}
			out = make([]*Run, 0, len(p.Runs))
			for _, r := range p.Runs {
				run := c.toRun(r)
				run.ScheduledFor = due[r.ID]
				out = append(out, run)
			}
			return len(out) > 0, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("runs changed: %w", err)
	}
	return out, nil
}

// ChangeBefore returns the point d before now on the client's clock: where
// a follower of the runs list that knows no point starts (d > 0 lets it see
// the changes of the last moments, committed late or just before it
// started).
func (c *Client) ChangeBefore(d time.Duration) RunChange {
	return RunChange{At: c.cfg.Clock.Now().Add(-d)}
}
