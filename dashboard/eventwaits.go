package dashboard

import (
	"net/http"
	"net/url"

	"github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/server"
)

// eventWaitRow is a run's wait for an event, as the run page and the
// event page show it.
type eventWaitRow struct {
	ID, Event, Match, Step string
	// RunID and RunURL: the waiting run (the event page).
	RunID, RunURL string
	// MatchedID and MatchedURL: the event that matched ("" while none
	// did).
	MatchedID, MatchedURL string
	// Delivered: the event reached the run (or, unmatched, the wait was
	// closed).
	Delivered bool
}

func eventWaitRows(ws []*hephaestus.EventWait) []eventWaitRow {
	out := make([]eventWaitRow, 0, len(ws))
	for _, w := range ws {
		row := eventWaitRow{ID: w.ID, Event: w.Event, Match: w.Match, Step: w.Step, RunID: w.RunID,
			RunURL: "/runs/" + url.PathEscape(w.RunID), MatchedID: w.MatchedEventID, Delivered: !w.DeliveredAt.IsZero()}
		if w.MatchedEventID != "" {
			row.MatchedURL = eventURL(w.MatchedEventID)
		}
		out = append(out, row)
	}
	return out
}

// runEventWaits reads the waits for events of a run; a role that may
// not read them sees none.
func (d *Dashboard) runEventWaits(r *http.Request, runID string) ([]eventWaitRow, error) {
	var l server.EventWaitList
	if err := d.get(r, "/api/v1/runs/"+url.PathEscape(runID)+"/event-waits", nil, &l); err != nil {
		if isForbidden(err) || isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return eventWaitRows(l.Waits), nil
}
