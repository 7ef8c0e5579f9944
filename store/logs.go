package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"
)

// Limits of step logs, the same on every backend.
const (
	// MaxLogBytesPerAttempt bounds the log of one attempt (of a step, a
	// map element or an activity): the sum of LogRecord.Size of its
	// records. Beyond it the oldest records of the attempt are dropped.
	MaxLogBytesPerAttempt = 64 << 10
	// MaxLogBytesPerRun bounds the log of a run, all attempts together;
	// beyond it the oldest records of the run are dropped.
	MaxLogBytesPerRun = 1 << 20
	// MaxLogRecordBytes bounds one record (message and attributes);
	// AppendLogs refuses a larger one (the runtime truncates first).
	MaxLogRecordBytes = 16 << 10
	// MaxLogsPerAppend bounds the records of one AppendLogs call.
	MaxLogsPerAppend = 1000
	// MaxLogsPage bounds LogsParams.Limit (and is its default).
	MaxLogsPage = 1000
)

// StepLogs keeps what step code logs (migrations step_logs): records per
// attempt, bounded per attempt and per run. When a bound is exceeded, the
// oldest records go and the newest of those dropped becomes a marker
// (LogRecord.Dropped) that says how many of the attempt's records were
// dropped in all, in the place of those it stands for. PruneRuns and
// DeleteRun delete a run's records with it.
type StepLogs interface {
	// AppendLogs stores records, each after those of its run stored
	// before (Seq is assigned per run, in order), then applies the bounds
	// to the runs and attempts it wrote. Records of a run that does not
	// exist are ignored. Invalid records (Check) fail the call, which
	// then writes nothing; the error wraps hephtype.ErrInvalidInput.
	AppendLogs(ctx context.Context, p *AppendLogsParams) error
	// Logs returns a run's records in Seq order, filtered, or
	// ErrRunNotFound.
	Logs(ctx context.Context, p *LogsParams) ([]LogRecord, error)
}

// LogRecord is one record of a step's log.
type LogRecord struct {
	RunID string
	// Seq orders the records of a run (assigned by AppendLogs; a cursor
	// for LogsParams.After).
	Seq int64
	// Step is the step or activity name; Index the map element (0 for a
	// step, the sequence number for an activity); Attempt from 1.
	Step    string
	Index   int
	Attempt int
	// Worker is the process (or remote worker) that ran the attempt.
	Worker  string
	Time    time.Time
	Level   slog.Level
	Message string
	// Attrs is a JSON object (nil: none).
	Attrs json.RawMessage
	// Dropped, when positive, makes the record a marker: that many
	// earlier records of the attempt were dropped for the bounds.
	Dropped int
}

// Size is what a record counts against the bounds: its message and
// attributes. A marker counts nothing.
func (r *LogRecord) Size() int {
	if r.Dropped > 0 {
		return 0
	}
	return len(r.Message) + len(r.Attrs)
}

// Check reports what makes a record unfit to store.
func (r *LogRecord) Check() error {
	switch {
	case r.RunID == "":
		return errors.New("run id is empty")
	case r.Step == "":
		return errors.New("step is empty")
	case r.Attempt < 1:
		return fmt.Errorf("attempt is %d; it counts from 1", r.Attempt)
	case r.Index < 0:
		return fmt.Errorf("index is %d; it must not be negative", r.Index)
	case r.Time.IsZero():
		return errors.New("time is zero")
	case !utf8.ValidString(r.Message):
		return errors.New("message is not UTF-8")
	case r.Size() > MaxLogRecordBytes:
		return fmt.Errorf("record is %d bytes (message and attributes); the limit is %d", r.Size(), MaxLogRecordBytes)
	}
	if len(r.Attrs) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r.Attrs, &m); err != nil {
			return fmt.Errorf("attrs: not a JSON object: %w", err)
		}
	}
	return nil
}

// AppendLogsParams carries the records of AppendLogs.
type AppendLogsParams struct {
	Records []LogRecord
}

// Check validates the records: the error names the first bad one.
func (p *AppendLogsParams) Check() error {
	if len(p.Records) > MaxLogsPerAppend {
		return fmt.Errorf("%d records; the limit per call is %d", len(p.Records), MaxLogsPerAppend)
	}
	for i := range p.Records {
		if err := p.Records[i].Check(); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
	}
	return nil
}

