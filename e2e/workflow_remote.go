package e2e

// Messages from a process that registers no workflow: updates, named
// queries and signals reach a running workflow through the store, and the
// workflow's validator runs in the worker that has it.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// TallyState is what the tally workflow publishes.
type TallyState struct {
	Items []string `json:"items"`
	Open  bool     `json:"open"`
}

// TallyValidations counts the runs of the tally's validator in this
// process: the worker's, never the sender's.
var TallyValidations atomic.Int64

// The tally's messages: TallyCount is its named query, how many items
// start with a prefix ("!" makes the handler fail); it declares TallyRemove
// but handles it in no phase.
var (
	TallyAdd    = workflow.NewUpdate[string, int]("add")
	TallyRemove = workflow.NewUpdate[string, int]("remove")
	TallyClose  = workflow.NewSignal[struct{}]("close")
	TallyCount  = workflow.NewQuery[string, int]("count_prefix")
)

// Tally collects items by update until a "close" signal.
var Tally = workflow.New("tally", func(ctx workflow.Context, _ struct{}) (TallyState, error) {
	s := TallyState{Open: true}
	workflow.Publish(ctx, s)
	return workflow.Phase(ctx, s,
		workflow.HandleUpdate(TallyAdd, func(ctx workflow.Context, item string, s TallyState) (workflow.Reply[TallyState, int], error) {
			s.Items = append(slices.Clip(s.Items), item)
			workflow.Publish(ctx, s)
			return workflow.Respond(s, len(s.Items)), nil
		}).Validate(func(item string, _ TallyState) error {
			TallyValidations.Add(1) //heph:nondeterministic-ok a test counter of validator calls; changes no command
			if item == "" {
				return errors.New("an item needs a name")
			}
			return nil
		}),
		workflow.HandleSignal(TallyClose, func(ctx workflow.Context, _ struct{}, s TallyState) workflow.Next[TallyState] {
			s.Open = false
			workflow.Publish(ctx, s)
			return workflow.Stop(s)
		}),
	)
}).Declare(TallyAdd, TallyRemove, TallyClose)

func init() {
	workflow.HandleQuery(Tally, TallyCount, func(s TallyState, prefix string) (int, error) {
		if prefix == "!" {
			return 0, errors.New("no prefix starts with '!'")
		}
		n := 0
		for _, it := range s.Items {
			if strings.HasPrefix(it, prefix) {
				n++
			}
		}
		return n, nil
	})
}

