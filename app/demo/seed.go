package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Empty reports whether the store of c holds no run at all: a first
// start, which Seed is for.
func Empty(ctx context.Context, c *hephaestus.Client) (bool, error) {
	l, err := c.ListRuns(ctx, &hephaestus.ListOptions{Limit: 1})
	if err != nil {
		return false, fmt.Errorf("list runs: %w", err)
	}
	return len(l.Runs) == 0, nil
}

// The seeded orders: six that ship, one with no items (invalid: it ends at
// validate_order) and one whose total the card refuses (it fails after
// the charge's retries; retry it from the failed step).
var orders = []Order{
	{ID: "ord-1001", Customer: "ada", Region: "eu", Items: []Line{{"BOOK-001", 2, 1999}, {"PEN-004", 5, 250}}},
	{ID: "ord-1002", Customer: "grace", Region: "us", Items: []Line{{"MUG-010", 1, 1200}}},
	{ID: "ord-1003", Customer: "linus", Region: "eu", Items: []Line{{"LAMP-220", 1, 4500}, {"BULB-011", 4, 300}, {"CORD-002", 1, 800}}},
	{ID: "ord-1004", Customer: "ken", Region: "us", Items: []Line{{"DESK-100", 1, 32000}}},
	{ID: "ord-1005", Customer: "barbara", Region: "apac", Items: []Line{{"BOOK-002", 3, 1599}}},
	{ID: "ord-1006", Customer: "margaret", Region: "us", Items: []Line{{"CHAIR-300", 2, 18900}, {"MAT-012", 1, 2500}}},
	{ID: "ord-1007", Customer: "ada", Region: "eu"},
	{ID: "ord-1008", Customer: "grace", Region: "us", Items: []Line{{"SERVER-900", 1, 250000}}},
}

// The seeded expense claims: one for the group managers to approve, one
// (above 500, with a deadline) for the group finance, and one alice of
// managers approved, which completes. An admin decides the waiting ones
// with an approver token of the group (heph tokens create --user <name>
// --groups managers,finance --role approver).
var (
	expenses = []Expense{
		{Employee: "dana", Amount: 120, Category: "travel"},
		{Employee: "eve", Amount: 1800, Category: "equipment"},
		{Employee: "frank", Amount: 80, Category: "meals"},
	}
	expenseRegions = []string{"eu", "us", "eu"}
)

// The seeded onboardings: one waits for its activate signal, one is
// moved to the team plan and activated by the seed.
var signups = []Signup{
	{Customer: "hopper", Email: "hopper@example.com", Region: "us"},
	{Customer: "lovelace", Email: "lovelace@example.com", Region: "eu"},
}

// The seeded emails: three sent, one to no address (cancelled) and one
// due in a day (pending).
var emails = []struct {
	Email
	customer, region string
}{
	{Email{To: "ada@example.com", Subject: "Your order ord-1001 has shipped"}, "ada", "eu"},
	{Email{To: "grace@example.com", Subject: "Your order ord-1002 has shipped"}, "grace", "us"},
	{Email{To: "linus@example.com", Subject: "Your order ord-1003 has shipped"}, "linus", "eu"},
	{Email{To: "ada", Subject: "Your order ord-1007 needs items"}, "ada", "eu"},
	{Email{To: "ken@example.com", Subject: "How is your new desk?"}, "ken", "us"},
}

// reminderDelay is how long the last email waits: it stays pending.
const reminderDelay = 24 * time.Hour

