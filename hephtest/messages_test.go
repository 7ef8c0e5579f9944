package hephtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtest"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var (
	addBook    = workflow.NewUpdate[string, int]("add_book")
	lendBook   = workflow.NewUpdate[string, bool]("lend_book")
	closeShelf = workflow.NewSignal[struct{}]("close")
	booksBy    = workflow.NewQuery[string, int]("books_by")
)

var library = func() *workflow.Definition[struct{}, []string] {
	d := workflow.New("library", func(ctx workflow.Context, _ struct{}) ([]string, error) {
		return workflow.Phase(ctx, []string(nil),
			workflow.HandleUpdate(addBook, func(ctx workflow.Context, b string, s []string) (workflow.Reply[[]string, int], error) {
				s = append(s, b)
				workflow.Publish(ctx, s)
				return workflow.Respond(s, len(s)), nil
			}).Validate(func(b string, _ []string) error {
				if b == "" {
					return errors.New("a book needs a title")
				}
				return nil
			}),
			workflow.HandleSignal(closeShelf, func(ctx workflow.Context, _ struct{}, s []string) workflow.Next[[]string] {
				return workflow.Stop(s)
			}),
		)
	}).Declare(addBook, lendBook, closeShelf)
	workflow.HandleQuery(d, booksBy, func(s []string, prefix string) (int, error) {
		if prefix == "" {
			return 0, errors.New("a prefix, please")
		}
		n := 0
		for _, b := range s {
			if strings.HasPrefix(b, prefix) {
				n++
			}
		}
		return n, nil
	})
	return d
}()

// The env reports messages as the runtime does: typed updates, signals
// and queries, and distinct errors for an undeclared name, a declared one
// no phase accepts, a validator's rejection and a failing query.
func TestWorkflowEnvMessages(t *testing.T) {
	ctx := context.Background()
	e := hephtest.NewWorkflowEnv(nil, library)
	defer e.Close()
	r, err := hephtest.StartWorkflow(e, library, struct{}{})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range []string{"go in action", "gopl", "rust"} {
		if n, err := hephtest.RunUpdate(ctx, r, addBook, b); err != nil || n != i+1 {
			t.Fatalf("add %q: %d, %v", b, n, err)
		}
	}
	var rej *heph.UpdateRejectedError
	if _, err := hephtest.RunUpdate(ctx, r, addBook, ""); !errors.As(err, &rej) || !errors.Is(err, heph.ErrUpdateInvalid) || rej.Err.Error() != "a book needs a title" {
		t.Fatalf("a refused update: %v; want the validator's error, ErrUpdateInvalid", err)
	}
	if _, err := hephtest.RunUpdate(ctx, r, lendBook, "gopl"); !errors.Is(err, heph.ErrUpdateNotAccepted) || errors.Is(err, heph.ErrUnknownUpdate) {
		t.Fatalf("a declared update no phase accepts: %v; want ErrUpdateNotAccepted", err)
	}
	if _, err := hephtest.Update[int](ctx, r, "add_bok", "x"); !errors.Is(err, heph.ErrUnknownUpdate) {
		t.Fatalf("an undeclared update: %v; want ErrUnknownUpdate", err)
	}
	if err := r.Signal("clos", nil); !errors.Is(err, heph.ErrUnknownSignal) {
		t.Fatalf("an undeclared signal: %v; want ErrUnknownSignal", err)
	}
	if n, err := hephtest.RunQuery(r, booksBy, "go"); err != nil || n != 2 {
		t.Fatalf("books_by(go): %d, %v; want 2", n, err)
	}
	var qf *heph.QueryFailedError
	if _, err := hephtest.RunQuery(r, booksBy, ""); !errors.As(err, &qf) || qf.Message != "a prefix, please" {
		t.Fatalf("a failing query: %v", err)
	}
	other := workflow.NewQuery[struct{}, int]("size")
	if _, err := hephtest.RunQuery(r, other, struct{}{}); !errors.Is(err, heph.ErrUnknownQuery) {
		t.Fatalf("an undeclared query: %v; want ErrUnknownQuery", err)
	}
	if err := hephtest.SendSignal(r, closeShelf, struct{}{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Drive(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := r.Result(); err != nil || len(out) != 3 {
		t.Fatalf("result %v, %v", out, err)
	}
}
