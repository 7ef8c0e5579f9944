package dashboard

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// approvalsData is the approvals inbox's.
type approvalsData struct {
	// Assignee, Group and Workflow filter the inbox (empty: any).
	Assignee, Group, Workflow string
	Items                     []approvalItem
	Now                       time.Time
}

func (approvalsData) PageTitle() string { return "Approvals" }
func (approvalsData) Live() bool        { return true }

// Filtered reports whether a filter narrows the inbox.
func (a approvalsData) Filtered() bool { return a.Assignee != "" || a.Group != "" || a.Workflow != "" }

// approvalItem is a pending gate with the paths of its decisions.
type approvalItem struct {
	server.PendingApproval
	// ApproveAPI and RejectAPI are the API's paths that decide the gate.
	ApproveAPI, RejectAPI string
	// Overdue: the deadline has passed (the gate expires at its next
	// timer).
	Overdue bool
	// Soon: the deadline is within a day.
	Soon bool
	// Fields are the decision dialog's: a comment and, for a gate that
	// names groups, the groups the caller decides as.
	Fields []field
}

// approvalsPage lists the gates waiting for a decision, oldest first,
// filtered by assignee, group and definition.
func (d *Dashboard) approvalsPage(r *http.Request) (string, any, error) {
	pq := r.URL.Query()
	data := &approvalsData{Assignee: strings.TrimSpace(pq.Get("assignee")), Group: strings.TrimSpace(pq.Get("group")),
		Workflow: strings.TrimSpace(pq.Get("workflow")), Now: d.cfg.Now()}
	q := url.Values{}
	for k, v := range map[string]string{"assignee": data.Assignee, "group": data.Group, "workflow": data.Workflow} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var list []server.PendingApproval
	if err := d.get(r, "/api/v1/approvals", q, &list); err != nil {
		return "", nil, err
	}
	for _, p := range list {
		base := "/api/v1/runs/" + url.PathEscape(p.RunID) + "/steps/" + url.PathEscape(p.Step)
		it := approvalItem{PendingApproval: p, ApproveAPI: base + "/approve", RejectAPI: base + "/reject",
			Fields: []field{{Name: "comment", Label: "Comment", Type: "textarea"}}}
		if len(p.Groups) > 0 {
			eg, _ := json.Marshal(p.Groups[:1])
			it.Fields = append(it.Fields, field{Name: "groups", Label: "Groups you decide as (a JSON list; a gate of groups " +
				strings.Join(p.Groups, ", ") + " accepts their members)", Type: "json", Placeholder: string(eg)})
		}
		if p.Deadline != nil {
			left := p.Deadline.Sub(data.Now)
			it.Overdue = left <= 0
			it.Soon = left > 0 && left < 24*time.Hour
		}
		data.Items = append(data.Items, it)
	}
	return "approvals", data, nil
}