// TallyRemote sends a running tally run its messages from c, a client that
// registers no workflow, and checks each answer: two updates accepted, one
// sent twice under one id (applied once), one refused by the validator,
// one no phase accepts, the named query with arguments, an unknown and a
// failing query, and the closing signal.
func TallyRemote(ctx context.Context, c *heph.Client, runID string) error {
	if n, err := heph.RunUpdate(ctx, c, runID, TallyAdd, "apple", nil); err != nil || n != 1 {
		return fmt.Errorf("add apple: %d, %v; want 1", n, err)
	}
	for range 2 {
		if n, err := heph.RunUpdate(ctx, c, runID, TallyAdd, "avocado", &heph.UpdateOptions{ID: "avocado-1"}); err != nil || n != 2 {
			return fmt.Errorf("add avocado (id avocado-1): %d, %v; want 2 both times", n, err)
		}
	}
	_, err := heph.RunUpdate(ctx, c, runID, TallyAdd, "", &heph.UpdateOptions{ID: "empty-1"})
	var rej *heph.UpdateRejectedError
	if !errors.As(err, &rej) || !errors.Is(err, heph.ErrUpdateInvalid) || rej.Err.Error() != "an item needs a name" {
		return fmt.Errorf("add an empty item: %v; want an *UpdateRejectedError with the validator's error, ErrUpdateInvalid", err)
	}
	if _, err := heph.RunUpdate(ctx, c, runID, TallyRemove, "apple", nil); !errors.Is(err, heph.ErrUpdateNotAccepted) || errors.Is(err, heph.ErrUnknownUpdate) {
		return fmt.Errorf("a declared update no phase handles: %v; want ErrUpdateNotAccepted", err)
	}
	// A name the workflow does not declare: the worker tells.
	if _, err := c.UpdateWorkflow(ctx, runID, "ad", "apple", nil); !errors.As(err, &rej) || !errors.Is(err, heph.ErrUnknownUpdate) ||
		!strings.Contains(err.Error(), `declares no update "ad"`) {
		return fmt.Errorf("an undeclared update: %v; want an *UpdateRejectedError, ErrUnknownUpdate naming it", err)
	}
	// Accepted only: the reply is not waited for.
	if _, err := c.UpdateWorkflow(ctx, runID, "add", "banana", &heph.UpdateOptions{ID: "banana-1", WaitFor: heph.UpdateAccepted}); err != nil {
		return fmt.Errorf("add banana, waiting for acceptance: %v", err)
	}
	if n, err := heph.RunQuery(ctx, c, runID, TallyCount, "a"); err != nil || n != 2 {
		return fmt.Errorf("query count_prefix(a): %d, %v; want 2", n, err)
	}
	if n, err := heph.RunQuery(ctx, c, runID, TallyCount, "b"); err != nil || n != 1 {
		return fmt.Errorf("query count_prefix(b): %d, %v; want 1 (banana was accepted before the query was sent)", n, err)
	}
	if _, err := c.QueryNamed(ctx, runID, "count_all", nil); !errors.Is(err, heph.ErrUnknownQuery) {
		return fmt.Errorf("an undeclared query: %v; want ErrUnknownQuery", err)
	}
	var qf *heph.QueryFailedError
	if _, err := heph.RunQuery(ctx, c, runID, TallyCount, "!"); !errors.As(err, &qf) || qf.Message != "no prefix starts with '!'" {
		return fmt.Errorf("a failing query: %v; want a *QueryFailedError with the handler's message", err)
	}
	if err := heph.SendSignal(ctx, c, runID, TallyClose, struct{}{}); err != nil {
		return fmt.Errorf("signal close: %v", err)
	}
	return nil
}

// CheckTally checks a tally run that TallyRemote drove: it completed with
// its three items, each update accepted once, and nothing written for the
// rejected ones.
func CheckTally(ctx context.Context, c *heph.Client, runID string) error {
	run := heph.GetWorkflow(c, Tally, runID)
	got, err := run.Get(ctx)
	if err != nil {
		return err
	}
	if want := []string{"apple", "avocado", "banana"}; !slices.Equal(got.Items, want) || got.Open {
		return fmt.Errorf("result %+v; want items %v, closed", got, want)
	}
	h, err := c.History(ctx, runID)
	if err != nil {
		return err
	}
	accepted := map[string]int{}
	for _, e := range h {
		if e.Kind == hephtype.EventUpdateAccepted {
			accepted[e.Name]++
		}
	}
	if accepted["add"] != 3 || len(accepted) != 1 {
		return fmt.Errorf("update_accepted events by name: %v; want add three times (the rejected ones write nothing)", accepted)
	}
	return nil
}

// testWfRemoteMessages: a second client on the same store, which
// registers no workflow and runs no worker, sends the messages.
func testWfRemoteMessages(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Tally))
	ctx := ctxT(t)
	r, err := heph.StartWorkflow(ctx, e.c, Tally, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &requestRecorder{Store: e.st}
	sender, err := heph.New(&heph.Config{Store: rec, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(sender) })
	// The worker's client has the declarations: it refuses unknown names
	// at once.
	if err := e.c.SignalWorkflow(ctx, r.ID, "clse", nil); !errors.Is(err, heph.ErrUnknownSignal) {
		t.Fatalf("an undeclared signal: %v; want ErrUnknownSignal", err)
	}
	if _, err := r.Update(ctx, "ad", "x", nil); !errors.Is(err, heph.ErrUnknownUpdate) {
		t.Fatalf("an undeclared update from the worker's client: %v; want ErrUnknownUpdate", err)
	}
	before := TallyValidations.Load()
	if err := TallyRemote(ctx, sender, r.ID); err != nil {
		t.Fatal(err)
	}
	if err := CheckTally(ctx, e.c, r.ID); err != nil {
		t.Fatal(err)
	}
	// apple, avocado (once), the empty item, banana: in the worker.
	if n := TallyValidations.Load() - before; n < 4 {
		t.Fatalf("the validator ran %d times in the worker's client, want at least 4", n)
	}
	// A query's request goes once its answer is read.
	if len(rec.queries) != 4 {
		t.Fatalf("%d query requests recorded, want 4", len(rec.queries))
	}
	for _, id := range rec.queries {
		if _, err := e.st.GetRequest(ctx, r.ID, id); !errors.Is(err, store.ErrRequestNotFound) {
			t.Fatalf("query request %s is still there: %v", id, err)
		}
	}
	// The rejection is stored with the request, not in the history.
	req, err := e.st.GetRequest(ctx, r.ID, "update:empty-1")
	if err != nil || req.Status != store.RequestRejected || req.Code != "invalid" || req.Error != "an item needs a name" {
		t.Fatalf("the rejected update's request: %+v, %v", req, err)
	}
}

