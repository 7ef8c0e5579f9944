// Package good is a deterministic workflow with an activity that may do
// anything: heph vet reports nothing.
package good

import (
	"context"
	"os"
	"time"

	"github.com/hephaestus-go/hephaestus/workflow"
)

// Host reads the host name: an activity.
var Host = workflow.NewActivity("host", func(ctx context.Context, _ struct{}) (string, error) {
	return os.Hostname()
})

// Later sleeps on a durable timer and asks the activity.
var Later = workflow.New("later", func(ctx workflow.Context, d time.Duration) (string, error) {
	if err := workflow.Sleep(ctx, d); err != nil {
		return "", err
	}
	host, err := Host.Execute(ctx, struct{}{})
	return host + " " + workflow.Now(ctx).String(), err
})
