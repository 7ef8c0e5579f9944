package demo

import (
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
)

// RemoteFlow is example.thumbnails, a Go flow whose steps only HTTP
// workers run (in any language, e.g. the Python and TypeScript SDKs'
// examples): fetch (handler example.fetch_image) receives the step's
// input document, {"input": <run input>}; resize (handler
// example.resize) is a map step whose elements, the run input's
// "sizes", are a task each; the run's output is resize's, the outputs in
// input order. The server has no code for either handler, so a run
// waits until a worker claims them. Seed starts no run of it.
const RemoteFlow = "example.thumbnails"

// The handlers of example.thumbnails' steps.
const (
	FetchHandler  = "example.fetch_image"
	ResizeHandler = "example.resize"
)

func remoteFlow() *flow.Flow {
	b := flow.New(RemoteFlow).Version(1).Metadata(map[string]any{"owner": "media"})
	retry := flow.Retry(flow.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second, Multiplier: 2})
	flow.Remote(b, "fetch", FetchHandler, retry)
	flow.RemoteMap(b, "resize", ResizeHandler, flow.Over("", "sizes"), retry)
	return b.Start("fetch").
		Edge("fetch", flow.EventOK, "resize").
		Edge("resize", flow.EventOK, flow.Done).
		MustBuild()
}
