package flow

import (
	"context"
	"time"
)

// Now returns the time by the runtime's clock for the step that ctx
// belongs to: the clock that schedules its tasks and snoozes (a fake one
// in tests that move time themselves), or
// the zero time outside a step or when the runtime sets none (this
// package is a pure core: it reads no clock of its own). A step that
// compares a time with when it will run again (a Snooze until a due time)
// reads it here.
func Now(ctx context.Context) time.Time {
	if c, ok := ctx.Value(callKey{}).(*Call); ok && c.Now != nil {
		return c.Now()
	}
	return time.Time{}
}
