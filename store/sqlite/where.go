package sqlite

import (
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

// runFilter is the condition on runs of p's filters and cursor.
func runFilter(p *store.ListRunsParams) (*where, error) {
	w := &where{}
	if p.Workflow != "" {
		w.add("workflow = ?", p.Workflow)
	}
	if len(p.Statuses) > 0 {
		st := make([]any, len(p.Statuses))
		for i, s := range p.Statuses {
			st[i] = string(s)
		}
		w.add("status IN (?"+strings.Repeat(", ?", len(st)-1)+")", st...)
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
		w.add("status IN ('pending', 'running') AND (SELECT min(ready_at) FROM tasks t WHERE t.run_id = runs.id) > ?", micros(p.DueAfter))
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
	for _, c := range p.Attrs {
		w.attr(&c)
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

// attr keeps the runs whose search attributes meet c (store.AttrCond):
// probes of run_attributes by (run_id, name), or, when the planner
// prefers, a walk of the attribute's (name, value) index.
func (w *where) attr(c *store.AttrCond) {
	col, _ := store.AttrColumn(c.Type, c.Values[0])
	has := "EXISTS (SELECT 1 FROM run_attributes a WHERE a.run_id = runs.id AND a.name = " + w.param(c.Name) +
		" AND a.type = " + w.param(string(c.Type))
	if c.Type == store.AttrKeywordList && c.Op == store.OpNe {
		// No element equals the value.
		_, v := store.AttrColumn(c.Type, c.Values[0])
		w.conds = append(w.conds, has+") AND NOT EXISTS (SELECT 1 FROM run_attributes a WHERE a.run_id = runs.id AND a.name = "+
			w.param(c.Name)+" AND a.type = 'keyword_list' AND a.s = "+w.param(v)+")")
		return
	}
	if c.Op == store.OpIn {
		ps := make([]string, len(c.Values))
		for i, v := range c.Values {
			_, x := store.AttrColumn(c.Type, v)
			ps[i] = w.param(x)
		}
		w.conds = append(w.conds, has+" AND a."+col+" IN ("+strings.Join(ps, ", ")+"))")
		return
	}
	op := string(c.Op)
	if c.Op == store.OpNe {
		op = "<>"
	}
	_, v := store.AttrColumn(c.Type, c.Values[0])
	w.conds = append(w.conds, has+" AND a."+col+" "+op+" "+w.param(v)+")")
}
