package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/job"
)

// listIDs lists the ids of the runs opts keeps, newest first.
func (e *env) listIDs(opts *heph.ListOptions) []string {
	e.t.Helper()
	l, err := e.c.ListRuns(ctxT(e.t), opts)
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, r := range l.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func testListFilters(t *testing.T, b Backend) {
	var broken atomic.Bool
	var calls [3]atomic.Int32
	broken.Store(true)
	// No worker serves "special": the run of "parked" keeps its task there.
	parked := flow.New("parked")
	flow.Step(parked, "later", func(ctx context.Context, in any) (int, error) { return 1, nil }, flow.Queue("special"))
	other := job.MustNew("lf_job", func(ctx context.Context, j *job.Job[jobArgs]) error { return nil }, nil)
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, st, nil, wfs(Counter))
	if err := e.c.Register(parked.MustBuild(), chainFlow("chain", &broken, &calls), orderFlow()); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RegisterJobs(other); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)

	done := e.run("order", order{ID: "1", Amount: 5}, &heph.StartOptions{Tags: []string{"Blue"}, Metadata: map[string]any{"tenant": "acme", "n": 42}})
	failed := e.run("chain", nil, &heph.StartOptions{Metadata: map[string]any{"tenant": "globex", "n": "42"}})
	wantStatus(t, failed, heph.StatusFailed)
	waiting, err := e.c.StartRun(ctx, "parked", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A job of a kind on "default", inserted on a queue nobody serves.
	j, err := heph.InsertJob(ctx, e.c, other, jobArgs{N: 1}, &heph.JobOptions{Queue: "nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := e.c.StartWorkflow(ctx, "counter", struct{}{}, &heph.WorkflowOptions{Metadata: map[string]any{"tenant": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	if wf.Kind != heph.KindWorkflow || done.Kind != heph.KindFlow {
		t.Errorf("kinds: workflow run %q, flow run %q", wf.Kind, done.Kind)
	}

	for _, tc := range []struct {
		name string
		opts heph.ListOptions
		want []string
	}{
		{"workflows", heph.ListOptions{Kind: heph.KindWorkflow}, []string{wf.ID}},
		{"flows", heph.ListOptions{Kind: heph.KindFlow}, []string{j.ID, waiting.ID, failed.ID, done.ID}},
		{"queue with a task", heph.ListOptions{Queue: "nowhere"}, []string{j.ID}},
		{"queue a flow declares", heph.ListOptions{Queue: "special"}, []string{waiting.ID}},
		{"queue of finished runs", heph.ListOptions{Queue: "default", Kind: heph.KindFlow}, []string{j.ID, failed.ID, done.ID}},
		{"metadata", heph.ListOptions{Metadata: map[string]string{"tenant": "acme"}}, []string{wf.ID, done.ID}},
		{"metadata number", heph.ListOptions{Metadata: map[string]string{"n": "42", "tenant": "acme"}}, []string{done.ID}},
		{"text in a tag", heph.ListOptions{Text: "blue"}, []string{done.ID}},
		{"text in the error", heph.ListOptions{Text: "IS BROKEN"}, []string{failed.ID}},
		{"text in the name", heph.ListOptions{Text: "ParK"}, []string{waiting.ID}},
		{"text in the id", heph.ListOptions{Text: strings.ToUpper(wf.ID[len(wf.ID)-12:])}, []string{wf.ID}},
	} {
		if got := e.listIDs(&tc.opts); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := e.c.ListRuns(ctx, &heph.ListOptions{Kind: "job"}); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "ListOptions.Kind") {
		t.Errorf("an unknown kind: %v, want ErrInvalidInput naming ListOptions.Kind", err)
	}
}

func testStartWithRunID(t *testing.T, b Backend) {
	reg := flowdoc.NewRegistry()
	if err := flowdoc.RegisterAction(reg, "noop", func(ctx context.Context, c flowdoc.ActionCall, in json.RawMessage) (string, error) {
		return "ok", nil
	}); err != nil {
		t.Fatal(err)
	}
	kind := job.MustNew("id_job", func(ctx context.Context, j *job.Job[jobArgs]) error { return nil }, nil)
	st, reopen := b.New(t)
	e := &env{t: t, st: st, reopen: reopen}
	e.c = startWfClient(t, st, nil, wfs(Counter))
	ctx := ctxT(t)
	if err := e.c.Register(approvalFlow("approval", 0)); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RegisterJobs(kind); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.PutDocument(ctx, "doc-id", heph.DocumentYAML, []byte("name: doc-id\nsteps:\n  only:\n    action: noop\n    done: true\n")); err != nil {
		t.Fatal(err)
	}

	twice := func(what string, start func(id string) (*heph.Run, error)) {
		t.Helper()
		id := uuid.NewString()
		r, err := start(id)
		if err != nil || r.ID != id {
			t.Fatalf("%s: %v, %v; want run %s", what, r, err, id)
		}
		again, err := start(id)
		if !errors.Is(err, heph.ErrRunExists) || again == nil || again.ID != id {
			t.Fatalf("%s again: %v, %v; want run %s and ErrRunExists", what, again, err, id)
		}
		if again.CreatedAt != r.CreatedAt {
			t.Errorf("%s again: another run (created %v, first %v)", what, again.CreatedAt, r.CreatedAt)
		}
		for _, bad := range []string{"not-a-uuid", strings.ToUpper(uuid.NewString()), "{" + uuid.NewString() + "}"} {
			if _, err := start(bad); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "RunID") {
				t.Errorf("%s with run id %q: %v, want ErrInvalidInput naming the field", what, bad, err)
			}
		}
	}
	twice("StartRun", func(id string) (*heph.Run, error) {
		return e.c.StartRun(ctx, "approval", nil, &heph.StartOptions{RunID: id})
	})
	twice("StartDocument", func(id string) (*heph.Run, error) {
		return e.c.StartDocument(ctx, "doc-id", 0, nil, &heph.StartOptions{RunID: id})
	})
	twice("StartWorkflow", func(id string) (*heph.Run, error) {
		return e.c.StartWorkflow(ctx, "counter", struct{}{}, &heph.WorkflowOptions{RunID: id})
	})
	if n := len(e.listIDs(&heph.ListOptions{Flow: "approval"})); n != 1 {
		t.Errorf("%d runs of approval, want 1", n)
	}
	if _, err := e.c.SignalWithStart(ctx, "counter", "c-1", "increment", nil, struct{}{}, &heph.WorkflowOptions{RunID: uuid.NewString()}); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("SignalWithStart with a RunID: %v, want ErrInvalidInput", err)
	}

	id := uuid.NewString()
	first, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 1}, &heph.JobOptions{RunID: id})
	if err != nil || first.ID != id || first.Duplicate {
		t.Fatalf("InsertJob with a RunID: %+v, %v", first, err)
	}
	again, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 2}, &heph.JobOptions{RunID: id})
	if err != nil || again.ID != id || !again.Duplicate {
		t.Fatalf("InsertJob with the same RunID: %+v, %v; want the job, marked duplicate", again, err)
	}
	if _, err := heph.InsertJob(ctx, e.c, kind, jobArgs{N: 3}, &heph.JobOptions{RunID: "nope"}); !errors.Is(err, heph.ErrInvalidInput) || !strings.Contains(err.Error(), "JobOptions.RunID") {
		t.Errorf("InsertJob with a bad RunID: %v, want ErrInvalidInput naming JobOptions.RunID", err)
	}
}

