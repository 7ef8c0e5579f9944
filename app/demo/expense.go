package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
)

// expenseYAML is the example.expense flow document.
//
//go:embed expense.yaml
var expenseYAML []byte

// Expense is the input of example.expense.
type Expense struct {
	Employee string `json:"employee"`
	Amount   int    `json:"amount"`
	Category string `json:"category"`
}

// Checked is the output of the document's check step.
type Checked struct {
	Employee string `json:"employee"`
	Amount   int    `json:"amount"`
	Category string `json:"category"`
}

// registerActions registers the expense document's actions: Go functions
// standing in for an expense system, a payment service and a mailer.
func registerActions(reg *flowdoc.Registry) error {
	if err := flowdoc.RegisterAction(reg, actionCheck, func(ctx context.Context, _ flowdoc.ActionCall, e Expense) (Checked, error) {
		switch {
		case e.Amount <= 0:
			return Checked{}, flow.NonRetryable(fmt.Errorf("amount %d: an expense claim is positive", e.Amount))
		case strings.TrimSpace(e.Employee) == "":
			return Checked{}, flow.NonRetryable(errors.New("an expense claim names its employee"))
		}
		return Checked{Employee: e.Employee, Amount: e.Amount, Category: strings.ToLower(e.Category)}, nil
	}); err != nil {
		return err
	}
	if err := flowdoc.RegisterAction(reg, actionPay, func(ctx context.Context, c flowdoc.ActionCall, in struct {
		Employee string `json:"employee"`
		Amount   int    `json:"amount"`
	}) (map[string]any, error) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(c.IdempotencyKey)) // the same for each attempt: one transfer
		return map[string]any{"transfer": fmt.Sprintf("tr_%08x", h.Sum32()), "employee": in.Employee, "amount": in.Amount}, nil
	}); err != nil {
		return err
	}
	return flowdoc.RegisterAction(reg, actionNotify, func(ctx context.Context, _ flowdoc.ActionCall, in struct {
		User    string `json:"user"`
		Message string `json:"message"`
	}) (string, error) {
		return "to " + in.User + ": " + in.Message, nil
	})
}
