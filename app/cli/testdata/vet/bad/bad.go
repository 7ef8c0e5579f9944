// Package bad is a workflow that reads the clock and sleeps on it: heph
// vet and go vet -vettool=heph report both lines.
package bad

import (
	"time"

	"github.com/hephaestus-go/hephaestus/workflow"
)

// Late is not deterministic.
var Late = workflow.New("late", func(ctx workflow.Context, d time.Duration) (time.Time, error) {
	time.Sleep(d)
	return stamp(), nil
})

func stamp() time.Time { return time.Now() }
