// Package demo holds the example definitions heph server comes with and
// the runs it seeds on a store's first start, so that a fresh server's API
// and dashboard show each authoring model and each run state: a Go DAG
// flow (example.order), a Go flow whose steps HTTP workers run
// (example.thumbnails), a flow document with approval gates
// (example.expense), code-first workflows (example.onboarding and its
// child example.workspace), a job kind (example.email) and an hourly
// schedule (example.hourly-digest).
//
// Register registers the definitions on a client; Seed starts the example
// runs and steers them (an approval, an update, a signal) to the outcomes
// Expected lists. Everything is named with the prefix "example." and every
// seeded run is tagged Tag.
package demo

import (
	"context"
	"fmt"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// Tag is the tag of every seeded run.
const Tag = "example"

// The names of the example definitions.
const (
	OrderFlow   = "example.order"
	ExpenseDoc  = "example.expense"
	Onboarding  = "example.onboarding"
	Workspace   = "example.workspace"
	EmailJob    = "example.email"
	DigestID    = "example.hourly-digest"
	ManagerGate = "manager_approval"
	FinanceGate = "finance_approval"
	// ManagersGroup decides ManagerGate, FinanceGroup FinanceGate.
	ManagersGroup  = "managers"
	FinanceGroup   = "finance"
	actionCheck    = "example.check_expense"
	actionPay      = "example.reimburse"
	actionNotify   = "example.notify"
	activityPrefix = "example."
)

// Register registers the examples on c: the order flow, the onboarding
// workflows and their activities, the email job kind (which declares the
// hourly schedule), the document's Go actions in reg, and the expense
// document in the store (a new version only when its content changed).
// Call it before c.RegisterDocuments(ctx, reg) and c.Start.
func Register(ctx context.Context, c *hephaestus.Client, reg *flowdoc.Registry) error {
	if err := registerActions(reg); err != nil {
		return fmt.Errorf("register the example actions: %w", err)
	}
	if _, err := flowdoc.Load(ExpenseDoc+".yaml", expenseYAML, reg); err != nil {
		return fmt.Errorf("the example document: %w", err)
	}
	if _, err := c.PutDocument(ctx, ExpenseDoc, hephaestus.DocumentYAML, expenseYAML); err != nil {
		return fmt.Errorf("store the example document: %w", err)
	}
	if err := c.Register(orderFlow()); err != nil {
		return fmt.Errorf("register %s: %w", OrderFlow, err)
	}
	if err := c.Register(remoteFlow()); err != nil {
		return fmt.Errorf("register %s: %w", RemoteFlow, err)
	}
	if err := c.RegisterWorkflows(OnboardingWorkflow, WorkspaceWorkflow); err != nil {
		return fmt.Errorf("register the example workflows: %w", err)
	}
	if err := c.RegisterActivities(createAccount, sendWelcome, createWorkspace); err != nil {
		return fmt.Errorf("register the example activities: %w", err)
	}
	if err := c.RegisterJobs(EmailKind); err != nil {
		return fmt.Errorf("register %s: %w", EmailJob, err)
	}
	return nil
}

// Outcome is how many seeded runs of a definition end in a status.
type Outcome struct {
	Name   string
	Status hephaestus.RunStatus
	Count  int
}

// Expected is what Seed leaves once the runtime has run what it started:
// the seeded runs (those tagged Tag) by definition and final status. The
// completed onboarding's child, a run of example.workspace, completes
// too; it has no tag.
func Expected() []Outcome {
	return []Outcome{
		{OrderFlow, hephaestus.StatusCompleted, 7}, // six shipped, one invalid (its steps skipped)
		{OrderFlow, hephaestus.StatusFailed, 1},    // the charge refused after its retries
		{ExpenseDoc, hephaestus.StatusWaiting, 2},  // alice's gate, bob's gate with a deadline
		{ExpenseDoc, hephaestus.StatusCompleted, 1},
		{Onboarding, hephaestus.StatusWaiting, 1}, // waits for its activate signal
		{Onboarding, hephaestus.StatusCompleted, 1},
		{EmailJob, hephaestus.StatusCompleted, 3},
		{EmailJob, hephaestus.StatusCancelled, 1}, // no address: the job cancels itself
		{EmailJob, hephaestus.StatusRunning, 1},   // its attempt is due in a day
	}
}
