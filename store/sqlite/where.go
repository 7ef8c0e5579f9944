package sqlite

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hephaestus-go/hephaestus/store"
)

// where builds the WHERE clause of a listing and its arguments, bound as
// SQLite's numbered parameters ?1, ?2, …: every listing that filters
// (runs, documents) builds its conditions with one.
type where struct {
	conds []string
	args  []any
}

// param adds v to the arguments and returns its placeholder.
func (w *where) param(v any) string {
	w.args = append(w.args, v)
	return "?" + strconv.Itoa(len(w.args))
}

// add adds a condition; each "?" in cond stands for the next of vals.
func (w *where) add(cond string, vals ...any) {
	var b strings.Builder
	for _, v := range vals {
		i := strings.IndexByte(cond, '?')
		b.WriteString(cond[:i])
		b.WriteString(w.param(v))
		cond = cond[i+1:]
	}
	b.WriteString(cond)
	w.conds = append(w.conds, b.String())
}

// clause returns " WHERE" and the conditions joined by AND, or "" when
// there are none.
func (w *where) clause() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// activeRuns keeps the active runs. It is the predicate of the index
// runs_active (0029), word for word: SQLite reads a partial index only
// for a statement whose WHERE clause has its terms, so a listing that
// keeps active runs only adds it, and reads the active runs instead of
// every run.
const activeRuns = "status IN ('pending', 'running', 'waiting')"

