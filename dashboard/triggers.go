package dashboard

import (
	"net/http"
	"net/url"
	"strconv"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/server"
)

// triggersData is the triggers page's: every trigger, and what waits in
// the groups of those that debounce, throttle or batch.
type triggersData struct {
	Triggers []*triggerItem
}

func (triggersData) PageTitle() string { return "Triggers" }
func (triggersData) Live() bool        { return true }

// triggerItem is a trigger with its open groups (a grouped trigger's).
type triggerItem struct {
	*server.Trigger
	// Grouped: the trigger debounces, throttles or batches its events.
	Grouped bool
	Open    []*hephaestus.TriggerGroup
	// More: the trigger has more open groups than the page shows.
	More bool
}

// openGroupsShown bounds the open groups shown of each trigger.
const openGroupsShown = 20

// triggersPage lists the triggers, declared in code and managed, with
// their flow control and, for those that group their events, the
// groups that wait: their key, when they are due and how many events
// they hold.
func (d *Dashboard) triggersPage(r *http.Request) (string, any, error) {
	var list server.TriggerList
	if err := d.get(r, "/api/v1/triggers", nil, &list); err != nil {
		return "", nil, err
	}
	data := &triggersData{}
	for _, t := range list.Triggers {
		it := &triggerItem{Trigger: t, Grouped: t.Debounce != "" || t.Throttle != nil || t.Batch != nil}
		if it.Grouped {
			var page hephaestus.TriggerGroupPage
			q := url.Values{"status": {hephaestus.GroupOpen}, "limit": {strconv.Itoa(openGroupsShown)}}
			if err := d.get(r, "/api/v1/triggers/"+url.PathEscape(t.Name)+"/groups", q, &page); err != nil {
				return "", nil, err
			}
			it.Open, it.More = page.Groups, page.Next != 0
		}
		data.Triggers = append(data.Triggers, it)
	}
	return "triggers", data, nil
}
