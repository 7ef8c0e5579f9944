// Package shipping holds the definitions of the example worker process
// (examples/worker): a flow and a job kind that only the worker has.
package shipping

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
)

// Parcel is the shipment flow's input.
type Parcel struct {
	Order    string `json:"order"`
	WeightKg int    `json:"weight_kg"`
}

// Label is the label step's output.
type Label struct {
	Carrier  string `json:"carrier"`
	Tracking string `json:"tracking"`
}

// Flow prices a parcel, then prints its label.
var Flow = func() *flow.Flow {
	b := flow.New("shipment").Version(1).BusinessKey("order", flow.ScopeActive)
	flow.Input[Parcel](b)
	flow.Step(b, "quote", func(ctx context.Context, p Parcel) (int, error) {
		if p.WeightKg <= 0 {
			return 0, flow.NonRetryable(fmt.Errorf("weight_kg %d is not a weight", p.WeightKg))
		}
		return 5 + 2*p.WeightKg, nil
	})
	flow.Step(b, "label", func(ctx context.Context, p Parcel) (Label, error) {
		carrier := "post"
		if p.WeightKg > 20 {
			carrier = "freight"
		}
		return Label{Carrier: carrier, Tracking: carrier + "-" + p.Order}, nil
	}, flow.DependsOn("quote"))
	return b.MustBuild()
}()

// Bill is an invoice job's argument.
type Bill struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// Invoice sends an invoice; the same invoice (equal arguments) is sent at
// most once a day.
var Invoice = job.MustNew("invoice", func(ctx context.Context, j *job.Job[Bill]) error {
	if j.Args.Amount <= 0 {
		return job.Cancel(fmt.Sprintf("amount %d is not an amount", j.Args.Amount))
	}
	return nil
}, &job.Options[Bill]{MaxAttempts: 5, Timeout: 10 * time.Second, Unique: &job.Unique{ByArgs: true, Period: 24 * time.Hour}})

// NewClient returns a client of st with the shipment flow and the invoice
// job kind registered; cfg, when not nil, gives its other settings.
func NewClient(st store.Store, cfg *heph.Config) (*heph.Client, error) {
	c := heph.Config{Logger: slog.Default()}
	if cfg != nil {
		c = *cfg
	}
	c.Store = st
	cl, err := heph.New(&c)
	if err != nil {
		return nil, err
	}
	if err := cl.Register(Flow); err != nil {
		return nil, err
	}
	if err := cl.RegisterJobs(Invoice); err != nil {
		return nil, err
	}
	return cl, nil
}