// testWfUpdateWithStart: update-with-start starts the run of a workflow
// id when there is none, and delivers the update to the active one
// otherwise; a retried call with the same update id applies it once.
func testWfUpdateWithStart(t *testing.T, b Backend) {
	e := newWfEnv(t, b, nil, wfs(Tally))
	ctx := ctxT(t)
	send := func(item, id string) (*heph.WorkflowRun[TallyState], int) {
		t.Helper()
		r, n, err := heph.UpdateWithStartWorkflow(ctx, e.c, Tally, "tally-1", struct{}{}, nil, TallyAdd, item, &heph.UpdateOptions{ID: id})
		if err != nil {
			t.Fatalf("update-with-start add %s (id %s): %v", item, id, err)
		}
		return r, n
	}
	r1, n := send("apple", "u1")
	if n != 1 {
		t.Fatalf("the first update-with-start replied %d, want 1", n)
	}
	r2, n := send("avocado", "u2")
	if r2.ID != r1.ID || n != 2 {
		t.Fatalf("second call: run %s reply %d; want run %s, reply 2", r2.ID, n, r1.ID)
	}
	// A retry of the first call: its first outcome, nothing new.
	if r, n := send("apple", "u1"); r.ID != r1.ID || n != 1 {
		t.Fatalf("retried call: run %s reply %d; want run %s, reply 1", r.ID, n, r1.ID)
	}
	if err := heph.SendSignal(ctx, e.c, r1.ID, TallyClose, struct{}{}); err != nil {
		t.Fatal(err)
	}
	got, err := r1.Get(ctx)
	if err != nil || !slices.Equal(got.Items, []string{"apple", "avocado"}) {
		t.Fatalf("first run's result %+v, %v", got, err)
	}
	// The id's run ended: the next call starts another.
	r3, n := send("banana", "u3")
	if r3.ID == r1.ID || n != 1 {
		t.Fatalf("after the run ended: run %s reply %d; want a new run, reply 1", r3.ID, n)
	}

	// A run started with an update the validator refuses: the run is
	// there, the rejection is recorded with the request, not in the
	// history.
	r4, _, err := heph.UpdateWithStartWorkflow(ctx, e.c, Tally, "tally-2", struct{}{}, nil, TallyAdd, "", &heph.UpdateOptions{ID: "empty"})
	if !errors.Is(err, heph.ErrUpdateInvalid) || r4 == nil {
		t.Fatalf("update-with-start of a refused update: %v, run %v; want ErrUpdateInvalid and the run", err, r4)
	}
	req, err := e.st.GetRequest(ctx, r4.ID, "update:empty")
	if err != nil || req.Status != store.RequestRejected || req.Code != "invalid" {
		t.Fatalf("the refused update's request: %+v, %v", req, err)
	}
	if n := count(e.history(r4.ID), hephtype.EventUpdateAccepted, ""); n != 0 {
		t.Fatalf("the refused update wrote %d update_accepted entries", n)
	}

	// Started by a client that works no queue: the update goes with the
	// run, and a worker that comes later applies it.
	starter := startWfClient(t, e.st, func(c *heph.Config) { c.Queues = map[string]int{"elsewhere": 1} }, wfs(Tally))
	type reply struct {
		n   int
		err error
	}
	done := make(chan reply, 1)
	go func() {
		_, n, err := heph.UpdateWithStartWorkflow(ctx, starter, Tally, "tally-3", struct{}{}, nil, TallyAdd, "cherry", &heph.UpdateOptions{ID: "c1"})
		done <- reply{n, err}
	}()
	rep := <-done
	if rep.err != nil || rep.n != 1 {
		t.Fatalf("update-with-start answered by a worker of another client: %d, %v", rep.n, rep.err)
	}
}

