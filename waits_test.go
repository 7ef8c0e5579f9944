package hephaestus_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/clock"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/job"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

var (
	waitsSignal = workflow.New("waits.signal", func(ctx workflow.Context, _ string) (string, error) {
		return workflow.WaitSignal[string](ctx, "activate")
	})
	waitsPhase = workflow.New("waits.phase", func(ctx workflow.Context, _ string) (int, error) {
		n, _, err := workflow.PhaseWithTimeout(ctx, 0, time.Hour,
			workflow.OnSignal("cancel", func(ctx workflow.Context, _ string, n int) workflow.Next[int] { return workflow.Stop(n) }),
			workflow.OnUpdate("approve", func(ctx workflow.Context, _ string, n int) (workflow.Reply[int, int], error) {
				return workflow.Respond(n+1, n+1), nil
			}))
		return n, err
	})
	waitsParent = workflow.New("waits.parent", func(ctx workflow.Context, in string) (string, error) {
		return waitsSignal.ExecuteChild(ctx, in)
	})
)

// waitKinds is a wait without the fields a test cannot know beforehand.
type waitKinds struct {
	Kind heph.WaitKind
	Name string
	Step string
}

func kinds(ws []heph.Wait) []waitKinds {
	out := []waitKinds{}
	for _, w := range ws {
		out = append(out, waitKinds{w.Kind, w.Name, w.Step})
	}
	return out
}

// waitUntilWaits polls WaitingFor until it lists want (the run gets
// there when a worker has decided it).
func waitUntilWaits(t *testing.T, ctx context.Context, c *heph.Client, runID string, want []waitKinds) []heph.Wait {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var got []heph.Wait
	waitFor(t, ctx, func() bool {
		var err error
		got, err = c.WaitingFor(ctx, runID)
		if err != nil && ctx.Err() == nil {
			t.Fatalf("WaitingFor(%s): %v", runID, err)
		}
		return slices.Equal(kinds(got), want)
	})
	return got
}

// A code-first workflow's waits are what its code is blocked on: the
// signal it receives, the signals and updates its phase handles and the
// phase's timeout with its due time, its child run; they change when the
// workflow moves on, and a finished run waits for nothing.
func TestWaitingForWorkflows(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			c := startClient(t, ctx, &heph.Config{Store: open(t), PollInterval: 20 * time.Millisecond, Logger: quietLogger()}, func(c *heph.Client) error {
				return c.RegisterWorkflows(waitsSignal, waitsPhase, waitsParent)
			})

			sig, err := c.StartWorkflow(ctx, "waits.signal", "x", nil)
			if err != nil {
				t.Fatal(err)
			}
			waitUntilWaits(t, ctx, c, sig.ID, []waitKinds{{heph.WaitKindSignal, "activate", ""}})

			ph, err := c.StartWorkflow(ctx, "waits.phase", "x", nil)
			if err != nil {
				t.Fatal(err)
			}
			got := waitUntilWaits(t, ctx, c, ph.ID, []waitKinds{{heph.WaitKindSignal, "cancel", ""}, {heph.WaitKindUpdate, "approve", ""}, {heph.WaitKindTimer, "", ""}})
			h, err := c.History(ctx, ph.ID)
			if err != nil {
				t.Fatal(err)
			}
			var fire struct {
				FireAt time.Time `json:"fire_at"`
			}
			for _, e := range h {
				if e.Kind == hephtype.EventTimerStarted {
					if err := json.Unmarshal(e.Data, &fire); err != nil {
						t.Fatal(err)
					}
				}
			}
			if fire.FireAt.IsZero() || !got[2].Due.Equal(fire.FireAt) {
				t.Errorf("timer wait due %v, want the timer's fire time %v", got[2].Due, fire.FireAt)
			}

			parent, err := c.StartWorkflow(ctx, "waits.parent", "y", nil)
			if err != nil {
				t.Fatal(err)
			}
			got = waitUntilWaits(t, ctx, c, parent.ID, []waitKinds{{heph.WaitKindChild, "waits.signal", ""}})
			// The wait names the child's id from the decision on; the run
			// itself is created by a task after it.
			var child *heph.Run
			waitFor(t, ctx, func() bool { child, err = c.GetRun(ctx, got[0].RunID); return err == nil })
			if child.ParentID != parent.ID {
				t.Fatalf("the child wait names run %q (%v), not a child of the parent", got[0].RunID, err)
			}
			waitUntilWaits(t, ctx, c, child.ID, []waitKinds{{heph.WaitKindSignal, "activate", ""}})

			// Moving on: the signal completes the run, which then waits
			// for nothing; the parent too.
			for _, id := range []string{sig.ID, child.ID} {
				if err := c.SignalWorkflow(ctx, id, "activate", "go"); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range []string{sig.ID, parent.ID} {
				if _, err := c.WaitRun(ctx, id); err != nil {
					t.Fatal(err)
				}
				if got, err := c.WaitingFor(ctx, id); err != nil || len(got) != 0 {
					t.Errorf("finished run %s waits for %v, %v; want nothing", id, got, err)
				}
			}
			if _, err := c.WaitingFor(ctx, "no-such-run"); !errors.Is(err, heph.ErrRunNotFound) {
				t.Errorf("WaitingFor(unknown run): %v, want ErrRunNotFound", err)
			}
		})
	}
}

