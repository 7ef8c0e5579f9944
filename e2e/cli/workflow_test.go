package cli_test

// Signals, updates and queries of a code-first workflow, sent with the
// heph binary. The server registers no code-first workflow; a client in
// the test process, on the server's store, runs it: messages go through
// the store to whichever process has the workflow.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// basket is the state of a basket run, published after each change.
type basket struct {
	Owner string   `json:"owner"`
	Items []string `json:"items"`
	Notes []string `json:"notes"`
}

// The messages of the basket workflow.
var (
	addItem   = workflow.NewUpdate[string, int]("add") // an item; the number of items
	addNote   = workflow.NewSignal[string]("note")
	closeSig  = workflow.NewSignal[struct{}]("close")
	itemsLike = workflow.NewQuery[struct {
		Prefix string `json:"prefix"`
	}, []string]("items")
)

// basketWorkflow collects items (updates, validated) and notes
// (signals) until it is closed, and returns the basket.
var basketWorkflow = newBasketWorkflow()

func newBasketWorkflow() *workflow.Definition[basket, basket] {
	def := workflow.New("cli_basket", func(ctx workflow.Context, in basket) (basket, error) {
		workflow.Publish(ctx, in)
		out, err := workflow.Phase(ctx, in,
			workflow.HandleUpdate(addItem, func(ctx workflow.Context, item string, b basket) (workflow.Reply[basket, int], error) {
				b.Items = append(slices.Clip(b.Items), item)
				workflow.Publish(ctx, b)
				return workflow.Respond(b, len(b.Items)), nil
			}).Validate(func(item string, b basket) error {
				switch {
				case strings.TrimSpace(item) == "":
					return errors.New("an item needs a name")
				case slices.Contains(b.Items, item):
					return fmt.Errorf("%s is in the basket already", item)
				}
				return nil
			}),
			workflow.HandleSignal(addNote, func(ctx workflow.Context, note string, b basket) workflow.Next[basket] {
				b.Notes = append(slices.Clip(b.Notes), note)
				workflow.Publish(ctx, b)
				return workflow.Continue(b)
			}),
			workflow.HandleSignal(closeSig, func(ctx workflow.Context, _ struct{}, b basket) workflow.Next[basket] {
				return workflow.Stop(b)
			}),
		)
		if err != nil {
			return basket{}, err
		}
		return out, nil
	}).Declare(addItem, addNote, closeSig).SearchAttribute("owner", flow.AttrKeyword)
	workflow.HandleQuery(def, itemsLike, func(b basket, args struct {
		Prefix string `json:"prefix"`
	}) ([]string, error) {
		out := []string{}
		for _, it := range b.Items {
			if strings.HasPrefix(it, args.Prefix) {
				out = append(out, it)
			}
		}
		return out, nil
	})
	return def
}

// startBasketWorker starts a client on st that runs the basket workflow
// on the default queue, as worker id; it is stopped when the test ends.
func startBasketWorker(t *testing.T, st store.Store, id string) *heph.Client {
	t.Helper()
	c, err := heph.New(&heph.Config{
		Store:    st,
		Queues:   map[string]int{"default": 4},
		WorkerID: id,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegisterWorkflows(basketWorkflow); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop the basket worker: %v", err)
		}
	})
	return c
}

