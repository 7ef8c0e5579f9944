package hephaestus

import (
	"context"
	"fmt"

	"github.com/hephaestus-go/hephaestus/businesskey"
	"github.com/hephaestus-go/hephaestus/store"
)

// Facade addresses the runs of one flow by business value instead of run
// id: Start("1234", input) starts run "orderid::1234", Get("1234") finds
// it. Get, Resume and Cancel act on the newest run with that value; a flow
// whose key scope is ScopeNone gives runs distinct ids, so for it only
// Start and List are available.
type Facade struct {
	c    *Client
	flow string
	key  string
	none bool
}

// Facade returns the facade of a registered flow that declares a business
// key.
func (c *Client) Facade(flowName string) (*Facade, error) {
	f, err := c.lookupFlow(context.Background(), flowName, 0)
	if err != nil {
		return nil, err
	}
	key, scope := f.BusinessKey()
	if key == "" {
		return nil, fmt.Errorf("facade of %q: the flow declares no business key; add one with BusinessKey", flowName)
	}
	return &Facade{c: c, flow: flowName, key: key, none: scope == businesskey.ScopeNone}, nil
}

// Start starts a run for the business value.
func (f *Facade) Start(ctx context.Context, value string, input any) (*Run, error) {
	return f.c.StartRun(ctx, f.flow, input, &StartOptions{BusinessValue: value})
}

func (f *Facade) id(op, value string) (string, error) {
	if f.none {
		return "", fmt.Errorf("%s %q: flow %q has key scope none, so a value names no single run; use List", op, value, f.flow)
	}
	bid, err := businesskey.Build(f.key, value)
	if err != nil {
		return "", fmt.Errorf("%s: %w: %w", op, ErrInvalidInput, err)
	}
	return bid, nil
}

// Get returns the newest run for the business value.
func (f *Facade) Get(ctx context.Context, value string) (*Run, error) {
	bid, err := f.id("get", value)
	if err != nil {
		return nil, err
	}
	r, err := f.c.cfg.Store.FindRun(ctx, &store.FindRunParams{Workflow: f.flow, BusinessID: bid})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", bid, err)
	}
	return f.c.toRun(r), nil
}

// Resume resumes the waiting run of the business value with an event.
func (f *Facade) Resume(ctx context.Context, value, event string, opts *ResumeOptions) error {
	r, err := f.Get(ctx, value)
	if err != nil {
		return err
	}
	return f.c.ResumeRun(ctx, r.ID, event, opts)
}

// Cancel cancels the run of the business value.
func (f *Facade) Cancel(ctx context.Context, value, reason string) error {
	r, err := f.Get(ctx, value)
	if err != nil {
		return err
	}
	return f.c.CancelRun(ctx, r.ID, reason)
}

// List lists the flow's runs; opts.Flow is ignored.
func (f *Facade) List(ctx context.Context, opts *ListOptions) (*RunList, error) {
	o := ListOptions{}
	if opts != nil {
		o = *opts
	}
	o.Flow = f.flow
	return f.c.ListRuns(ctx, &o)
}
