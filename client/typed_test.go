package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	apiclient "github.com/hephaestus-go/hephaestus/client"
	"github.com/hephaestus-go/hephaestus/flow"
	hephserver "github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

type order struct {
	ID  string `json:"id"`
	Qty int    `json:"qty"`
}

type receipt struct {
	Order string `json:"order"`
	Total int    `json:"total"`
}

// priced is the flow's output: its last step's output, by step name.
type priced struct {
	Price receipt `json:"price"`
}

// realServer is heph server on SQLite on loopback, with a Go flow "price"
// (order → receipt; a quantity over 100 fails for good), and a client
// with an operator token.
func realServer(t *testing.T) (*apiclient.Client, *apiclient.Client) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c, err := heph.New(&heph.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	b := flow.New("price")
	flow.Input[order](b)
	flow.Step(b, "price", func(ctx context.Context, o order) (receipt, error) {
		if o.Qty > 100 {
			return receipt{}, flow.NonRetryable(errors.New("too many"))
		}
		return receipt{Order: o.ID, Total: o.Qty * 3}, nil
	})
	if err := c.Register(b.MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := hephserver.New(&hephserver.Config{Client: c, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Stop()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	})
	_, _, tok, err := hephserver.NewToken(ctx, st, &hephserver.TokenParams{Principal: "svc", Role: hephserver.RoleOperator}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	op, err := apiclient.New(&apiclient.Config{Addr: hs.URL, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	anon, err := apiclient.New(&apiclient.Config{Addr: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	return op, anon
}

// A typed handle starts a flow with a Go value and decodes its output;
// an idempotency key returns the first run; a failed run is a *RunError;
// an unknown flow and a missing token are *Error with their statuses.
func TestTypedHandle(t *testing.T) {
	c, anon := realServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	price := apiclient.Flow[order, priced](c, "price")

	got, err := price.Run(ctx, order{ID: "o-1", Qty: 7}, nil)
	if err != nil || got.Price != (receipt{Order: "o-1", Total: 21}) {
		t.Fatalf("Run: %+v, %v", got, err)
	}

	first, err := price.Start(ctx, order{ID: "o-2", Qty: 2}, &apiclient.StartOptions{IdempotencyKey: "k-2", Tags: []string{"t"}})
	if err != nil || !first.Created {
		t.Fatalf("Start: %+v, %v", first, err)
	}
	again, err := price.Start(ctx, order{ID: "o-2", Qty: 2}, &apiclient.StartOptions{IdempotencyKey: "k-2"})
	if err != nil || again.Created || again.ID != first.ID {
		t.Fatalf("a second start with the key: %+v, %v (first %s)", again, err, first.ID)
	}
	if out, err := apiclient.Attach[priced](c, first.ID).Result(ctx); err != nil || out.Price.Total != 6 {
		t.Fatalf("Attach(...).Result: %+v, %v", out, err)
	}
	run, err := first.Get(ctx)
	if err != nil || run.Status != "completed" || len(run.Tags) != 1 || run.Tags[0] != "t" {
		t.Fatalf("Get: %+v, %v", run, err)
	}

	_, err = price.Run(ctx, order{ID: "o-3", Qty: 500}, nil)
	var re *apiclient.RunError
	if !errors.As(err, &re) || re.Status != "failed" || re.RunID == "" {
		t.Fatalf("a failing run: %v, want a *RunError with status failed", err)
	}

	_, err = apiclient.Flow[order, priced](c, "no-such-flow").Start(ctx, order{}, nil)
	var ae *apiclient.Error
	if !errors.As(err, &ae) || ae.Status/100 != 4 {
		t.Fatalf("an unknown flow: %v, want a 4xx *Error", err)
	}
	_, err = apiclient.Flow[order, priced](anon, "price").Start(ctx, order{}, nil)
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("no token: %v, want a 401 *Error", err)
	}
	who, _, err := c.Whoami(ctx)
	if err != nil || who.Actor != "svc" || who.Role != "operator" || who.Via != "token" {
		t.Fatalf("Whoami: %+v, %v", who, err)
	}
	steps, _, err := c.RunSteps(ctx, first.ID)
	if err != nil || steps == nil {
		t.Fatalf("RunSteps: %+v, %v", steps, err)
	}
	waits, _, err := c.RunEventWaits(ctx, first.ID)
	if err != nil || waits == nil || len(waits.Waits) != 0 {
		t.Fatalf("RunEventWaits: %+v, %v", waits, err)
	}
}