// basketRun starts a run of the basket workflow with heph start (the
// server does not register the workflow; the worker's client, another
// process on its store, does) and waits until it published its first
// state.
func basketRun(c *client, w *heph.Client, owner string) string {
	c.t.Helper()
	// The server starts a workflow it does not register once a live
	// worker that does is recorded in the store.
	eventually(c.t, "the basket worker in heph workers", func() bool {
		var ws []struct {
			ID       string   `json:"id"`
			Handlers []string `json:"handlers"`
		}
		c.json(&ws, "workers")
		for _, x := range ws {
			if slices.Contains(x.Handlers, "workflow:"+basketWorkflow.Name()) {
				return true
			}
		}
		return false
	})
	var r run
	// The server knows the workflow's search attributes from the catalog.
	c.fails(exitFailure, `did you mean "owner"`, "start", basketWorkflow.Name(), "--kind", "workflow", "--attr", "ownr="+owner)
	c.json(&r, "start", basketWorkflow.Name(), "--kind", "workflow", "--input", `{"owner": "`+owner+`"}`, "--attr", "owner="+strconv.Quote(owner))
	if r.ID == "" || r.Workflow != basketWorkflow.Name() {
		c.t.Fatalf("heph start %s: %+v", basketWorkflow.Name(), r)
	}
	var list struct {
		Runs []run `json:"runs"`
	}
	c.json(&list, "ls", "--where", "owner = "+strconv.Quote(owner))
	if len(list.Runs) != 1 || list.Runs[0].ID != r.ID {
		c.t.Fatalf("ls --where owner = %s: %+v", owner, list.Runs)
	}
	if _, err := w.GetRun(c.t.Context(), r.ID); err != nil {
		c.t.Fatalf("the worker's client does not see run %s: %v", r.ID, err)
	}
	waitState(c, r.ID, func(b basket) bool { return b.Owner == owner })
	var shown run
	c.json(&shown, "show", r.ID)
	if shown.Workflow != basketWorkflow.Name() || shown.Status != "waiting" {
		c.t.Fatalf("show %s: %+v", r.ID, shown)
	}
	return r.ID
}

// waitState waits until heph query shows a published state that ok
// accepts. With -o json, the state is the API's answer's "state".
func waitState(c *client, id string, ok func(basket) bool) {
	c.t.Helper()
	eventually(c.t, "the published state of run "+id, func() bool {
		var st struct{ State basket }
		c.json(&st, "query", id)
		return ok(st.State)
	})
}

