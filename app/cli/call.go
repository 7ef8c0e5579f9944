package cli

import (
	"context"
	"io"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// call makes one request with a client of --addr, bounded by --timeout
// beyond wait (how long the request asks the server to wait), and prints
// the answer: its JSON with -o json, else what render writes of the value
// do returned. A request whose answer has no value of its own (a delete,
// an action) returns its response as the value.
func call[T any](parent context.Context, g *globals, wait time.Duration, do func(ctx context.Context, api *apiclient.Client) (T, *apiclient.Response, error), render func(w io.Writer, v T) error) error {
	api, err := g.api()
	if err != nil {
		return err
	}
	ctx, cancel := g.reqCtx(parent, wait)
	defer cancel()
	v, resp, err := do(ctx, api)
	if err != nil {
		return err
	}
	return g.emit(resp, func(w io.Writer) error { return render(w, v) })
}
