package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Logs returns a run's step logs (GET /runs/{id}/logs), waiting up to
// f.Wait on the server for a record (or the run's end) when none matches.
func (c *Client) Logs(ctx context.Context, id string, f *LogFilter) (*LogPage, *Response, error) {
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
	if f.Wait > 0 {
		q.Set("wait", f.Wait.String())
	}
	return call[LogPage](ctx, c, &request{method: http.MethodGet, path: "/runs/" + seg(id) + "/logs", query: q})
}