func meta(kv ...string) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// Seed starts the example runs on c, a started client on which Register
// registered the examples, and steers them: it approves one expense claim
// as alice, and changes the plan of one onboarding and activates it. It
// returns the ids of the runs it started; the runtime takes them to the
// outcomes Expected lists (the failed order after about three seconds of
// retries). Every run is tagged Tag and has "customer" (or "employee")
// and "region" in its metadata.
func Seed(ctx context.Context, c *hephaestus.Client) ([]string, error) {
	var ids []string
	tags := []string{Tag}
	for _, o := range orders {
		r, err := c.StartRun(ctx, OrderFlow, o, &hephaestus.StartOptions{BusinessValue: o.ID, Tags: tags,
			Metadata: meta("customer", o.Customer, "region", o.Region)})
		if err != nil {
			return ids, fmt.Errorf("start order %s: %w", o.ID, err)
		}
		ids = append(ids, r.ID)
	}
	var claims []string
	for i, e := range expenses {
		r, err := c.StartDocument(ctx, ExpenseDoc, 0, e, &hephaestus.StartOptions{Tags: tags, CreatedBy: e.Employee,
			Metadata: meta("employee", e.Employee, "region", expenseRegions[i])})
		if err != nil {
			return ids, fmt.Errorf("start the expense claim of %s: %w", e.Employee, err)
		}
		ids = append(ids, r.ID)
		claims = append(claims, r.ID)
	}
	var onboardings []string
	for _, s := range signups {
		r, err := hephaestus.StartWorkflow(ctx, c, OnboardingWorkflow, s, &hephaestus.WorkflowOptions{ID: "signup-" + s.Customer, Tags: tags,
			Metadata: meta("customer", s.Customer, "region", s.Region)})
		if err != nil {
			return ids, fmt.Errorf("start the onboarding of %s: %w", s.Customer, err)
		}
		ids = append(ids, r.ID)
		onboardings = append(onboardings, r.ID)
	}
	for i, e := range emails {
		opts := &hephaestus.JobOptions{Tags: tags, Metadata: meta("customer", e.customer, "region", e.region)}
		if i == len(emails)-1 {
			opts.RunAfter = reminderDelay
		}
		j, err := hephaestus.InsertJob(ctx, c, EmailKind, e.Email, opts)
		if err != nil {
			return ids, fmt.Errorf("insert the email %q: %w", e.Subject, err)
		}
		ids = append(ids, j.ID)
	}

	// alice, of the group managers, approves frank's claim once its gate
	// waits.
	claim := claims[2]
	if err := until(ctx, c, claim, "its gate "+ManagerGate+" waits", func(r *hephaestus.Run) (bool, error) {
		s, ok := r.Step(ManagerGate)
		return ok && s.Status == hephtype.StepWaiting, nil
	}); err != nil {
		return ids, err
	}
	if _, err := c.Approve(ctx, claim, ManagerGate, hephaestus.Actor{ID: "alice", Groups: []string{ManagersGroup}}, "within the meals budget"); err != nil {
		return ids, fmt.Errorf("approve the expense claim %s: %w", claim, err)
	}

	// lovelace's onboarding moves to the team plan once it waits for its
	// activation (an update is accepted only by a phase), then is
	// activated.
	onb := onboardings[1]
	if err := until(ctx, c, onb, "it waits for its activation", func(r *hephaestus.Run) (bool, error) {
		raw, err := c.QueryWorkflow(ctx, onb)
		if err != nil || len(raw) == 0 {
			return false, nil // nothing published yet: not there
		}
		var st Status
		if err := json.Unmarshal(raw, &st); err != nil {
			return false, fmt.Errorf("the published status of %s: %w", onb, err)
		}
		return st.Stage == StageActivation, nil
	}); err != nil {
		return ids, err
	}
	if _, err := hephaestus.RunUpdate(ctx, c, onb, ChangePlan, "team", nil); err != nil {
		return ids, fmt.Errorf("change the plan of %s: %w", onb, err)
	}
	if err := hephaestus.SendSignal(ctx, c, onb, Activate, Activation{By: "lovelace"}); err != nil {
		return ids, fmt.Errorf("activate %s: %w", onb, err)
	}
	return ids, nil
}

// followWait bounds each wait for a run's next history entry: a change
// that no entry marks (a published state) is seen within it.
const followWait = 250 * time.Millisecond

// until waits until ok holds for the run, following its history; it fails
// if the run ends first or ctx ends.
func until(ctx context.Context, c *hephaestus.Client, runID, what string, ok func(*hephaestus.Run) (bool, error)) error {
	var seq int64
	for {
		r, err := c.GetRun(ctx, runID)
		if err != nil {
			return fmt.Errorf("wait until run %s: %w", runID, err)
		}
		done, err := ok(r)
		switch {
		case err != nil:
			return err
		case done:
			return nil
		case r.Status.Terminal():
			return fmt.Errorf("run %s of %s ended %s before %s", runID, r.Flow, r.Status, what)
		}
		evs, err := c.HistoryAfter(ctx, runID, seq, followWait)
		if err != nil {
			return fmt.Errorf("wait until run %s %s: %w", runID, what, err)
		}
		if len(evs) > 0 {
			seq = evs[len(evs)-1].Seq
		}
	}
}
