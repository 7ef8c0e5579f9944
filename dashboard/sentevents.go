package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hephaestus-go/hephaestus/server"
)

// The events pages show the events sent to the engine (POST
// /api/v1/events; docs/events.md), not a run's history entries
// (events.go): /events lists them, newest first, filtered by name or by a
// field of their data; /events/{id} shows one with what the triggers did
// with it. A run a trigger started links back to its event (startedBy).

// eventsPageSize and eventsMax bound a page of the events list.
const (
	eventsPageSize = 50
	// eventsMax is below the API's MaxEventsPage (1000): each row reads
	// its event's firings, one call of the API.
	eventsMax = 200
	// previewRunes bounds the data shown in a row of the list.
	previewRunes = 80
)

// eventFilter is the events list's filter, as its form and URL carry it.
type eventFilter struct {
	Name, Field, Value string
	// BeforeSeq is the cursor: the list starts after the event with this
	// seq (0: the newest).
	BeforeSeq int64
	Limit     int
}

// parseEventFilter reads the filter from the page's query.
func parseEventFilter(q url.Values) (*eventFilter, error) {
	f := &eventFilter{Name: strings.TrimSpace(q.Get("name")), Field: strings.TrimSpace(q.Get("field")),
		Value: strings.TrimSpace(q.Get("value")), Limit: eventsPageSize}
	if v := q.Get("before_seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return nil, badRequest("before_seq %q: want a positive event seq", v)
		}
		f.BeforeSeq = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > eventsMax {
			return nil, badRequest("limit %q: want a number from 1 to %d", v, eventsMax)
		}
		f.Limit = n
	}
	return f, nil
}

