package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// runStatuses are the statuses a filter offers: the stored ones, and
// scheduled (pending or running with every task due later), which the
// API takes alone.
var runStatuses = []string{"pending", "running", "waiting", "completed", "failed", "cancelled", "continued", statusScheduled}

const statusScheduled = "scheduled"

// runFilter is the runs list's filter, as its form and URL carry it.
type runFilter struct {
	Statuses      []string
	Kind          string
	Workflow      string
	Version       string
	Queue         string
	Tags          string // comma-separated
	Meta          string // key=value, one per line or comma-separated
	Q             string
	Where         string // a filter over search attributes
	CreatedAfter  string // datetime-local, UTC
	CreatedBefore string
	Limit         int
}

// dateLayout is the value of a datetime-local input.
const dateLayout = "2006-01-02T15:04"

// parseRunFilter reads a filter from the page's query.
func parseRunFilter(q url.Values) (*runFilter, error) {
	f := &runFilter{Kind: q.Get("kind"), Workflow: strings.TrimSpace(q.Get("workflow")), Version: strings.TrimSpace(q.Get("version")),
		Queue: strings.TrimSpace(q.Get("queue")), Tags: strings.TrimSpace(q.Get("tags")), Meta: strings.TrimSpace(q.Get("meta")),
		Q: strings.TrimSpace(q.Get("q")), Where: strings.TrimSpace(q.Get("where")), CreatedAfter: q.Get("created_after"), CreatedBefore: q.Get("created_before"), Limit: 50}
	for _, s := range q["status"] {
		if !slices.Contains(runStatuses, s) {
			return nil, badRequest("status %q is not a run status: use one of %s", s, strings.Join(runStatuses, ", "))
		}
		f.Statuses = append(f.Statuses, s)
	}
	if slices.Contains(f.Statuses, statusScheduled) && len(f.Statuses) > 1 {
		return nil, badRequest("status scheduled is shown alone: uncheck the other statuses")
	}
	if f.Version != "" {
		if n, err := strconv.Atoi(f.Version); err != nil || n < 1 {
			return nil, badRequest("version %q is not a version number (1, 2, …)", f.Version)
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return nil, badRequest("limit %q: want a number from 1 to 500", v)
		}
		f.Limit = n
	}
	for _, field := range []struct{ name, v string }{{"created_after", f.CreatedAfter}, {"created_before", f.CreatedBefore}} {
		if field.v == "" {
			continue
		}
		if _, err := time.Parse(dateLayout, field.v); err != nil {
			return nil, badRequest("%s %q: want a time such as 2026-11-24T09:30 (UTC)", field.name, field.v)
		}
	}
	if _, err := f.metadata(); err != nil {
		return nil, err
	}
	return f, nil
}

// metadata parses the metadata filter: key=value pairs.
func (f *runFilter) metadata() (map[string]string, error) {
	if f.Meta == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, part := range strings.FieldsFunc(f.Meta, func(r rune) bool { return r == '\n' || r == ',' }) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, badRequest("metadata filter %q: want key=value", part)
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m, nil
}

func (f *runFilter) tags() []string {
	var out []string
	for _, t := range strings.Split(f.Tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func utcTime(v string) *time.Time {
	if v == "" {
		return nil
	}
	t, err := time.Parse(dateLayout, v)
	if err != nil {
		return nil
	}
	return &t
}

// apiQuery is the filter as GET /api/v1/runs takes it.
func (f *runFilter) apiQuery() url.Values {
	q := url.Values{}
	for _, s := range f.Statuses {
		q.Add("status", s)
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("kind", f.Kind)
	set("workflow", f.Workflow)
	set("version", f.Version)
	set("queue", f.Queue)
	set("q", f.Q)
	set("where", f.Where)
	for _, t := range f.tags() {
		q.Add("tag", t)
	}
	md, _ := f.metadata()
	for k, v := range md {
		q.Set("meta."+k, v)
	}
	if t := utcTime(f.CreatedAfter); t != nil {
		q.Set("created_after", t.Format(time.RFC3339))
	}
	if t := utcTime(f.CreatedBefore); t != nil {
		q.Set("created_before", t.Format(time.RFC3339))
	}
	return q
}

// operationFilter is the filter as POST /api/v1/operations takes it.
func (f *runFilter) operationFilter() *server.RunFilter {
	md, _ := f.metadata()
	v, _ := strconv.Atoi(f.Version)
	return &server.RunFilter{Kind: f.Kind, Statuses: f.Statuses, Workflow: f.Workflow, Version: v, Queue: f.Queue, Tags: f.tags(),
		Metadata: md, CreatedAfter: utcTime(f.CreatedAfter), CreatedBefore: utcTime(f.CreatedBefore), Q: f.Q, Where: f.Where}
}

// empty reports whether the filter keeps every run.
func (f *runFilter) empty() bool {
	return len(f.apiQuery()) == 0
}

// pageQuery is the filter as this page's URL carries it.
func (f *runFilter) pageQuery() url.Values {
	q := url.Values{}
	for _, s := range f.Statuses {
		q.Add("status", s)
	}
	for k, v := range map[string]string{"kind": f.Kind, "workflow": f.Workflow, "version": f.Version, "queue": f.Queue, "tags": f.Tags,
		"meta": f.Meta, "q": f.Q, "where": f.Where, "created_after": f.CreatedAfter, "created_before": f.CreatedBefore} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit != 50 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// runsData is the runs list's.
type runsData struct {
	Filter   *runFilter
	Statuses []string
	Runs     []*server.Run
	// NextURL pages on; FirstURL goes back to the first page (set when
	// this is not the first page).
	NextURL, FirstURL string
	// All is the filter of "every match" for a bulk operation; nil when
	// the filter is empty (the API refuses to act on every run).
	All *server.RunFilter
}

func (runsData) PageTitle() string { return "Runs" }
func (runsData) Live() bool        { return true }

// runsPage lists the runs that the filter keeps, a page at a time.
func (d *Dashboard) runsPage(r *http.Request) (string, any, error) {
	f, err := parseRunFilter(r.URL.Query())
	if err != nil {
		return "", nil, err
	}
	q := f.apiQuery()
	q.Set("limit", strconv.Itoa(f.Limit))
	cursor := r.URL.Query().Get("cursor")
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var list server.RunList
	if err := d.get(r, "/api/v1/runs", q, &list); err != nil {
		return "", nil, err
	}
	data := &runsData{Filter: f, Statuses: runStatuses, Runs: list.Runs}
	pq := f.pageQuery()
	if list.Next != "" {
		nq := f.pageQuery()
		nq.Set("cursor", list.Next)
		data.NextURL = "/?" + nq.Encode()
	}
	if cursor != "" {
		data.FirstURL = "/"
		if len(pq) > 0 {
			data.FirstURL += "?" + pq.Encode()
		}
	}
	if !f.empty() && !slices.Contains(f.Statuses, statusScheduled) {
		// A bulk operation filters by stored statuses only.
		data.All = f.operationFilter()
	}
	return "runs", data, nil
}
