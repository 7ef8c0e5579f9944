package hephaestus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/replay"
	"github.com/hephaestus-go/hephaestus/internal/wfdef"
)

// Replay replays the history against the current code of its workflow,
// which must be among ws: it returns nil if the code issues the commands
// the history recorded, and a *NonDeterminismError naming the first
// difference if not (the recorded entry and the file:line of the code that
// issued it, the new command and the file:line of the code that issues
// it). Nothing runs but the workflow function: activities, timers and
// children are read from the history.
func (x *HistoryExport) Replay(ws ...Workflow) error {
	if err := x.check(); err != nil {
		return err
	}
	i := slices.IndexFunc(ws, func(w Workflow) bool { return w != nil && w.Name() == x.Workflow })
	if i < 0 {
		return fmt.Errorf("the history is of workflow %q, which is not among the workflows given", x.Workflow)
	}
	events := make([]replay.Event, 0, len(x.Events))
	for _, ev := range x.Events {
		if ev.Kind == hephtype.EventRunCancelled || ev.Kind == hephtype.EventRunTimedOut {
			break // the runtime's, not the workflow's: nothing follows it
		}
		events = append(events, replay.Event{Kind: ev.Kind, ID: ev.ID, Name: ev.Name, Ref: ev.Ref,
			Attempt: ev.Attempt, Data: ev.Data, Error: ev.Error})
	}
	inst, err := replay.New(&replay.Config{Workflow: wfdef.Of(ws[i]), RunID: x.RunID})
	if err != nil {
		return err
	}
	defer inst.Close()
	return inst.Replay(events)
}

// check says what makes x no history export.
func (x *HistoryExport) check() error {
	switch {
	case x.Workflow == "":
		return errors.New(`not a history export: "workflow" is missing (export one with heph history export or Client.ExportHistory)`)
	case x.RunID == "":
		return errors.New(`not a history export: "run_id" is missing`)
	case len(x.Events) == 0:
		return errors.New(`not a history export: "events" is missing or empty`)
	}
	return nil
}

// ReadHistories reads the history exports in r: one JSON object written by
// Client.ExportHistory (or heph history export), several one after the
// other, or a JSON array of them. It fails on text that is not JSON or a
// value that is not a history export, saying which (counted from 1).
func ReadHistories(r io.Reader) ([]*HistoryExport, error) {
	dec := json.NewDecoder(r)
	var out []*HistoryExport
	for {
		n := len(out) + 1 // the number of the next history
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("history %d: not JSON: %w", n, err)
		}
		var xs []*HistoryExport
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			if err := json.Unmarshal(raw, &xs); err != nil {
				return nil, fmt.Errorf("history %d: not a list of history exports: %w", n, err)
			}
		} else {
			x := &HistoryExport{}
			if err := json.Unmarshal(raw, x); err != nil {
				return nil, fmt.Errorf("history %d: not a history export: %w", n, err)
			}
			xs = []*HistoryExport{x}
		}
		for i, x := range xs {
			if x == nil {
				return nil, fmt.Errorf("history %d: not a history export: null", n+i)
			}
			if err := x.check(); err != nil {
				return nil, fmt.Errorf("history %d: %w", n+i, err)
			}
		}
		out = append(out, xs...)
	}
	if len(out) == 0 {
		return nil, errors.New("no history export in it")
	}
	return out, nil
}

// ReplayOutcome is what replaying one history found.
type ReplayOutcome string

// The outcomes of a replay.
const (
	// ReplayOK: the code replays the history.
	ReplayOK ReplayOutcome = "ok"
	// ReplayDiverged: the code issues other commands than the history
	// recorded (a *NonDeterminismError).
	ReplayDiverged ReplayOutcome = "diverged"
	// ReplayFailed: the history could not be replayed: its source is not
	// a history export, its workflow is not among those given, or the
	// replay failed otherwise.
	ReplayFailed ReplayOutcome = "failed"
)