// filterValue is the value as the API takes it: a JSON scalar as typed
// (42, true, "42"), or else the text as a JSON string (acme).
func filterValue(v string) string {
	if v == "" {
		return ""
	}
	var x any
	if json.Unmarshal([]byte(v), &x) == nil {
		switch x.(type) {
		case string, float64, bool:
			return v
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// apiQuery is the filter as GET /api/v1/events takes it.
func (f *eventFilter) apiQuery() url.Values {
	q := f.pageQuery()
	q.Del("value")
	if f.Value != "" {
		q.Set("value", filterValue(f.Value))
	}
	q.Set("limit", strconv.Itoa(f.Limit))
	if f.BeforeSeq > 0 {
		q.Set("before_seq", strconv.FormatInt(f.BeforeSeq, 10))
	}
	return q
}

// pageQuery is the filter as this page's URL carries it, without the
// cursor.
func (f *eventFilter) pageQuery() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"name": f.Name, "field": f.Field, "value": f.Value} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit != eventsPageSize {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

// Filtered reports whether the filter narrows the list.
func (f *eventFilter) Filtered() bool { return f.Name != "" || f.Field != "" || f.Value != "" }

// eventsData is the events list's.
type eventsData struct {
	Filter *eventFilter
	Events []*eventItem
	// NextURL pages on to older events; FirstURL goes back to the newest
	// (set when this is not the first page).
	NextURL, FirstURL string
	// Problem is the API's refusal of the filter (a bad field path, or a
	// field filter on a server whose payload codec encodes event data).
	Problem *server.Problem
}

func (eventsData) PageTitle() string { return "Events" }

// Live: the first page refreshes itself; an older page does not change.
func (d *eventsData) Live() bool { return d.Filter.BeforeSeq == 0 && d.Problem == nil }

// eventItem is an event as the list shows it.
type eventItem struct {
	*server.SentEvent
	// URL is the event's page.
	URL string
	// Preview is the start of its data, compact.
	Preview string
	// Firings counts what the triggers did with it, by status.
	Firings []firingCount
}

// firingCount is how many of an event's firings have a status.
type firingCount struct {
	Status string
	N      int
}

// eventURL is the page of an event.
func eventURL(id string) string { return "/events/" + url.PathEscape(id) }

// eventsPage lists the events the filter keeps, newest first, a page at
// a time, each with what the triggers did with it.
func (d *Dashboard) eventsPage(r *http.Request) (string, any, error) {
	f, err := parseEventFilter(r.URL.Query())
	if err != nil {
		return "", nil, err
	}
	data := &eventsData{Filter: f}
	var list server.SentEventList
	var ae *apiError
	err = d.get(r, "/api/v1/events", f.apiQuery(), &list)
	switch {
	case errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusUnprocessableEntity):
		data.Problem = &ae.Problem
		return "sentevents", data, nil
	case err != nil:
		return "", nil, err
	}
	for _, e := range list.Events {
		it := &eventItem{SentEvent: e, URL: eventURL(e.ID), Preview: preview(e.Data)}
		// The list has no firings: the event's own answer has them.
		var full server.SentEvent
		if err := d.get(r, "/api/v1/events/"+url.PathEscape(e.ID), nil, &full); err != nil && !isNotFound(err) {
			return "", nil, err
		}
		it.Firings = countFirings(&full)
		data.Events = append(data.Events, it)
	}
	if list.Next > 0 {
		nq := f.pageQuery()
		nq.Set("before_seq", strconv.FormatInt(list.Next, 10))
		data.NextURL = "/events?" + nq.Encode()
	}
	if f.BeforeSeq > 0 {
		data.FirstURL = "/events"
		if pq := f.pageQuery(); len(pq) > 0 {
			data.FirstURL += "?" + pq.Encode()
		}
	}
	return "sentevents", data, nil
}

// countFirings counts an event's firings by status, in the order the
// statuses come.
func countFirings(e *server.SentEvent) []firingCount {
	var out []firingCount
next:
	for _, f := range e.Firings {
		for i := range out {
			if out[i].Status == f.Status {
				out[i].N++
				continue next
			}
		}
		out = append(out, firingCount{Status: f.Status, N: 1})
	}
	return out
}

// preview is the start of an event's data, compact, for a row.
func preview(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	s := string(raw)
	if json.Compact(&b, raw) == nil {
		s = string(htmlUnescaped(b.Bytes()))
	}
	if utf8.RuneCountInString(s) <= previewRunes {
		return s
	}
	return string([]rune(s)[:previewRunes-1]) + "…"
}

// eventData is an event's page.
type eventData struct {
	Event *server.SentEvent
	// Data is the event's data, indented.
	Data    string
	Firings []firingRow
	// Waits are the runs' waits the event matched.
	Waits []eventWaitRow
}

func (d *eventData) PageTitle() string { return "Event " + d.Event.Name }

// Live: the page refreshes while a trigger has yet to act.
func (d *eventData) Live() bool {
	for _, f := range d.Firings {
		if f.Status == "pending" {
			return true
		}
	}
	return false
}

// firingRow is what a trigger did with the event.
type firingRow struct {
	Trigger, Status, RunID, Error string
	// RunURL is the page of the run the trigger started ("" until it
	// has started one).
	RunURL string
}

// eventPage shows an event: its data and its firings.
func (d *Dashboard) eventPage(r *http.Request) (string, any, error) {
	id := r.PathValue("id")
	e := &server.SentEvent{}
	if err := d.get(r, "/api/v1/events/"+url.PathEscape(id), nil, e); err != nil {
		if isNotFound(err) {
			return "", nil, &pageError{status: http.StatusNotFound, msg: "no event has the id " + strconv.Quote(id) + " (or it was deleted by the event retention)"}
		}
		return "", nil, err
	}
	data := &eventData{Event: e, Data: string(htmlUnescaped([]byte(prettyJSON(e.Data))))}
	for _, f := range e.Firings {
		row := firingRow{Trigger: f.Trigger, Status: f.Status, RunID: f.RunID, Error: f.Error}
		if f.Status == "started" && f.RunID != "" {
			row.RunURL = "/runs/" + url.PathEscape(f.RunID)
		}
		data.Firings = append(data.Firings, row)
	}
	data.Waits = eventWaitRows(e.Waits)
	return "sentevent", data, nil
}

// startedBy is the event whose trigger started a run.
type startedBy struct {
	EventID, Trigger string
	// URL is the event's page.
	URL string
	// Name is the event's name; Gone: the event is no longer stored
	// (the event retention deleted it).
	Name string
	Gone bool
}

// runStartedBy reads the event that started a run through a trigger:
// such a run has the metadata "event" (its id) and "trigger" (the
// trigger's name), both strings.
func (d *Dashboard) runStartedBy(r *http.Request, run *server.Run) (*startedBy, error) {
	id, ok := metaString(run.Metadata["event"])
	trigger, ok2 := metaString(run.Metadata["trigger"])
	if !ok || !ok2 || id == "" {
		return nil, nil
	}
	sb := &startedBy{EventID: id, Trigger: trigger, URL: eventURL(id)}
	var e server.SentEvent
	err := d.get(r, "/api/v1/events/"+url.PathEscape(id), nil, &e)
	switch {
	case err == nil:
		sb.Name = e.Name
	case isNotFound(err):
		sb.Gone = true
	case isForbidden(err):
		// A role that reads the run but not events (an approver's):
		// the id, without a link it may not follow.
		sb.URL = ""
	default:
		return nil, fmt.Errorf("read the event %q that started the run: %w", id, err)
	}
	return sb, nil
}

// isForbidden reports whether err is the API's 403.
func isForbidden(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusForbidden
}

// metaString is a metadata value that is a JSON string.
func metaString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// htmlUnescaped undoes, in the strings of a JSON text, the escapes of <,
// > and & that encoding/json writes (\u003c, \u003e, \u0026), so that the
// page shows the data as it was sent; html/template escapes what it
// shows.
func htmlUnescaped(js []byte) []byte {
	out := make([]byte, 0, len(js))
	in := false
	for i := 0; i < len(js); i++ {
		c := js[i]
		switch {
		case c == '"':
			in = !in
		case c == '\\' && in && i+5 < len(js) && js[i+1] == 'u':
			switch strings.ToLower(string(js[i+2 : i+6])) {
			case "003c":
				out, i = append(out, '<'), i+5
				continue
			case "003e":
				out, i = append(out, '>'), i+5
				continue
			case "0026":
				out, i = append(out, '&'), i+5
				continue
			}
			fallthrough
		case c == '\\' && in && i+1 < len(js):
			// Another escape, kept whole (an escaped quote or backslash
			// must not end the string).
			out, i = append(out, c, js[i+1]), i+1
			continue
		}
		out = append(out, c)
	}
	return out
}