// LogsParams selects the records Logs returns. Zero fields do not filter.
type LogsParams struct {
	RunID string
	Step  string
	// Index, when set, keeps one map element or activity.
	Index   *int
	Attempt int
	// MinLevel keeps records at this level or above (markers always).
	MinLevel *slog.Level
	// After keeps records with a greater Seq (a cursor).
	After int64
	// Limit defaults to, and is capped at, MaxLogsPage.
	Limit int
}

// PageLimit returns the limit to use.
func (p *LogsParams) PageLimit() int {
	if p.Limit <= 0 || p.Limit > MaxLogsPage {
		return MaxLogsPage
	}
	return p.Limit
}

// LogAttempt names an attempt's log.
type LogAttempt struct {
	Step    string
	Index   int
	Attempt int
}

// LogRow is what the bounds need of a stored record.
type LogRow struct {
	Seq     int64
	Attempt LogAttempt
	Size    int
	Dropped int
}

// LogMarker is the record that stands for dropped records of an attempt:
// Seq (one of the dropped records) is kept and made a marker of Dropped
// records; Delete are the other rows to delete.
type LogMarker struct {
	Attempt LogAttempt
	Seq     int64
	Dropped int
	Delete  []int64
}

// MarkerMessage is the message of a marker record.
func MarkerMessage(dropped int) string {
	return fmt.Sprintf("%d earlier log records of this attempt were dropped: a step's log keeps %d KiB per attempt and %d KiB per run, the newest records",
		dropped, MaxLogBytesPerAttempt>>10, MaxLogBytesPerRun>>10)
}

// PlanLogDrops decides which records of a run to drop for the bounds:
// rows are the run's stored records in Seq order, touched the attempts an
// append wrote. It drops the oldest records of each touched attempt over
// MaxLogBytesPerAttempt, then the oldest of the run while it is over
// MaxLogBytesPerRun, and returns one marker per attempt that lost records
// (earlier markers of the attempt are merged into it). Every backend
// applies the same plan.
func PlanLogDrops(rows []LogRow, touched map[LogAttempt]bool) []LogMarker {
	dropped := make([]bool, len(rows))
	perAttempt := map[LogAttempt]int{}
	total := 0
	for _, r := range rows {
		perAttempt[r.Attempt] += r.Size
		total += r.Size
	}
	for i, r := range rows {
		if r.Dropped == 0 && touched[r.Attempt] && perAttempt[r.Attempt] > MaxLogBytesPerAttempt {
			dropped[i] = true
			perAttempt[r.Attempt] -= r.Size
			total -= r.Size
		}
	}
	for i, r := range rows {
		if total <= MaxLogBytesPerRun {
			break
		}
		if r.Dropped == 0 && !dropped[i] {
			dropped[i] = true
			total -= r.Size
		}
	}
	markers := map[LogAttempt]*LogMarker{}
	var order []LogAttempt
	for i, r := range rows {
		if !dropped[i] {
			continue
		}
		m := markers[r.Attempt]
		if m == nil {
			m = &LogMarker{Attempt: r.Attempt}
			markers[r.Attempt] = m
			order = append(order, r.Attempt)
		}
		if m.Seq != 0 {
			m.Delete = append(m.Delete, m.Seq)
		}
		m.Seq = r.Seq
		m.Dropped++
	}
	out := make([]LogMarker, 0, len(order))
	for _, a := range order {
		m := markers[a]
		for _, r := range rows {
			if r.Attempt == a && r.Dropped > 0 {
				m.Dropped += r.Dropped
				m.Delete = append(m.Delete, r.Seq)
			}
		}
		out = append(out, *m)
	}
	return out
}

// LogSums reports whether the rows' attempts or run are over a bound:
// callers load the rows only then.
func LogSums(runTotal int, attemptTotals []int) bool {
	if runTotal > MaxLogBytesPerRun {
		return true
	}
	for _, t := range attemptTotals {
		if t > MaxLogBytesPerAttempt {
			return true
		}
	}
	return false
}
