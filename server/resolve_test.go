package server

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
)

// orderFlow waits at its first step until resumed with "go"; its runs
// have the business key "order".
func orderFlow() *flow.Flow {
	b := flow.New("order").BusinessKey("order", flow.ScopeActive)
	flow.EventStep(b, "wait", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("go"), flow.Waits(0))
	return b.Start("wait").Edge("wait", "go", flow.Done).MustBuild()
}

// invoiceFlow completes at once; its runs share the key "order" too.
func invoiceFlow() *flow.Flow {
	b := flow.New("invoice").BusinessKey("order", flow.ScopeActive)
	flow.Step(b, "bill", func(ctx context.Context, in any) (string, error) { return "billed", nil })
	return b.MustBuild()
}

func newOrderEnv(t *testing.T, b backend, cfg *Config) *env {
	t.Helper()
	st := b.open(t)
	c, err := heph.New(&heph.Config{Store: st, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(orderFlow(), invoiceFlow()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return serve(t, st, c, cfg)
}

// rawDo sends a request outside the OpenAPI checker (for answers that
// are not the document's, or requests it has no route for).
func rawDo(t *testing.T, e *env, method, path string) *resp {
	t.Helper()
	rq, err := http.NewRequestWithContext(t.Context(), method, e.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.http.Client().Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &resp{status: res.StatusCode, header: res.Header, body: body}
}

// runPath fills a run route's pattern: {id} with ref, other parameters
// with a placeholder.
func runPath(pattern, ref string) string {
	p := strings.Replace(pattern, "{id}", url.PathEscape(ref), 1)
	for strings.Contains(p, "{") {
		i, j := strings.Index(p, "{"), strings.Index(p, "}")
		p = p[:i] + "x" + p[j+1:]
	}
	return p
}

// TestRunAddressing: every route that takes a run (read from the route
// table, so a new one is covered) accepts a business id, which names
// the active run that holds it, else the newest; a reference that names
// no run is a 404 that says what to do.
func TestRunAddressing(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newOrderEnv(t, b, nil)
		var r1, r2, inv Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "order", "business_value": "42"}, http.StatusCreated, &r1)
		if r1.BusinessID != "order::42" {
			t.Fatalf("business id %q", r1.BusinessID)
		}
		e.waitStatus(r1.ID, "waiting")

		// Reads give the same answer by business id as by run id.
		for _, suffix := range []string{"", "/history", "/logs"} {
			byID := e.api.call(http.MethodGet, "/api/v1/runs/"+r1.ID+suffix, nil, http.StatusOK, nil)
			byKey := e.api.call(http.MethodGet, "/api/v1/runs/order::42"+suffix, nil, http.StatusOK, nil)
			if string(byID.body) != string(byKey.body) {
				t.Errorf("GET runs/order::42%s = %s\nwant (by id) %s", suffix, byKey.body, byID.body)
			}
		}
		// A write by business id acts on the run.
		e.api.call(http.MethodPost, "/api/v1/runs/order::42/cancel", map[string]any{"reason": "test"}, http.StatusAccepted, nil)
		e.waitStatus(r1.ID, "cancelled")

		// A new run takes the business id; an invoice run of another
		// workflow holds it too, newer but finished: the active run wins,
		// then, once it ends, the newest.
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "order", "business_value": "42"}, http.StatusCreated, &r2)
		e.waitStatus(r2.ID, "waiting")
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "invoice", "business_value": "42"}, http.StatusCreated, &inv)
		e.waitStatus(inv.ID, "completed")
		var got Run
		e.api.call(http.MethodGet, "/api/v1/runs/order::42", nil, http.StatusOK, &got)
		if got.ID != r2.ID {
			t.Fatalf("order::42 names %s, want the active run %s", got.ID, r2.ID)
		}
		e.api.call(http.MethodPost, "/api/v1/runs/order::42/resume", map[string]any{"event": "go"}, http.StatusAccepted, nil)
		e.waitStatus(r2.ID, "completed")
		e.api.call(http.MethodGet, "/api/v1/runs/order::42", nil, http.StatusOK, &got)
		if got.ID != inv.ID {
			t.Fatalf("order::42 names %s, want the newest run %s", got.ID, inv.ID)
		}

		// Every run route, through a probe handler on a second server:
		// the handler sees the run id.
		p := newEnvOn(t, e)
		var (
			mu   sync.Mutex
			seen string
		)
		n := 0
		for _, rt := range p.server.routes {
			if !takesRun(rt.path) {
				continue
			}
			n++
			rt.handle = func(c *call) error {
				mu.Lock()
				seen = c.r.PathValue("id")
				mu.Unlock()
				c.wrote = true
				c.w.WriteHeader(http.StatusTeapot)
				return nil
			}
		}
		if n < 14 {
			t.Fatalf("%d run routes in the table; the probe finds too few", n)
		}
		for _, rt := range p.server.routes {
			if !takesRun(rt.path) {
				continue
			}
			for _, ref := range []string{inv.ID, "order::42"} {
				seen = ""
				if res := rawDo(t, p, rt.method, runPath(rt.path, ref)); res.status != http.StatusTeapot || seen != inv.ID {
					t.Errorf("%s %s with %s: status %d (%s), the handler saw %q; want %s", rt.method, rt.path, ref, res.status, res.body, seen, inv.ID)
				}
			}
			for ref, want := range map[string]string{
				"order::404": "no run has the id or business id order::404: find runs with heph ls --search order::404",
				"nope":       "run nope not found: list runs with heph ls",
			} {
				res := rawDo(t, p, rt.method, runPath(rt.path, ref))
				if pr := res.problem(t, http.StatusNotFound); pr.Detail != want || pr.Fix == "" || !strings.HasSuffix(want, ": "+pr.Fix) {
					t.Errorf("%s %s with %s: %s; want the detail %q", rt.method, rt.path, ref, res.body, want)
				}
			}
		}
	})
}

// An approver, who reads only the runs with a gate it may decide, gets
// the same 404 as a reader for a reference that names no run (as it did
// before business ids: its check of the run's gates found no run).
func TestRunAddressingApprover(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newOrderEnv(t, b, &Config{})
		approver, reader := e.token("ann", "approver"), e.token("bob", "read")
		for _, ref := range []string{"order::404", "0190a5d0-ac96-774b-bcce-b302099a8057"} {
			path := "/api/v1/runs/" + ref
			a := e.api.do(req{method: http.MethodGet, path: path, token: approver}).problem(t, http.StatusNotFound)
			r := e.api.do(req{method: http.MethodGet, path: path, token: reader}).problem(t, http.StatusNotFound)
			if a.Detail != r.Detail || !strings.Contains(a.Detail, ref) || !strings.Contains(a.Detail, "heph ls") {
				t.Errorf("%s: the approver is told %q, the reader %q", ref, a.Detail, r.Detail)
			}
		}
	})
}
