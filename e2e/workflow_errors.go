package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/workflow"
)

type declineDetails struct {
	Code int `json:"code"`
}

// testWfApplicationError: an *ApplicationError keeps its type, details and
// non-retryable flag from an activity to the workflow (errors.As through
// the *ActivityError) and from the workflow to its caller (errors.As
// through the *WorkflowError).
func testWfApplicationError(t *testing.T, b Backend) {
	var attempts atomic.Int32
	charge := workflow.NewActivity("card.charge", func(ctx context.Context, amount int) (string, error) {
		attempts.Add(1)
		return "", workflow.NewApplicationError("card_declined", fmt.Sprintf("%d declined", amount), declineDetails{Code: 51}, true)
	}).WithOptions(workflow.ActivityOptions{RetryPolicy: workflow.RetryPolicy{MaxAttempts: 5}})
	seen := make(chan string, 1)
	wf := workflow.New("pay", func(ctx workflow.Context, amount int) (string, error) {
		_, err := charge.Execute(ctx, amount)
		var app *workflow.ApplicationError
		var ae *workflow.ActivityError
		if !errors.As(err, &ae) || !errors.As(err, &app) {
			return "", fmt.Errorf("the activity's error %v (%T) carries no *ApplicationError", err, err)
		}
		//heph:nondeterministic-ok the test reads what the workflow saw; a non-blocking send changes no command
		select {
		case seen <- app.Type: //heph:nondeterministic-ok as above
		default:
		}
		return "", fmt.Errorf("payment: %w", err)
	})
	e := newWfEnv(t, b, nil, wfs(wf), charge)
	ctx := ctxT(t)
	_, err := heph.ExecuteWorkflow(ctx, e.c, wf, 42, nil)
	var we *heph.WorkflowError
	var app *workflow.ApplicationError
	if !errors.As(err, &we) || !errors.As(err, &app) {
		t.Fatalf("the run's error %v (%T): want a *WorkflowError carrying the *ApplicationError", err, err)
	}
	var d declineDetails
	if app.Type != "card_declined" || app.Message != "42 declined" || !app.NonRetryable || app.DecodeDetails(&d) != nil || d.Code != 51 {
		t.Fatalf("application error %+v, details %+v", app, d)
	}
	if got := <-seen; got != "card_declined" {
		t.Fatalf("the workflow saw type %q", got)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("a non-retryable application error was tried %d times, want 1", n)
	}
}
