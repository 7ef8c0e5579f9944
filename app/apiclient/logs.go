package apiclient

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hephaestus-go/hephaestus"
)

// LogPage is the answer of GET /runs/{id}/logs.
type LogPage = hephaestus.LogPage

// LogRecord is a record of a step's log.
type LogRecord = hephaestus.LogRecord

// LogFilter filters Logs; zero fields do not filter.
type LogFilter struct {
	Step    string
	Index   *int
	Attempt int
	Level   string
	After   int64
	Limit   int
}

// Logs returns a run's step logs (GET /runs/{id}/logs), waiting up to
// wait on the server for a record when none matches.
func (c *Client) Logs(ctx context.Context, id string, f *LogFilter, wait time.Duration) (*LogPage, *Response, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" && v != "0" {
			q.Set(k, v)
		}
	}
	set("step", f.Step)
	set("attempt", strconv.Itoa(f.Attempt))
	set("level", f.Level)
	set("after", strconv.FormatInt(f.After, 10))
	set("limit", strconv.Itoa(f.Limit))
	if f.Index != nil {
		q.Set("index", strconv.Itoa(*f.Index))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	return call[LogPage](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/logs", query: q})
}
