package hephaestus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/internal/commit"
	"github.com/hephaestus-go/hephaestus/store"
)

// Bounds of step logs, the same on every backend: beyond them the oldest
// records go, and a marker record (LogRecord.Dropped) says how many of
// an attempt's records were dropped.
const (
	// MaxLogBytesPerAttempt bounds the log of one attempt (message and
	// attributes of its records).
	MaxLogBytesPerAttempt = store.MaxLogBytesPerAttempt
	// MaxLogBytesPerRun bounds the log of a run, all attempts together.
	MaxLogBytesPerRun = store.MaxLogBytesPerRun
)

// LogRecord is one record of a step's log: what step code (flow.Logger),
// activity code (workflow.ActivityLogger), a document's action or a
// remote worker logged in one attempt.
type LogRecord struct {
	// Seq orders the records of a run: pass the last one seen as
	// LogsOptions.After to read on.
	Seq int64 `json:"seq"`
	// Step is the step or activity; Index the map element (0 for a step)
	// or the activity's sequence number; Attempt counts from 1.
	Step    string `json:"step"`
	Index   int    `json:"index"`
	Attempt int    `json:"attempt"`
	// Worker is who ran the attempt.
	Worker string    `json:"worker,omitempty"`
	Time   time.Time `json:"time"`
	// Level is slog's name of the level: DEBUG, INFO, WARN, ERROR.
	Level   string          `json:"level"`
	Message string          `json:"message"`
	Attrs   json.RawMessage `json:"attrs,omitempty"`
	// Dropped, when positive, makes the record a marker: that many
	// earlier records of the attempt were dropped for the bounds.
	Dropped int `json:"dropped,omitempty"`
}

// LogsOptions filter RunLogs. Zero fields do not filter.
type LogsOptions struct {
	Step string
	// Index keeps one map element (or activity sequence number).
	Index *int
	// Attempt keeps one attempt.
	Attempt int
	// Level keeps records at this level and above (DEBUG, INFO, WARN,
	// ERROR, in any case); markers always.
	Level string
	// After keeps the records after this Seq (a cursor).
	After int64
	// Limit bounds the records returned: 1000 by default and at most.
	Limit int
	// Wait, when positive and no record matches, waits up to Wait (on the
	// client's clock) for one, or for the run to end, polling as
	// HistoryAfter does.
	Wait time.Duration
}

// LogPage is a page of a run's log.
type LogPage struct {
	Records []LogRecord `json:"records"`
	// Next is the cursor to read on from (LogsOptions.After): the Seq of
	// the last record, or the After given when there was none.
	Next int64 `json:"next"`
}

// ParseLogLevel reads a level name (DEBUG, INFO, WARN, ERROR, any case).
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("level %q is not one of DEBUG, INFO, WARN and ERROR", s)
	}
	return l, nil
}

// RunLogs returns the records of a run's step logs in order, filtered:
// what its steps, activities and actions logged, per attempt. It fails
// with ErrRunNotFound for a run that does not exist (or was pruned, with
// its logs), and with an error that wraps ErrInvalidInput for a bad
// option.
func (c *Client) RunLogs(ctx context.Context, runID string, opts LogsOptions) (*LogPage, error) {
	p := &store.LogsParams{RunID: runID, Step: opts.Step, Index: opts.Index, Attempt: opts.Attempt, After: opts.After, Limit: opts.Limit}
	if opts.Level != "" {
		l, err := ParseLogLevel(opts.Level)
		if err != nil {
			return nil, fmt.Errorf("logs of run %s: %w: %w", runID, ErrInvalidInput, err)
		}
		p.MinLevel = &l
	}
	if opts.Limit < 0 || opts.Limit > store.MaxLogsPage || opts.Attempt < 0 {
		return nil, fmt.Errorf("logs of run %s: %w: limit must be between 0 and %d and attempt not negative", runID, ErrInvalidInput, store.MaxLogsPage)
	}
	var recs []store.LogRecord
	read := func() (bool, error) {
		var err error
		recs, err = c.cfg.Store.Logs(ctx, p)
		if err != nil {
			return false, fmt.Errorf("logs of run %s: %w", runID, err)
		}
		if len(recs) > 0 || opts.Wait <= 0 {
			return true, nil
		}
		// A run that ended logs no more: the wait is over.
		run, err := c.cfg.Store.GetRun(ctx, runID)
		if err != nil {
			return false, fmt.Errorf("logs of run %s: %w", runID, err)
		}
		return run.Status.Terminal(), nil
	}
	var err error
	if opts.Wait > 0 {
		changed, stop := c.watches.Watch(runID)
		defer stop()
		err = commit.Poll(ctx, &commit.PollParams{Clock: c.cfg.Clock, Changed: changed, MinPoll: c.cfg.MinPollInterval, MaxPoll: c.cfg.PollInterval, Wait: opts.Wait, Read: read})
	} else {
		_, err = read()
	}
	if err != nil {
		return nil, err
	}
	page := &LogPage{Records: make([]LogRecord, len(recs)), Next: opts.After}
	for i, r := range recs {
		page.Records[i] = LogRecord{Seq: r.Seq, Step: r.Step, Index: r.Index, Attempt: r.Attempt, Worker: r.Worker,
			Time: r.Time, Level: r.Level.String(), Message: r.Message, Attrs: r.Attrs, Dropped: r.Dropped}
		page.Next = r.Seq
	}
	return page, nil
}
