package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hephaestus-go/hephaestus/server"
)

// operationsData is the bulk operations page's.
type operationsData struct {
	Operations []*server.Operation
	NextURL    string
}

func (operationsData) PageTitle() string { return "Operations" }
func (operationsData) Live() bool        { return true }

// operationsPage lists the bulk operations, newest first, with their
// progress.
func (d *Dashboard) operationsPage(r *http.Request) (string, any, error) {
	q := url.Values{"limit": {"50"}}
	if c := r.URL.Query().Get("cursor"); c != "" {
		q.Set("cursor", c)
	}
	var list server.OperationList
	if err := d.get(r, "/api/v1/operations", q, &list); err != nil {
		return "", nil, err
	}
	data := &operationsData{Operations: list.Operations}
	if list.Next != "" {
		data.NextURL = "/operations?cursor=" + url.QueryEscape(list.Next)
	}
	return "operations", data, nil
}

// filterText says what a bulk operation's filter selects, briefly.
func filterText(f server.RunFilter) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	add("kind", f.Kind)
	add("status", strings.Join(f.Statuses, "|"))
	add("workflow", f.Workflow)
	if f.Version > 0 {
		add("version", strconv.Itoa(f.Version))
	}
	add("parent", f.Parent)
	add("queue", f.Queue)
	add("tags", strings.Join(f.Tags, ","))
	for k, v := range f.Metadata {
		add("meta."+k, v)
	}
	if f.CreatedAfter != nil {
		add("created_after", stamp(*f.CreatedAfter))
	}
	if f.CreatedBefore != nil {
		add("created_before", stamp(*f.CreatedBefore))
	}
	add("q", f.Q)
	if len(f.IDs) > 0 {
		parts = append(parts, strconv.Itoa(len(f.IDs))+" selected runs")
	}
	return strings.Join(parts, " ")
}
