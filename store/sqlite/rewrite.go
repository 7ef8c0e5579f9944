package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hephaestus-go/hephaestus/store"
)

// payloadTable is where a table of store.PayloadTables keeps its
// payloads: its key columns (ints says which are integers) and its
// payload columns.
type payloadTable struct {
	name     string
	keys     []string
	ints     []bool
	payloads []string
}

var payloadTables = map[string]payloadTable{
	"runs":                 {"runs", []string{"id"}, []bool{false}, []string{"input", "output", "state", "published"}},
	"history":              {"events", []string{"run_id", "seq"}, []bool{false, true}, []string{"data"}},
	"tasks":                {"tasks", []string{"id"}, []bool{true}, []string{"payload", "item", "details"}},
	"requests":             {"requests", []string{"run_id", "id"}, []bool{false, false}, []string{"args", "result"}},
	"schedules":            {"schedules", []string{"id"}, []bool{false}, []string{"input"}},
	"webhook_events":       {"webhook_events", []string{"id"}, []bool{true}, []string{"data"}},
	"webhook_deliveries":   {"webhook_deliveries", []string{"id"}, []bool{false}, []string{"body"}},
	"sent_events":          {"sent_events", []string{"seq"}, []bool{true}, []string{"data"}},
	"event_waits":          {"event_waits", []string{"id"}, []bool{false}, []string{"input"}},
	"trigger_group_events": {"trigger_group_events", []string{"trigger_name", "event_id"}, []bool{false, false}, []string{"input"}},
}

// RewritePayloads implements store.PayloadRewriter: one transaction per
// batch, each payload written back only if it is still what was read.
func (s *Store) RewritePayloads(ctx context.Context, p *store.RewritePayloadsParams) (*store.RewritePayloadsResult, error) {
	limit, err := p.Check()
	if err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("rewrite payloads: %w", err)
	}
	t := payloadTables[p.Table]
	after, err := store.DecodeKeyCursor(p.After, t.ints)
	if err != nil {
		return nil, err
	}
	keys := strings.Join(t.keys, ", ")
	q := "SELECT " + keys + ", " + strings.Join(t.payloads, ", ") + " FROM " + t.name
	if after != nil {
		q += " WHERE (" + keys + ") > (" + strings.TrimSuffix(strings.Repeat("?, ", len(t.keys)), ", ") + ")"
	}
	q += " ORDER BY " + keys + " LIMIT " + fmt.Sprint(limit)
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("rewrite payloads: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := rewriteRows(ctx, tx, t, q, after, limit, p.Rewrite)
	if err != nil {
		return nil, fmt.Errorf("rewrite payloads of %s: %w", p.Table, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("rewrite payloads: %w", err)
	}
	return res, nil
}

func rewriteRows(ctx context.Context, tx *sql.Tx, t payloadTable, q string, after []any, limit int, rewrite func(json.RawMessage) (json.RawMessage, bool, error)) (*store.RewritePayloadsResult, error) {
	rows, err := tx.QueryContext(ctx, q, after...)
	if err != nil {
		return nil, err
	}
	read, err := store.ScanRewriteRows(rows, t.ints, len(t.payloads))
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	where := strings.Join(t.keys, " = ? AND ") + " = ?"
	return store.ApplyRewrite(read, limit, func(col int, v json.RawMessage) (json.RawMessage, bool, error) {
		out, changed, err := rewrite(v)
		if err != nil {
			err = fmt.Errorf("%s: %w", t.payloads[col], err)
		}
		return out, changed, err
	},
		func(col int, keys []any, old, new string) (bool, error) {
			c := t.payloads[col]
			args := append(append([]any{new}, keys...), old)
			n, err := tx.ExecContext(ctx, "UPDATE "+t.name+" SET "+c+" = ? WHERE "+where+" AND "+c+" = ?", args...)
			if err != nil {
				return false, err
			}
			k, err := n.RowsAffected()
			return k == 1, err
		})
}
