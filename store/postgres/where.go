package postgres

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hephaestus-go/hephaestus/store"
)

// where builds the WHERE clause of a listing and its arguments, bound as
// PostgreSQL's parameters $1, $2, …: every listing that filters (runs,
// documents) builds its conditions with one.
type where struct {
	conds []string
	args  []any
}

// param adds v to the arguments and returns its placeholder.
func (w *where) param(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

// add adds a condition; each "$?" in cond stands for the next of vals.
func (w *where) add(cond string, vals ...any) {
	var b strings.Builder
	for _, v := range vals {
		i := strings.Index(cond, "$?")
		b.WriteString(cond[:i])
		b.WriteString(w.param(v))
		cond = cond[i+2:]
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

// activeRuns keeps the active runs: the predicate of the index
// runs_active (0031). A listing that keeps active runs only adds it as a
// constant, so that the planner proves the index holds every run it may
// list, also in a generic plan, where status = ANY($n) proves nothing.
const activeRuns = "status IN ('pending', 'running', 'waiting')"

// runFilter is the condition on the runs of schema of p's filters and
// cursor.
func runFilter(schema string, p *store.ListRunsParams) (*where, error) {
	w := &where{}
	if p.Workflow != "" {
		w.add("workflow = $?", p.Workflow)
	}
	if len(p.Statuses) > 0 {
		st := make([]string, len(p.Statuses))
		for i, s := range p.Statuses {
			st[i] = string(s)
		}
		w.add("status = ANY($?::text[])", st)
		if store.OnlyActive(p.Statuses) {
			w.add(activeRuns)
		}
	}
	if p.BusinessID != "" {
		w.add("business_id = $?", p.BusinessID)
	}
	if len(p.Tags) > 0 {
		w.add("tags @> $?::text[]", p.Tags)
	}
	if !p.CreatedAfter.IsZero() {
		w.add("created_at >= $?", truncate(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		w.add("created_at < $?", truncate(p.CreatedBefore))
	}
	if p.Kind != "" {
		w.add("kind = $?", string(p.Kind))
	}
	if p.Version != 0 {
		w.add("version = $?", int64(p.Version))
	}
	if p.BuildID != "" {
		w.add("build_id = $?", p.BuildID)
	}
	if p.ParentID != "" {
		w.add("parent_id = $?", p.ParentID)
	}
	if !p.DueAfter.IsZero() {
		// min() of no task is NULL: a run without tasks is not kept.
		w.add(activeRuns+` AND status IN ('pending', 'running') AND (SELECT min(ready_at) FROM "`+schema+`".tasks t WHERE t.run_id = runs.id) > $?`, truncate(p.DueAfter))
	}
	if len(p.IDs) > 0 {
		w.add("id = ANY($?::text[])", p.IDs)
	}
	if p.Queue != "" {
		cond := `EXISTS (SELECT 1 FROM "` + schema + `".tasks t WHERE t.run_id = runs.id AND t.queue = ` + w.param(p.Queue) + `)`
		if len(p.QueueWorkflows) > 0 {
			cond = fmt.Sprintf("(%s OR workflow = ANY(%s::text[]))", cond, w.param(p.QueueWorkflows))
		}
		w.conds = append(w.conds, cond)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Metadata)) {
		// A JSON string compares as its text, a container never, another
		// value as its JSON text.
		key := w.param(k)
		w.add(fmt.Sprintf(`(CASE jsonb_typeof(metadata -> %[1]s) WHEN 'string' THEN metadata ->> %[1]s
			WHEN 'object' THEN NULL WHEN 'array' THEN NULL ELSE (metadata -> %[1]s)::text END) = $?`, key), p.Metadata[k])
	}
	for _, c := range p.Attrs {
		w.attr(schema, &c)
	}
	if p.Text != "" {
		// lower() of the "C" collation folds ASCII letters only, as
		// lowerASCII does.
		t := w.param(lowerASCII(p.Text))
		w.add(strings.ReplaceAll(`(strpos(lower(id), $T) > 0 OR strpos(lower(workflow), $T) > 0
			OR strpos(lower(coalesce(business_id, '')), $T) > 0 OR strpos(lower(error COLLATE "C"), $T) > 0
			OR EXISTS (SELECT 1 FROM unnest(tags) tag WHERE strpos(lower(tag COLLATE "C"), $T) > 0))`, "$T", t))
	}
	if p.Cursor != "" {
		at, id, err := store.DecodeRunCursor(p.Cursor)
		if err != nil {
			return nil, err
		}
		w.add("(created_at, id) < ($?, $?)", at, id)
	}
	if !p.ChangedAfter.IsZero() {
		w.add("(updated_at, id) > ($?, $?)", truncate(p.ChangedAfter), p.ChangedAfterID)
	}
	return w, nil
}

// attr keeps the runs whose search attributes meet c (store.AttrCond):
// the ids the attribute's (name, value) index yields, which the planner
// joins to the walk of the runs in list order.
func (w *where) attr(schema string, c *store.AttrCond) {
	w.conds = append(w.conds, attrCond(w, `"`+schema+`".run_attributes`, c))
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
