package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

// PayloadRewriter is implemented by stores whose stored payloads can be
// rewritten in place: the re-encryption of payloads after a key rotation
// (Client.ReencodePayloads, heph payloads reencode). Both backends
// implement it; the suite is storetest.RunRewrite.
type PayloadRewriter interface {
	// RewritePayloads reads up to p.Limit rows of p.Table after p.After,
	// in key order, calls p.Rewrite on each payload of each row, and
	// writes back the payloads it changed, each only if it is still what
	// was read (a compare-and-set: a payload written meanwhile by a
	// commit is left as that commit wrote it, and counted in Skipped).
	RewritePayloads(ctx context.Context, p *RewritePayloadsParams) (*RewritePayloadsResult, error)
}

// PayloadTables are the tables that hold payloads, in the order a
// rewrite walks them: runs (input, output, state, published state),
// history (the entries' data), tasks (payload, item, heartbeat details),
// requests (arguments, result), schedules (input), webhook_events (data),
// webhook_deliveries (body), sent_events (an event's data), event_waits
// (the input a wait's match reads) and trigger_group_events (the input a
// trigger mapped from an event that joined a group).
var PayloadTables = []string{"runs", "history", "tasks", "requests", "schedules", "webhook_events", "webhook_deliveries", "sent_events", "event_waits", "trigger_group_events"}

// RewritePayloadsParams is one batch of a rewrite.
type RewritePayloadsParams struct {
	// Table is one of PayloadTables.
	Table string
	// After continues from RewritePayloadsResult.Next ("" from the
	// start).
	After string
	// Limit bounds the rows read; defaults to 500, at most 5000.
	Limit int
	// Rewrite returns a payload as it should be stored, and whether that
	// differs from it. An error stops the batch (nothing more is
	// written) and is returned.
	Rewrite func(v json.RawMessage) (json.RawMessage, bool, error)
}

// RewritePayloadsResult is what a batch did.
type RewritePayloadsResult struct {
	// Rows read, payloads Changed (written), and payloads Skipped (changed
	// meanwhile by someone else: not written).
	Rows, Changed, Skipped int
	// Next continues the walk of the table; "" when it is done.
	Next string
}

// Check validates p and returns its page size.
func (p *RewritePayloadsParams) Check() (int, error) {
	if !slices.Contains(PayloadTables, p.Table) {
		return 0, fmt.Errorf("rewrite payloads: table %q holds no payloads (want one of %v)", p.Table, PayloadTables)
	}
	if p.Rewrite == nil {
		return 0, fmt.Errorf("rewrite payloads: Rewrite is nil")
	}
	switch {
	case p.Limit < 0:
		return 0, fmt.Errorf("rewrite payloads: Limit is %d", p.Limit)
	case p.Limit == 0:
		return 500, nil
	}
	return min(p.Limit, 5000), nil
}

// RewriteEntries rewrites the data of history entries packed as a JSON
// array of arrays whose seventh element, when present, is the entry's
// data (PostgreSQL's history rows): it returns the array rewritten and
// whether a datum changed.
func RewriteEntries(entries []byte, rewrite func(json.RawMessage) (json.RawMessage, bool, error)) ([]byte, int, error) {
	var es [][]json.RawMessage
	if err := json.Unmarshal(entries, &es); err != nil {
		return nil, 0, fmt.Errorf("history entries: %w", err)
	}
	n := 0
	for _, e := range es {
		if len(e) < 7 || len(e[6]) == 0 || string(e[6]) == "null" {
			continue
		}
		out, changed, err := rewrite(e[6])
		if err != nil {
			return nil, 0, err
		}
		if changed {
			e[6], n = out, n+1
		}
	}
	if n == 0 {
		return entries, 0, nil
	}
	b, err := json.Marshal(es)
	return b, n, err
}

// EncodeKeyCursor and DecodeKeyCursor keep a row's key values (strings
// and integers; ints says which) as a JSON array: the cursor of a
// rewrite (RewritePayloadsResult.Next), the same on every backend.
func EncodeKeyCursor(keys []any) string {
	b, _ := json.Marshal(keys) // strings and integers always marshal
	return string(b)
}

func DecodeKeyCursor(c string, ints []bool) ([]any, error) {
	if c == "" {
		return nil, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(c), &raw); err != nil || len(raw) != len(ints) {
		return nil, fmt.Errorf("rewrite payloads: %q is not a cursor of this table", c)
	}
	out := make([]any, len(raw))
	for i, r := range raw {
		var err error
		if ints[i] {
			var n int64
			err = json.Unmarshal(r, &n)
			out[i] = n
		} else {
			var s string
			err = json.Unmarshal(r, &s)
			out[i] = s
		}
		if err != nil {
			return nil, fmt.Errorf("rewrite payloads: %q is not a cursor of this table", c)
		}
	}
	return out, nil
}

// RewriteRow is a row a backend read for a rewrite: its key values
// (strings and int64s) and its payloads ("" for NULL).
type RewriteRow struct {
	Keys     []any
	Payloads []string
}

// ScanRewriteRows reads the rows of a rewrite's query: the key columns
// (ints says which are integers), then n payload columns as text.
func ScanRewriteRows(rows interface {
	Next() bool
	Scan(dst ...any) error
}, ints []bool, n int) ([]RewriteRow, error) {
	var out []RewriteRow
	for rows.Next() {
		keys := make([]any, len(ints))
		payloads := make([]*string, n)
		dst := make([]any, 0, len(ints)+n)
		for i, isInt := range ints {
			if isInt {
				keys[i] = new(int64)
			} else {
				keys[i] = new(string)
			}
			dst = append(dst, keys[i])
		}
		for i := range payloads {
			dst = append(dst, &payloads[i])
		}
		if err := rows.Scan(dst...); err != nil {
			return nil, err
		}
		r := RewriteRow{Keys: make([]any, len(keys)), Payloads: make([]string, n)}
		for i, k := range keys {
			if ints[i] {
				r.Keys[i] = *k.(*int64)
			} else {
				r.Keys[i] = *k.(*string)
			}
		}
		for i, p := range payloads {
			if p != nil {
				r.Payloads[i] = *p
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// ApplyRewrite rewrites the payloads of rows read for a batch of limit
// rows: rewrite gives the payload of column col as it should be stored,
// and update writes it where it is still old (reporting whether it did).
// The result's Next is the last row's keys when the batch was full.
func ApplyRewrite(rows []RewriteRow, limit int, rewrite func(col int, v json.RawMessage) (json.RawMessage, bool, error), update func(col int, keys []any, old, new string) (bool, error)) (*RewritePayloadsResult, error) {
	res := &RewritePayloadsResult{Rows: len(rows)}
	for _, r := range rows {
		for col, v := range r.Payloads {
			if v == "" {
				continue
			}
			out, changed, err := rewrite(col, json.RawMessage(v))
			if err != nil {
				return nil, fmt.Errorf("payload %d of %v: %w", col, r.Keys, err)
			}
			if !changed {
				continue
			}
			wrote, err := update(col, r.Keys, v, string(out))
			switch {
			case err != nil:
				return nil, err
			case wrote:
				res.Changed++
			default:
				res.Skipped++
			}
		}
	}
	if len(rows) == limit && limit > 0 {
		res.Next = EncodeKeyCursor(rows[len(rows)-1].Keys)
	}
	return res, nil
}
