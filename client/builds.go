package client

import (
	"context"
	"net/http"
)

// WorkflowBuilds lists the builds of a workflow, the newest first.
func (c *Client) WorkflowBuilds(ctx context.Context, workflow string) ([]WorkflowBuild, *Response, error) {
	return list[WorkflowBuild](ctx, c, &request{method: http.MethodGet, path: "/workflows/" + seg(workflow) + "/builds"})
}

// RetireBuild retires a build of a workflow (refused, 409, while it has
// open runs) and returns the workflow's builds.
func (c *Client) RetireBuild(ctx context.Context, workflow, build string) ([]WorkflowBuild, *Response, error) {
	return list[WorkflowBuild](ctx, c, &request{method: http.MethodPost, path: "/workflows/" + seg(workflow) + "/builds/" + seg(build) + "/retire", body: struct{}{}})
}
