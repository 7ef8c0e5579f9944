package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The history is stored one row per change (migration 0004): the entries
// a change appends to a run go in one row of the history table, as a JSON
// array of [kind, step, index, attempt, name, error, data?] arrays, and
// are numbered from the row's seq. One row instead of one per entry takes
// a heap tuple, a primary-key entry and their WAL records off every
// entry after a change's first: a one-step run is two rows of history
// where it was five.

// groups are the columns of history rows to insert: one row per change of
// a run.
type groups struct {
	runs     []string
	seqs, ns []int64
	keys     []*string
	entries  []string
}

// add appends the row of a change that appends n entries (encoded by
// encodeEntries) to a run after seq, with the change's key. A change that
// appends nothing writes no row.
func (g *groups) add(runID string, seq int64, n int, key, entries string) {
	if n == 0 {
		return
	}
	var kp *string
	if key != "" {
		kp = &key
	}
	g.runs, g.seqs, g.ns = append(g.runs, runID), append(g.seqs, seq+1), append(g.ns, int64(n))
	g.keys, g.entries = append(g.keys, kp), append(g.entries, entries)
}

// encodeEntries encodes the entries a change appends to a run after seq
// as a history row's JSON array ("" for none).
func encodeEntries(runID string, seq int64, evs []store.NewEvent) (string, error) {
	if len(evs) == 0 {
		return "", nil
	}
	b := make([]byte, 0, 128*len(evs))
	b = append(b, '[')
	for k := range evs {
		if k > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendEntry(b, &evs[k]); err != nil {
			return "", fmt.Errorf("history entry %d (%s): %w", seq+int64(k)+1, evs[k].Kind, err)
		}
	}
	return string(append(b, ']')), nil
}

func (g *groups) args() []any {
	return []any{nonNil(g.runs), nonNil(g.seqs), nonNil(g.ns), nonNil(g.keys), nonNil(g.entries)}
}

var errEntryData = errors.New("data is not valid JSON")

// appendEntry appends e as [kind, step, index, attempt, name, error] with
// its data last when it has any.
func appendEntry(b []byte, e *store.NewEvent) ([]byte, error) {
	b = append(b, '[')
	b = appendString(b, string(e.Kind))
	b = append(b, ',')
	b = appendString(b, e.Step)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Index), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = append(b, ',')
	b = appendString(b, e.Name)
	b = append(b, ',')
	b = appendString(b, e.Error)
	if len(e.Data) > 0 {
		if !json.Valid(e.Data) {
			return b, errEntryData
		}
		b = append(b, ',')
		b = append(b, e.Data...)
	}
	return append(b, ']'), nil
}

// appendString appends s as a JSON string. Plain ASCII, the common case,
// is copied; anything else goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// expandRow turns a history row into its entries, keeping those after
// after.
func expandRow(out []store.Event, runID string, seq, n int64, key *string, at time.Time, entries string, after int64) ([]store.Event, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(entries), &raw); err != nil {
		return out, fmt.Errorf("history of run %s at %d: %w", runID, seq, err)
	}
	if int64(len(raw)) != n {
		return out, fmt.Errorf("history of run %s at %d: %d entries, the row says %d", runID, seq, len(raw), n)
	}
	for k, r := range raw {
		s := seq + int64(k)
		if s <= after {
			continue
		}
		var fields []json.RawMessage
		if err := json.Unmarshal(r, &fields); err != nil || len(fields) < 6 || len(fields) > 7 {
			return out, fmt.Errorf("history of run %s, entry %d: not [kind, step, index, attempt, name, error, data?]", runID, s)
		}
		e := store.Event{RunID: runID, Seq: s, At: at}
		var kind string
		if err := decodeFields(fields, &kind, &e.Step, &e.Index, &e.Attempt, &e.Name, &e.Error); err != nil {
			return out, fmt.Errorf("history of run %s, entry %d: %w", runID, s, err)
		}
		e.Kind = hephtype.EventKind(kind)
		if len(fields) == 7 {
			e.Data = fields[6]
		}
		if k == 0 && key != nil {
			e.Key = *key
		}
		out = append(out, e)
	}
	return out, nil
}

func decodeFields(fields []json.RawMessage, dst ...any) error {
	for i, d := range dst {
		if err := json.Unmarshal(fields[i], d); err != nil {
			return err
		}
	}
	return nil
}