// runFilter is the condition on runs of p's filters and cursor.
func runFilter(p *store.ListRunsParams, broad []bool) (*where, error) {
	w := &where{}
	switch {
	case p.Workflow != "" && (store.OnlyActive(p.Statuses) || !p.DueAfter.IsZero()):
		// The unary + keeps SQLite from reading the workflow's runs
		// through runs_workflow (without statistics it would): the walk
		// of runs_active reads the active runs only.
		w.add("+workflow = ?", p.Workflow)
	case p.Workflow != "":
		w.add("workflow = ?", p.Workflow)
	}
	if len(p.Statuses) > 0 {
		st := make([]any, len(p.Statuses))
		for i, s := range p.Statuses {
			st[i] = string(s)
		}
		w.add("status IN (?"+strings.Repeat(", ?", len(st)-1)+")", st...)
		if store.OnlyActive(p.Statuses) {
			w.add(activeRuns)
		}
	}
	if p.BusinessID != "" {
		w.add("business_id = ?", p.BusinessID)
	}
	for _, tag := range p.Tags {
		w.add("EXISTS (SELECT 1 FROM json_each(runs.tags) WHERE json_each.value = ?)", tag)
	}
	if !p.CreatedAfter.IsZero() {
		w.add("created_at >= ?", micros(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		w.add("created_at < ?", micros(p.CreatedBefore))
	}
	if p.Kind != "" {
		w.add("kind = ?", string(p.Kind))
	}
	if p.Version != 0 {
		w.add("version = ?", int64(p.Version))
	}
	if p.BuildID != "" {
		w.add("build_id = ?", p.BuildID)
	}
	if p.ParentID != "" {
		w.add("parent_id = ?", p.ParentID)
	}
	if !p.DueAfter.IsZero() {
		// min() of no task is NULL: a run without tasks is not kept.
		w.add(activeRuns+" AND status IN ('pending', 'running') AND (SELECT min(ready_at) FROM tasks t WHERE t.run_id = runs.id) > ?", micros(p.DueAfter))
	}
	if len(p.IDs) > 0 {
		ids, err := jsonList(p.IDs)
		if err != nil {
			return nil, err
		}
		w.add("id IN (SELECT value FROM json_each(?))", ids)
	}
	if p.Queue != "" {
		if err := w.queue(p.Queue, p.QueueWorkflows); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Metadata)) {
		// A JSON string compares as its text, a container never, another
		// value as its JSON text (-> keeps the text of a number).
		w.add(`EXISTS (SELECT 1 FROM json_each(runs.metadata) m WHERE m.key = ? AND
			(CASE m.type WHEN 'text' THEN m.value WHEN 'object' THEN NULL WHEN 'array' THEN NULL
			ELSE runs.metadata -> m.fullkey END) = ?)`, k, p.Metadata[k])
	}
	for i, c := range p.Attrs {
		w.attr(&c, broad[i])
	}
	if p.Text != "" {
		// lower() folds ASCII letters only, as lowerASCII does.
		t := w.param(lowerASCII(p.Text))
		w.add(strings.ReplaceAll(`(instr(lower(id), ?N) > 0 OR instr(lower(workflow), ?N) > 0
			OR instr(lower(coalesce(business_id, '')), ?N) > 0 OR instr(lower(error), ?N) > 0
			OR EXISTS (SELECT 1 FROM json_each(runs.tags) WHERE instr(lower(json_each.value), ?N) > 0))`, "?N", t))
	}
	if p.Cursor != "" {
		at, id, err := store.DecodeRunCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		w.add("(created_at, id) < (?, ?)", micros(at), id)
	}
	if !p.ChangedAfter.IsZero() {
		w.add("(updated_at, id) > (?, ?)", micros(p.ChangedAfter), p.ChangedAfterID)
	}
	return w, nil
}

// queue keeps the runs with a task in queue, or of one of workflows.
func (w *where) queue(queue string, workflows []string) error {
	cond := "EXISTS (SELECT 1 FROM tasks WHERE tasks.run_id = runs.id AND tasks.queue = " + w.param(queue) + ")"
	if len(workflows) > 0 {
		wfs, err := jsonList(workflows)
		if err != nil {
			return err
		}
		cond = "(" + cond + " OR workflow IN (SELECT value FROM json_each(" + w.param(wfs) + ")))"
	}
	w.conds = append(w.conds, cond)
	return nil
}

// attr keeps the runs whose search attributes meet c (store.AttrCond).
// A condition that few rows meet (not broad) reads their ids once from
// the attribute's (name, value) index, and the walk of the runs in list
// order probes them; a broad one is probed per run by (run_id, name), so
// the walk stops at the page's end without reading every match.
func (w *where) attr(c *store.AttrCond, broad bool) {
	if !broad {
		w.conds = append(w.conds, attrCond(w, "run_attributes", c))
		return
	}
	rows := attrRows(w, c, "run_attributes a", "a.run_id = runs.id AND ")
	if rows == "" {
		_, v := store.AttrColumn(c.Type, c.Values[0])
		rows = "SELECT 1 FROM run_attributes a WHERE a.run_id = runs.id AND a.name = " + w.param(c.Name) +
			" AND a.type = 'keyword_list') AND NOT EXISTS (SELECT 1 FROM run_attributes a WHERE a.run_id = runs.id AND a.name = " +
			w.param(c.Name) + " AND a.type = 'keyword_list' AND a.s = " + w.param(v)
	}
	w.conds = append(w.conds, "EXISTS ("+rows+")")
}

// attrRows is the SELECT of the rows of tbl that meet c, with pre before
// its conditions; "" for != on a list, which no one row decides.
func attrRows(w *where, c *store.AttrCond, tbl, pre string) string {
	if c.Type == store.AttrKeywordList && c.Op == store.OpNe {
		return ""
	}
	col, _ := store.AttrColumn(c.Type, c.Values[0])
	q := "SELECT 1 FROM " + tbl + " WHERE " + pre + "name = " + w.param(c.Name) + " AND type = " + w.param(string(c.Type)) + " AND " + col
	if c.Op == store.OpIn {
		ps := make([]string, len(c.Values))
		for i, v := range c.Values {
			_, x := store.AttrColumn(c.Type, v)
			ps[i] = w.param(x)
		}
		return q + " IN (" + strings.Join(ps, ", ") + ")"
	}
	op := string(c.Op)
	if c.Op == store.OpNe {
		op = "<>"
	}
	_, v := store.AttrColumn(c.Type, c.Values[0])
	return q + " " + op + " " + w.param(v)
}

// defaultBroadRows is how many rows make a condition broad (where.attr).
const defaultBroadRows = 2000

// broadAttrs tells, per condition of f, whether more than s.broadRows rows
// meet it: one bounded count on the (name, value) index each.
func (s *Store) broadAttrs(ctx context.Context, f store.AttrFilter) ([]bool, error) {
	out := make([]bool, len(f))
	for i := range f {
		w := &where{}
		rows := attrRows(w, &f[i], "run_attributes", "")
		if rows == "" {
			out[i] = true
			continue
		}
		var n int
		q := "SELECT count(*) FROM (" + rows + " LIMIT " + strconv.Itoa(s.broadRows+1) + ")"
		if err := s.reader.QueryRowContext(ctx, q, w.args...).Scan(&n); err != nil {
			return nil, err
		}
		out[i] = n > s.broadRows
	}
	return out, nil
}

// attrCond is the condition of c on runs, reading the table tbl.
func attrCond(w *where, tbl string, c *store.AttrCond) string {
	col, _ := store.AttrColumn(c.Type, c.Values[0])
	ids := "runs.id IN (SELECT run_id FROM " + tbl + " WHERE name = " + w.param(c.Name) + " AND type = " + w.param(string(c.Type))
	if c.Type == store.AttrKeywordList && c.Op == store.OpNe {
		// The run has the list, and no element equals the value.
		_, v := store.AttrColumn(c.Type, c.Values[0])
		return ids + ") AND runs.id NOT IN (SELECT run_id FROM " + tbl + " WHERE name = " + w.param(c.Name) +
			" AND type = 'keyword_list' AND s = " + w.param(v) + ")"
	}
	if c.Op == store.OpIn {
		ps := make([]string, len(c.Values))
		for i, v := range c.Values {
			_, x := store.AttrColumn(c.Type, v)
			ps[i] = w.param(x)
		}
		return ids + " AND " + col + " IN (" + strings.Join(ps, ", ") + "))"
	}
	op := string(c.Op)
	if c.Op == store.OpNe {
		op = "<>"
	}
	_, v := store.AttrColumn(c.Type, c.Values[0])
	return ids + " AND " + col + " " + op + " " + w.param(v) + ")"
}