// A flow's waiting step (resumed from outside, with its events) and
// approval gate (assignees and deadline) are waits.
func TestWaitingForFlowSteps(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			b := flow.New("waits.async").Start("hold")
			flow.EventStep(b, "hold", func(ctx context.Context, in json.RawMessage) (flow.Result[json.RawMessage], error) {
				return flow.Wait[json.RawMessage](), nil
			}, flow.Waits(0), flow.Events("paid", "lost"))
			async := b.Edge("hold", "paid", flow.Done).Edge("hold", "lost", flow.Done).MustBuild()
			doc := "name: waits.gated\nsteps:\n  ask:\n    approval: {prompt: \"Ship?\", assignees: {users: [ann], groups: [finance]}, deadline: 2h}\n    on: {approved: done, rejected: done, expired: done}\n"
			gated, err := flowdoc.Load("gated.yaml", []byte(doc), nil)
			if err != nil {
				t.Fatal(err)
			}
			c := startClient(t, ctx, &heph.Config{Store: open(t), PollInterval: 20 * time.Millisecond, Logger: quietLogger()}, func(c *heph.Client) error {
				return c.Register(async, gated)
			})
			a, err := c.StartRun(ctx, "waits.async", map[string]any{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := waitUntilWaits(t, ctx, c, a.ID, []waitKinds{{heph.WaitKindStep, "", "hold"}})
			if !slices.Equal(got[0].Events, []string{"paid", "lost"}) {
				t.Errorf("waiting step's events %v, want [paid lost]", got[0].Events)
			}
			g, err := c.StartRun(ctx, "waits.gated", map[string]any{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got = waitUntilWaits(t, ctx, c, g.ID, []waitKinds{{heph.WaitKindGate, "", "ask"}})
			w := got[0]
			if !slices.Equal(w.Users, []string{"ann"}) || !slices.Equal(w.Groups, []string{"finance"}) || w.Prompt != "Ship?" {
				t.Errorf("gate wait %+v: want users [ann], groups [finance], prompt Ship?", w)
			}
			if w.Since.IsZero() || !w.Due.Equal(w.Since.Add(2*time.Hour)) {
				t.Errorf("gate wait since %v due %v: want the deadline 2h after it started to wait", w.Since, w.Due)
			}
			if err := c.ResumeRun(ctx, a.ID, "paid", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.WaitRun(ctx, a.ID); err != nil {
				t.Fatal(err)
			}
			if got, err := c.WaitingFor(ctx, a.ID); err != nil || len(got) != 0 {
				t.Errorf("resumed run waits for %v, %v", got, err)
			}
		})
	}
}

// What holds back a run's due task: no live worker with its handler, a
// paused queue, a full queue, a task due later. No worker runs here: the
// client is not started, and a lease is taken by hand to fill a queue.
func TestWaitingForTasks(t *testing.T) {
	t.Parallel()
	for name, open := range logBackends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			start := time.Date(2032, 5, 6, 7, 0, 0, 0, time.UTC)
			clk := clock.NewFake(start)
			st := open(t)
			c, err := heph.New(&heph.Config{Store: st, Clock: clk, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Stop(context.Background()) })
			mk := func(name, queue string) *flow.Flow {
				b := flow.New(name).Start("s")
				flow.Step(b, "s", func(ctx context.Context, in int) (int, error) { return in, nil }, flow.Queue(queue))
				return b.MustBuild()
			}
			note := job.MustNew("waits.note", func(ctx context.Context, j *job.Job[string]) error { return nil }, nil)
			if err := c.Register(mk("waits.nw", "work"), mk("waits.paused", "held"), mk("waits.full", "narrow"), mk("waits.keyed", "keyed"), mk("waits.rated", "rated")); err != nil {
				t.Fatal(err)
			}
			if err := c.RegisterJobs(note); err != nil {
				t.Fatal(err)
			}
			nw, err := c.StartRun(ctx, "waits.nw", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.WaitingFor(ctx, nw.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := []waitKinds{{heph.WaitKindNoWorker, `flow "waits.nw" version 1`, "s"}}; !slices.Equal(kinds(got), want) || got[0].Queue != "work" {
				t.Errorf("no worker: got %+v, want %v on queue work", got, want)
			}
			// A worker that takes the queue and has the flow: nothing holds
			// the task back any more.
			if err := st.RegisterWorker(ctx, &store.Worker{ID: "w", Queues: []string{"work"}, Handlers: []string{store.FlowHandler("waits.nw", 1)}, SeenAt: start, ExpiresAt: start.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if got, err := c.WaitingFor(ctx, nw.ID); err != nil || len(got) != 0 {
				t.Errorf("served: got %+v, %v; want nothing", got, err)
			}

			if err := c.PauseQueue(ctx, "held"); err != nil {
				t.Fatal(err)
			}
			p, err := c.StartRun(ctx, "waits.paused", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err = c.WaitingFor(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := []waitKinds{{heph.WaitKindQueuePaused, "", "s"}}; !slices.Equal(kinds(got), want) || got[0].Queue != "held" {
				t.Errorf("paused: got %+v, want %v on queue held", got, want)
			}

			if err := c.SetQueue(ctx, "narrow", heph.QueueOptions{MaxRunning: 1}); err != nil {
				t.Fatal(err)
			}
			first, err := c.StartRun(ctx, "waits.full", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			second, err := c.StartRun(ctx, "waits.full", 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			claimed, err := st.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{"narrow"}, Owner: "hand", Limit: 1, LeaseFor: time.Hour, Now: clk.Now()})
			if err != nil || len(claimed) != 1 || claimed[0].RunID != first.ID {
				t.Fatalf("claimed %v, %v; want the first run's task", claimed, err)
			}
			got, err = c.WaitingFor(ctx, second.ID)
			if err != nil {
				t.Fatal(err)
			}
			if want := []waitKinds{{heph.WaitKindQueueLimit, "", "s"}}; !slices.Equal(kinds(got), want) || got[0].Limit != 1 || got[0].Queue != "narrow" {
				t.Errorf("full queue: got %+v, want %v with limit 1", got, want)
			}
			if got, err := c.WaitingFor(ctx, first.ID); err != nil || len(got) != 0 {
				t.Errorf("the running run waits for %+v, %v; want nothing", got, err)
			}

			// A concurrency key at its limit; a rate limit reached in its
			// window (the next opens at the top of the hour).
			if err := c.SetQueue(ctx, "keyed", heph.QueueOptions{MaxRunningPerKey: 1}); err != nil {
				t.Fatal(err)
			}
			if err := c.SetQueue(ctx, "rated", heph.QueueOptions{Rate: heph.RateLimit{Limit: 1, Period: time.Hour}}); err != nil {
				t.Fatal(err)
			}
			var held []string
			for _, name := range []string{"waits.keyed", "waits.rated"} {
				var ids []string
				for i := range 2 {
					r, err := c.StartRun(ctx, name, i, &heph.StartOptions{ConcurrencyKey: "acme"})
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, r.ID)
				}
				claimed, err := st.ClaimTasks(ctx, &store.ClaimParams{Queues: []string{name[len("waits."):]}, Owner: "hand", Limit: 1, LeaseFor: time.Hour, Now: clk.Now()})
				if err != nil || len(claimed) != 1 {
					t.Fatalf("%s: claimed %v, %v; want one task", name, claimed, err)
				}
				for _, id := range ids {
					if id != claimed[0].RunID {
						held = append(held, id)
					}
				}
			}
			got, err = c.WaitingFor(ctx, held[0])
			if err != nil {
				t.Fatal(err)
			}
			if want := []waitKinds{{heph.WaitKindConcurrencyKey, "acme", "s"}}; !slices.Equal(kinds(got), want) || got[0].Limit != 1 || got[0].Queue != "keyed" {
				t.Errorf("key at its limit: got %+v, want %v with limit 1", got, want)
			}
			got, err = c.WaitingFor(ctx, held[1])
			if err != nil {
				t.Fatal(err)
			}
			if want := []waitKinds{{heph.WaitKindRateLimit, "", "s"}}; !slices.Equal(kinds(got), want) || got[0].Limit != 1 || !got[0].Due.Equal(start.Truncate(time.Hour).Add(time.Hour)) {
				t.Errorf("rate limit: got %+v, want %v with limit 1, due at the next window", got, want)
			}

			later, err := heph.InsertJob(ctx, c, note, "later", &heph.JobOptions{RunAfter: 24 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			got, err = c.WaitingFor(ctx, later.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Kind != heph.WaitKindScheduled || !got[0].Due.Equal(start.Add(24*time.Hour)) {
				t.Errorf("job due tomorrow: got %+v, want one scheduled wait due %v", got, start.Add(24*time.Hour))
			}
		})
	}
}