func testHistoryAfter(t *testing.T, b Backend) {
	gate := make(chan struct{})
	started := make(chan struct{})
	fb := flow.New("gated")
	flow.Step(fb, "first", func(ctx context.Context, in any) (int, error) { return 1, nil })
	flow.Step(fb, "gate", func(ctx context.Context, in any) (int, error) {
		close(started)
		select {
		case <-gate:
			return 2, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, flow.DependsOn("first"))
	e := newEnv(t, b, nil, fb.MustBuild())
	ctx := ctxT(t)
	// A client without workers, on the same store: it learns of the
	// other client's commits by polling.
	watcher, err := heph.New(&heph.Config{Store: e.st, Logger: QuietLogger(), PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopClient(watcher) })

	r, err := e.c.StartRun(ctx, "gated", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	h, err := e.c.HistoryAfter(ctx, r.ID, 0, 0)
	if err != nil || len(h) == 0 || h[0].Seq != 1 {
		t.Fatalf("HistoryAfter(0) = %v, %v", h, err)
	}
	last := h[len(h)-1].Seq
	type answer struct {
		h   []heph.HistoryEvent
		err error
	}
	waiters := map[string]chan answer{}
	for name, c := range map[string]*heph.Client{"local": e.c, "remote": watcher} {
		ch := make(chan answer, 1)
		waiters[name] = ch
		go func() {
			h, err := c.HistoryAfter(ctx, r.ID, last, 30*time.Second)
			ch <- answer{h, err}
		}()
	}
	close(gate)
	for name, ch := range waiters {
		a := <-ch
		if a.err != nil || len(a.h) == 0 {
			t.Fatalf("%s waiter: %v, %v; want the entries after %d", name, a.h, a.err, last)
		}
		for _, ev := range a.h {
			if ev.Seq <= last {
				t.Errorf("%s waiter: entry %d, not after %d", name, ev.Seq, last)
			}
		}
	}
	if _, err := e.c.WaitRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	// Nothing comes after the end: a short wait returns nothing.
	all := e.history(r.ID)
	h, err = e.c.HistoryAfter(ctx, r.ID, all[len(all)-1].Seq, 20*time.Millisecond)
	if err != nil || h == nil || len(h) != 0 {
		t.Errorf("HistoryAfter the last entry: %v, %v; want an empty list", h, err)
	}
	for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
		if _, err := e.c.HistoryAfter(ctx, "no-such-run", 0, wait); !errors.Is(err, heph.ErrRunNotFound) {
			t.Errorf("HistoryAfter of an unknown run (wait %s): %v, want ErrRunNotFound", wait, err)
		}
	}
}

func testInsertJobJSON(t *testing.T, b Backend) {
	seen := make(chan jobArgs, 8)
	kind := job.MustNew("json_job", func(ctx context.Context, j *job.Job[jobArgs]) error {
		seen <- j.Args
		return nil
	}, &job.Options[jobArgs]{Priority: 3, ConcurrencyKey: func(a jobArgs) string { return "name-" + a.Name }})
	// No worker serves "parked": its jobs stay pending, holding their keys.
	held := job.MustNew("held_job", func(ctx context.Context, j *job.Job[jobArgs]) error { return nil },
		&job.Options[jobArgs]{Queue: "parked", Unique: &job.Unique{ByArgs: true}})
	e := jobEnv(t, b, nil, kind, held)
	ctx := ctxT(t)

	j, err := e.c.InsertJobJSON(ctx, "json_job", json.RawMessage(`{"n": 5, "name": "x"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.waitJob(j.ID, heph.StatusCompleted)
	if a := <-seen; a != (jobArgs{N: 5, Name: "x"}) {
		t.Errorf("the job saw %+v", a)
	}
	r, err := e.c.GetRun(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.ConcurrencyKey != "name-x" || r.Flow != "json_job" {
		t.Errorf("job run: flow %q, concurrency key %q; want json_job, name-x", r.Flow, r.ConcurrencyKey)
	}

	// Unique by arguments: a JSON insert and a typed one of the same
	// arguments are the same job, however the JSON is written.
	first, err := e.c.InsertJobJSON(ctx, "held_job", json.RawMessage(`{"name":"y","n":1}`), nil)
	if err != nil || first.Duplicate {
		t.Fatalf("first insert: %+v, %v", first, err)
	}
	dup, err := e.c.InsertJobJSON(ctx, "held_job", json.RawMessage(`{ "n": 1, "name": "y" }`), nil)
	if err != nil || !dup.Duplicate || dup.ID != first.ID {
		t.Errorf("same arguments as JSON: %+v, %v; want a duplicate of %s", dup, err, first.ID)
	}
	typed, err := heph.InsertJob(ctx, e.c, held, jobArgs{N: 1, Name: "y"}, nil)
	if err != nil || !typed.Duplicate || typed.ID != first.ID {
		t.Errorf("same arguments typed: %+v, %v; want a duplicate of %s", typed, err, first.ID)
	}
	if got := e.listIDs(&heph.ListOptions{Queue: "parked"}); !slices.Equal(got, []string{first.ID}) {
		t.Errorf("jobs on parked: %v, want %s", got, first.ID)
	}

	if _, err := e.c.InsertJobJSON(ctx, "no_such_kind", json.RawMessage(`{}`), nil); !errors.Is(err, heph.ErrFlowNotFound) || !strings.Contains(err.Error(), `"no_such_kind"`) {
		t.Errorf("unknown kind: %v, want ErrFlowNotFound naming it", err)
	}
	if _, err := e.c.InsertJobJSON(ctx, "json_job", json.RawMessage(`{"n": "five"}`), nil); !errors.Is(err, heph.ErrInvalidInput) {
		t.Errorf("arguments of the wrong type: %v, want ErrInvalidInput", err)
	}
}
