package client

import (
	"context"
	"net/http"
	"net/url"
)

// DeleteRun deletes a run with its history; force deletes an active run
// too. A run that is not there is a 404 *Error (also when an earlier
// attempt of the same delete did it).
func (c *Client) DeleteRun(ctx context.Context, id string, force bool) (*DeletedRun, *Response, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return call[DeletedRun](ctx, c, &request{method: http.MethodDelete, path: "/runs/" + seg(id), query: q})
}
