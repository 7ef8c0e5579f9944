package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus/server"
)

// schedulesData is the schedules page's.
type schedulesData struct {
	Schedules []*scheduleItem
	// More: the API has more schedules than the page shows.
	More bool
}

func (schedulesData) PageTitle() string { return "Schedules" }
func (schedulesData) Live() bool        { return true }

// scheduleItem is a schedule with its next fire times, its latest ticks
// and the runs triggered by hand.
type scheduleItem struct {
	*server.Schedule
	Next      []time.Time
	Ticks     []server.ScheduleRun
	Triggered []*server.Run
	// API is the schedule's path in the API.
	API string
}

// schedulesShown bounds the schedules of the page; nextShown and
// ticksShown the fire times and ticks shown of each.
const (
	schedulesShown = 200
	nextShown      = 3
	ticksShown     = 5
)

// schedulesPage lists the schedules, each with its next fire times and
// latest runs.
func (d *Dashboard) schedulesPage(r *http.Request) (string, any, error) {
	var list server.ScheduleList
	if err := d.get(r, "/api/v1/schedules", url.Values{"limit": {strconv.Itoa(schedulesShown)}}, &list); err != nil {
		return "", nil, err
	}
	data := &schedulesData{More: list.Next != ""}
	for _, s := range list.Schedules {
		it := &scheduleItem{Schedule: s, API: "/api/v1/schedules/" + url.PathEscape(s.ID)}
		if !s.Paused {
			if err := d.get(r, it.API+"/next", url.Values{"n": {strconv.Itoa(nextShown)}}, &it.Next); err != nil {
				return "", nil, err
			}
		}
		if err := d.get(r, it.API+"/runs", url.Values{"limit": {strconv.Itoa(ticksShown)}}, &it.Ticks); err != nil {
			return "", nil, err
		}
		// A run triggered by hand is not in the tick log: its id is
		// "<schedule id>@trigger-<random>".
		var runs server.RunList
		q := url.Values{"workflow": {s.TargetName}, "q": {s.ID + "@trigger-"}, "limit": {strconv.Itoa(ticksShown)}}
		if err := d.get(r, "/api/v1/runs", q, &runs); err != nil {
			return "", nil, err
		}
		it.Triggered = runs.Runs
		data.Schedules = append(data.Schedules, it)
	}
	return "schedules", data, nil
}