// ReplayResult is the replay of one history (or of one source that holds
// none).
type ReplayResult struct {
	// Source is where the history came from: a file (with "#n" for the
	// nth history of a file that holds several) or a run id.
	Source   string        `json:"source"`
	RunID    string        `json:"run_id,omitempty"`
	Workflow string        `json:"workflow,omitempty"`
	Outcome  ReplayOutcome `json:"outcome"`
	// Err is the error that made the outcome diverged (a
	// *NonDeterminismError) or failed; nil when it is ok.
	Err error `json:"-"`
	// Error is Err's text.
	Error string `json:"error,omitempty"`
	// RecordedAt is the file:line of the code that issued the recorded
	// command and CommandAt that of the new code, when the outcome is
	// diverged and they are known (NonDeterminismError's fields).
	RecordedAt string `json:"recorded_at,omitempty"`
	CommandAt  string `json:"command_at,omitempty"`
}

// ReplayReport is what a ReplayCheck found.
type ReplayReport struct {
	// Replayed counts the histories replayed, Diverged those among them
	// whose replay diverged, Failed the histories or sources that could
	// not be replayed.
	Replayed int `json:"replayed"`
	Diverged int `json:"diverged"`
	Failed   int `json:"failed"`
	// Results are the results in the order the check read them.
	Results []ReplayResult `json:"results"`
}

// OK reports whether every history replayed without diverging and none
// failed.
func (r *ReplayReport) OK() bool { return r.Diverged == 0 && r.Failed == 0 }

// ReplayCheck replays exported histories (Client.ExportHistory, heph
// history export) against the workflow code being deployed: the check to
// run before a deploy, on histories of the runs in flight, so that a
// change that would fail them with a NonDeterminismError is found first.
// Mount it in a worker program (package app/cli's ReplayCommand does) or
// in a test (hephtest.ReplayHistories). It is not safe for concurrent use.
type ReplayCheck struct {
	workflows []Workflow
	report    ReplayReport
}

// NewReplayCheck returns a check of histories against the workflows ws.
func NewReplayCheck(ws ...Workflow) *ReplayCheck {
	return &ReplayCheck{workflows: ws, report: ReplayReport{Results: []ReplayResult{}}}
}

// Report returns what the check found so far.
func (c *ReplayCheck) Report() *ReplayReport { return &c.report }

// Read replays every history read from r (ReadHistories), naming them
// after source. Text that holds no history export is a failed result.
func (c *ReplayCheck) Read(source string, r io.Reader) {
	xs, err := ReadHistories(r)
	if err != nil {
		c.fail(source, err)
		return
	}
	for i, x := range xs {
		name := source
		if len(xs) > 1 {
			name += "#" + strconv.Itoa(i+1)
		}
		c.Replay(name, x)
	}
}

// Path replays the histories of a file, or of every *.json file of a
// directory (not its subdirectories), in name order. A path that cannot
// be read, or a directory without *.json files, is a failed result.
func (c *ReplayCheck) Path(path string) {
	st, err := os.Stat(path)
	if err != nil {
		c.fail(path, err)
		return
	}
	files := []string{path}
	if st.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.json")); err != nil {
			c.fail(path, err)
			return
		}
		if len(files) == 0 {
			c.fail(path, errors.New("the directory has no *.json file"))
			return
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			c.fail(f, err)
			continue
		}
		c.Read(f, bytes.NewReader(b))
	}
}

// Replay replays one history, naming it after source.
func (c *ReplayCheck) Replay(source string, x *HistoryExport) {
	res := ReplayResult{Source: source, RunID: x.RunID, Workflow: x.Workflow, Outcome: ReplayOK}
	err := x.Replay(c.workflows...)
	var nde *NonDeterminismError
	switch {
	case err == nil:
		c.report.Replayed++
	case errors.As(err, &nde):
		c.report.Replayed++
		c.report.Diverged++
		res.Outcome, res.RecordedAt, res.CommandAt = ReplayDiverged, nde.RecordedAt, nde.CommandAt
	default:
		c.report.Failed++
		res.Outcome = ReplayFailed
	}
	if err != nil {
		res.Err, res.Error = err, err.Error()
	}
	c.report.Results = append(c.report.Results, res)
}

func (c *ReplayCheck) fail(source string, err error) {
	c.report.Failed++
	c.report.Results = append(c.report.Results, ReplayResult{Source: source, Outcome: ReplayFailed, Err: err, Error: err.Error()})
}
