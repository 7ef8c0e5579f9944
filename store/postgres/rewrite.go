package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

// payloadTable is where a table of store.PayloadTables keeps its
// payloads: its key columns (ints says which are integers), its payload
// columns (jsonb, or text when text is set), or, for the history, the
// packed entries (text).
type payloadTable struct {
	name     string
	keys     []string
	ints     []bool
	payloads []string
	entries  bool
	text     bool
}

var payloadTables = map[string]payloadTable{
	"runs":                 {"runs", []string{"id"}, []bool{false}, []string{"input", "output", "state", "published"}, false, false},
	"history":              {"history", []string{"run_id", "seq"}, []bool{false, true}, []string{"entries"}, true, true},
	"tasks":                {"tasks", []string{"id"}, []bool{true}, []string{"payload", "item", "details"}, false, false},
	"requests":             {"requests", []string{"run_id", "id"}, []bool{false, false}, []string{"args", "result"}, false, false},
	"schedules":            {"schedules", []string{"id"}, []bool{false}, []string{"input"}, false, true},
	"webhook_events":       {"webhook_events", []string{"id"}, []bool{true}, []string{"data"}, false, false},
	"webhook_deliveries":   {"webhook_deliveries", []string{"id"}, []bool{false}, []string{"body"}, false, true},
	"sent_events":          {"sent_events", []string{"seq"}, []bool{true}, []string{"data"}, false, false},
	"event_waits":          {"event_waits", []string{"id"}, []bool{false}, []string{"input"}, false, false},
	"trigger_group_events": {"trigger_group_events", []string{"trigger_name", "event_id"}, []bool{false, false}, []string{"input"}, false, false},
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
	table := pgx.Identifier{s.schema, t.name}.Sanitize()
	keys := strings.Join(t.keys, ", ")
	cols := make([]string, len(t.payloads))
	for i, c := range t.payloads {
		cols[i] = c + "::text"
	}
	q := "SELECT " + keys + ", " + strings.Join(cols, ", ") + " FROM " + table
	switch {
	case after == nil:
	case len(t.keys) == 1:
		q += " WHERE " + keys + " > $1"
	default:
		q += " WHERE (" + keys + ") > ($1, $2)"
	}
	q += " ORDER BY " + keys + fmt.Sprintf(" LIMIT %d", limit)
	var res *store.RewritePayloadsResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res, err = s.rewriteRows(ctx, tx, t, table, q, after, limit, p.Rewrite)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rewrite payloads of %s: %w", p.Table, err)
	}
	return res, nil
}

func (s *Store) rewriteRows(ctx context.Context, tx pgx.Tx, t payloadTable, table, q string, after []any, limit int, rewrite func(json.RawMessage) (json.RawMessage, bool, error)) (*store.RewritePayloadsResult, error) {
	rows, err := tx.Query(ctx, q, after...)
	if err != nil {
		return nil, err
	}
	read, err := store.ScanRewriteRows(rows, t.ints, len(t.payloads))
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return nil, err
	}
	var where []string
	for i, k := range t.keys {
		where = append(where, fmt.Sprintf("%s = $%d", k, i+2))
	}
	cast := "::jsonb"
	if t.text {
		cast = ""
	}
	return store.ApplyRewrite(read, limit, func(col int, v json.RawMessage) (json.RawMessage, bool, error) {
		var (
			b       json.RawMessage
			changed bool
			err     error
		)
		if t.entries {
			var n int
			b, n, err = store.RewriteEntries(v, rewrite)
			changed = n > 0
		} else {
			b, changed, err = rewrite(v)
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", t.payloads[col], err)
		}
		return b, changed, err
	}, func(col int, keys []any, old, new string) (bool, error) {
		c := t.payloads[col]
		args := append(append([]any{new}, keys...), old)
		tag, err := tx.Exec(ctx, fmt.Sprintf("UPDATE %s SET %s = $1%s WHERE %s AND %s = $%d%s", table, c, cast, strings.Join(where, " AND "), c, len(keys)+2, cast), args...)
		return tag.RowsAffected() == 1, err
	})
}
