package replay

import (
	"context"
	"encoding/json"
	"log/slog"
)

// ActivityFunc is activity code as the runtime calls it: JSON in, JSON
// out. The workflow package wraps typed functions into it.
type ActivityFunc func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// ActivityInfo describes one attempt of an activity. The runtime puts it
// in the context it calls activity code with (WithActivityInfo).
type ActivityInfo struct {
	RunID    string
	Workflow string
	Seq      int
	Name     string
	Attempt  int
	// IdempotencyKey is the same for every attempt of the activity:
	// "<run id>/<seq>".
	IdempotencyKey string
	// Heartbeat, when set, receives the details of each heartbeat: the
	// runtime extends the attempt's lease and keeps the last details.
	Heartbeat func(details any)
	// Details are the heartbeat details an earlier attempt recorded last.
	Details json.RawMessage
	// Logger, when set, is the attempt's logger (workflow.ActivityLogger).
	Logger *slog.Logger
	// Upsert, when set, takes search attributes the activity upserts
	// (workflow.UpsertActivitySearchAttributes): the runtime checks them
	// against the workflow's declaration and writes them with the
	// attempt's result.
	Upsert func(attrs map[string]any) error
}

type activityKey struct{}

// WithActivityInfo returns a context for activity code.
func WithActivityInfo(ctx context.Context, info *ActivityInfo) context.Context {
	return context.WithValue(ctx, activityKey{}, info)
}

// ActivityInfoFrom returns what ctx says of the running activity.
func ActivityInfoFrom(ctx context.Context) (*ActivityInfo, bool) {
	info, ok := ctx.Value(activityKey{}).(*ActivityInfo)
	return info, ok
}