// testBasket sends signals, updates and queries to a basket run with the
// binary, and reads its result once a signal ends it.
func testBasket(t *testing.T, c *client, w *heph.Client, owner string) {
	id := basketRun(c, w, owner)
	q := regexp.QuoteMeta(id)

	// The run records the worker's build (the server, without the
	// workflow, pins it to the newest live build that serves it); the
	// build has the run open and cannot be retired.
	build := regexp.QuoteMeta(w.BuildID())
	lines(t, c.ok("show", id), `^build:\s+`+build+`$`)
	lines(t, c.ok("builds", basketWorkflow.Name()), `^BUILD\s+OPEN RUNS\s+LIVE WORKERS\s+STATE\s+RETIRED$`, `^`+build+`\s+[1-9]\d*\s+[1-9]\d*\s+newest\s`)
	var bs []struct {
		BuildID  string `json:"build_id"`
		OpenRuns int    `json:"open_runs"`
		Newest   bool   `json:"newest"`
	}
	c.json(&bs, "builds", basketWorkflow.Name())
	if len(bs) == 0 || bs[0].BuildID != w.BuildID() || bs[0].OpenRuns < 1 || !bs[0].Newest {
		t.Fatalf("builds -o json: %+v", bs)
	}
	c.fails(exitConflict, "open run", "builds", "retire", basketWorkflow.Name(), w.BuildID())
	lines(t, c.ok("builds"), `^BUILD\s+WORKERS\s+WORKFLOWS$`, `^`+build+`\s+[1-9]\d*\s+\S*cli_basket`)

	lines(t, c.ok("signal", id, addNote.Name(), "--payload", `"fragile"`), `^signal note sent to run `+q+`$`)
	waitState(c, id, func(b basket) bool { return len(b.Notes) == 1 })

	// An update waits for its result, printed as JSON.
	lines(t, c.ok("update", id, addItem.Name(), "--args", `"apple"`), `^1$`)
	var res struct {
		Result int    `json:"result"`
		Stage  string `json:"stage"`
	}
	c.json(&res, "update", id, addItem.Name(), "--args", `"pear"`)
	if res.Result != 2 || res.Stage != "completed" {
		t.Fatalf("update -o json: %+v", res)
	}
	// The validator refuses: a bad request, the validator's words, and
	// nothing recorded.
	rejected := `heph: Bad Request: update "add" of run ` + id + ` rejected: `
	c.fails(exitFailure, rejected+"an item needs a name", "update", id, addItem.Name(), "--args", `" "`)
	c.fails(exitFailure, rejected+"pear is in the basket already", "update", id, addItem.Name(), "--args", `"pear"`)
	c.fails(exitFailure, "heph: Bad Request: ", "update", id, addItem.Name(), "--args", `{"not": "a string"}`)
	c.fails(exitFailure, "heph: Bad Request: ", "update", id, "remove", "--args", `"pear"`) // not declared
	// A signal the workflow does not declare: the server does not have
	// the workflow, so it cannot tell, and stores it; no phase takes it.
	lines(t, c.ok("signal", id, "shout"), `^signal shout sent to run `+q+`$`)

	// Only the acceptance: the reply is not waited for.
	lines(t, c.ok("update", id, addItem.Name(), "--args", `"plum"`, "--wait-for", "accepted"), `^update add accepted by run `+q+`$`)
	waitState(c, id, func(b basket) bool { return len(b.Items) == 3 })

	// A named query, over the published state, in both formats; then the
	// published state itself.
	lines(t, c.ok("query", id, itemsLike.Name(), "--args", `{"prefix": "p"}`), `^\[$`, `^  "pear",$`, `^  "plum"$`, `^\]$`)
	var items struct{ Result []string }
	c.json(&items, "query", id, itemsLike.Name(), "--args", `{"prefix": "a"}`)
	if !slices.Equal(items.Result, []string{"apple"}) {
		t.Fatalf("query items -o json: %+v", items)
	}
	c.fails(exitFailure, "heph: Bad Request: ", "query", id, "prices")
	// (PostgreSQL's jsonb orders the keys its own way.)
	lines(t, c.ok("query", id), `^  "owner": "`+owner+`",?$`, `^    "plum"$`, `^    "fragile"$`)
	var st struct{ State basket }
	c.json(&st, "query", id)
	if b, want := st.State, (basket{Owner: owner, Items: []string{"apple", "pear", "plum"}, Notes: []string{"fragile"}}); b.Owner != want.Owner ||
		!slices.Equal(b.Items, want.Items) || !slices.Equal(b.Notes, want.Notes) {
		t.Fatalf("query -o json: %+v, want %+v", b, want)
	}

	// Still running; a signal ends it.
	c.fails(exitNotFinished, "", "result", id)
	c.ok("signal", id, closeSig.Name())
	r := c.ok("result", id, "--wait", wait.String())
	lines(t, r, `^run `+q+` completed$`, `"owner": "`+owner+`"`, `^    "pear",$`)
	var done run
	c.json(&done, "result", id)
	if done.Status != "completed" || done.Output["owner"] != owner {
		t.Fatalf("result -o json: %+v", done)
	}
	// The history has the three accepted updates and the three signals;
	// the rejected updates left nothing.
	var h struct{ Events []struct{ Kind string } }
	c.json(&h, "history", id)
	kinds := map[string]int{}
	for _, e := range h.Events {
		kinds[e.Kind]++
	}
	if kinds["update_accepted"] != 3 || kinds["signal_received"] != 3 {
		t.Fatalf("history: %v", kinds)
	}
	// A finished run takes no more messages: a conflict.
	c.fails(exitConflict, "heph: ", "signal", id, addNote.Name(), "--payload", `"late"`)
	c.fails(exitConflict, "heph: ", "update", id, addItem.Name(), "--args", `"fig"`)
}

// openSQLite opens the SQLite file of a running server in the test
// process; it is closed when the test ends.
func openSQLite(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), &sqlite.Config{Path: path, BusyTimeout: wait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openPostgres opens the PostgreSQL schema of a running server in the
// test process; it is closed when the test ends.
func openPostgres(t *testing.T, dsn, schema string) store.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), &postgres.Config{DSN: dsn, Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
