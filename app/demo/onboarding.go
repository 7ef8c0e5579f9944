package demo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hephaestus-go/hephaestus/workflow"
)

// Signup is the input of example.onboarding.
type Signup struct {
	Customer string `json:"customer"`
	Email    string `json:"email"`
	Region   string `json:"region"`
}

// Account is the result of example.onboarding.
type Account struct {
	ID        string `json:"id"`
	Plan      string `json:"plan"`
	Workspace string `json:"workspace"`
	Welcome   string `json:"welcome"`
}

// Status is what an onboarding publishes; the status query answers it.
type Status struct {
	Stage string `json:"stage"`
	Plan  string `json:"plan,omitempty"`
}

// The stages an onboarding publishes.
const (
	StageProvisioning = "provisioning"
	StageActivation   = "awaiting activation"
	StageGrace        = "grace period"
	StageActive       = "active"
)

// Activation is the payload of the activate signal.
type Activation struct {
	By string `json:"by"`
}

// WorkspaceRequest is the input of the child workflow example.workspace.
type WorkspaceRequest struct {
	Account string `json:"account"`
	Plan    string `json:"plan"`
	Region  string `json:"region"`
}

// The onboarding's messages: the change_plan update (validated), the
// activate signal that ends its waiting phase, and the status query.
var (
	ChangePlan  = workflow.NewUpdate[string, Status]("change_plan")
	Activate    = workflow.NewSignal[Activation]("activate")
	StatusQuery = workflow.NewQuery[struct{}, Status]("status")
)

// plans are the plans change_plan accepts.
var plans = []string{"free", "team", "enterprise"}

// GracePeriod is the durable timer between activation and provisioning.
const GracePeriod = 2 * time.Second

// The onboarding's activities: stand-ins for an account service, a mailer
// and a workspace provisioner.
var (
	createAccount = workflow.NewActivity(activityPrefix+"create_account", func(ctx context.Context, s Signup) (string, error) {
		return "acct-" + s.Customer, nil
	})
	sendWelcome = workflow.NewActivity(activityPrefix+"send_welcome", func(ctx context.Context, s Signup) (string, error) {
		return "welcome mail sent to " + s.Email, nil
	})
	createWorkspace = workflow.NewActivity(activityPrefix+"create_workspace", func(ctx context.Context, w WorkspaceRequest) (string, error) {
		return fmt.Sprintf("ws-%s-%s", w.Region, w.Account), nil
	})
)

// WorkspaceWorkflow provisions an account's workspace: the child of an
// onboarding.
var WorkspaceWorkflow = workflow.New(Workspace, func(ctx workflow.Context, w WorkspaceRequest) (string, error) {
	return createWorkspace.Execute(ctx, w)
})

// OnboardingWorkflow creates an account and mails a welcome at once (a
// parallel pair of activities), waits in a phase for the activate signal
// while change_plan updates may change the plan, sleeps a grace period (a
// durable timer), then provisions a workspace in a child workflow.
var OnboardingWorkflow = workflow.New(Onboarding, func(ctx workflow.Context, s Signup) (Account, error) {
	workflow.Publish(ctx, Status{Stage: StageProvisioning})
	rs := workflow.Parallel(ctx,
		func(ctx workflow.Context) (string, error) { return createAccount.Execute(ctx, s) },
		func(ctx workflow.Context) (string, error) { return sendWelcome.Execute(ctx, s) },
	)
	for _, r := range rs {
		if r.Err != nil {
			return Account{}, r.Err
		}
	}
	acct := Account{ID: rs[0].Value, Welcome: rs[1].Value}
	workflow.Publish(ctx, Status{Stage: StageActivation, Plan: "free"})
	st, err := workflow.Phase(ctx, Status{Stage: StageActivation, Plan: "free"},
		workflow.HandleUpdate(ChangePlan, func(ctx workflow.Context, plan string, st Status) (workflow.Reply[Status, Status], error) {
			st.Plan = plan
			workflow.Publish(ctx, st)
			return workflow.Respond(st, st), nil
		}).Validate(func(plan string, _ Status) error {
			if !slices.Contains(plans, plan) {
				return fmt.Errorf("plan %q: want one of %v", plan, plans)
			}
			return nil
		}),
		workflow.HandleSignal(Activate, func(ctx workflow.Context, _ Activation, st Status) workflow.Next[Status] {
			return workflow.Stop(st)
		}),
	)
	if err != nil {
		return Account{}, err
	}
	acct.Plan = st.Plan
	workflow.Publish(ctx, Status{Stage: StageGrace, Plan: st.Plan})
	if err := workflow.Sleep(ctx, GracePeriod); err != nil {
		return Account{}, err
	}
	ws, err := WorkspaceWorkflow.ExecuteChild(ctx, WorkspaceRequest{Account: acct.ID, Plan: st.Plan, Region: s.Region})
	if err != nil {
		return Account{}, err
	}
	acct.Workspace = ws
	workflow.Publish(ctx, Status{Stage: StageActive, Plan: st.Plan})
	return acct, nil
}).Declare(ChangePlan, Activate)

func init() {
	workflow.HandleQuery(OnboardingWorkflow, StatusQuery, func(s Status, _ struct{}) (Status, error) {
		return s, nil
	})
}