// roller accepts "add" updates until a "roll" signal, then continues as
// new with what it has.
var roller = workflow.New("roller", func(ctx workflow.Context, items []string) ([]string, error) {
	rolled := false
	items, err := workflow.Phase(ctx, items,
		workflow.HandleUpdate(TallyAdd, func(ctx workflow.Context, it string, s []string) (workflow.Reply[[]string, int], error) {
			s = append(slices.Clip(s), it)
			return workflow.Respond(s, len(s)), nil
		}),
		workflow.OnSignal("roll", func(ctx workflow.Context, _ struct{}, s []string) workflow.Next[[]string] {
			rolled = true
			return workflow.Stop(s)
		}),
	)
	if err != nil || !rolled {
		return items, err
	}
	return nil, workflow.ContinueAsNew(ctx, items)
})

// testWfUpdateFollowsContinueAsNew: an update whose run continues as new
// before a worker takes it goes to the run that carries it on.
func testWfUpdateFollowsContinueAsNew(t *testing.T, b Backend) {
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	ctx := ctxT(t)
	first := startWfClient(t, st, nil, wfs(roller))
	r, err := heph.StartWorkflow(ctx, first, roller, []string{"a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	stopClient(first)
	sender, err := heph.New(&heph.Config{Store: st, Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(sender) })
	// With no worker: the signal's decision task, then the update's.
	if err := sender.SignalWorkflow(ctx, r.ID, "roll", nil); err != nil {
		t.Fatal(err)
	}
	type reply struct {
		n   int
		err error
	}
	done := make(chan reply, 1)
	go func() {
		n, err := heph.RunUpdate(ctx, sender, r.ID, TallyAdd, "b", &heph.UpdateOptions{ID: "add-b"})
		done <- reply{n, err}
	}()
	waitFor(t, "the update's request", func() bool {
		_, err := st.GetRequest(ctx, r.ID, "update:add-b")
		return err == nil
	})
	// One slot: the worker takes the older task, the decision, first.
	e.c = startWfClient(t, st, func(c *heph.Config) { c.Queues = map[string]int{"default": 1} }, wfs(roller))
	got := <-done
	if got.err != nil || got.n != 2 {
		t.Fatalf("the update: %d, %v; want 2 (applied by the run that carries on)", got.n, got.err)
	}
	if n := count(e.history(r.ID), hephtype.EventUpdateAccepted, ""); n != 0 {
		t.Fatalf("the continued run accepted the update %d times", n)
	}
	runs, err := e.c.ListRuns(ctx, &heph.ListOptions{Flow: "roller"})
	if err != nil || len(runs.Runs) != 2 {
		t.Fatalf("runs of roller: %+v, %v; want the first and its successor", runs, err)
	}
	for _, x := range runs.Runs {
		if x.ID != r.ID {
			if n := count(e.history(x.ID), hephtype.EventUpdateAccepted, ""); n != 1 {
				t.Fatalf("the successor accepted the update %d times, want 1", n)
			}
		}
	}
}

// requestRecorder records the ids of the query requests made through it.
type requestRecorder struct {
	store.Store
	mu      sync.Mutex
	queries []string
}

func (s *requestRecorder) CreateRequest(ctx context.Context, p *store.CreateRequestParams) (*store.Request, error) {
	if p.Request.Kind == store.RequestQuery {
		s.mu.Lock()
		s.queries = append(s.queries, p.Request.ID)
		s.mu.Unlock()
	}
	return s.Store.CreateRequest(ctx, p)
}
