package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// lossyWaits loses, after they committed, an eighth of a process's wait
// matches and of its delivered marks: the process acts as if it died
// there, and the wait is carried out again by the next pass of any
// process.
type lossyWaits struct {
	store.Store
	mu                     sync.Mutex
	rng                    *rand.Rand
	lostMatches, lostMarks atomic.Int64
}

func (l *lossyWaits) lose() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(8) == 0
}

func (l *lossyWaits) MatchEventWait(ctx context.Context, id, eventID string, now time.Time) (*store.EventWait, error) {
	w, err := l.Store.MatchEventWait(ctx, id, eventID, now)
	if err == nil && l.lose() {
		l.lostMatches.Add(1)
		return nil, errors.New("chaos: the matcher died after its match committed")
	}
	return w, err
}

func (l *lossyWaits) DeliveredEventWait(ctx context.Context, id string, now time.Time) error {
	err := l.Store.DeliveredEventWait(ctx, id, now)
	if err == nil && l.lose() {
		l.lostMarks.Add(1)
		return errors.New("chaos: the deliverer died after its mark committed")
	}
	return err
}

type chaosWaitIn struct {
	K string `json:"k"`
}

var chaosWaitWorkflow = workflow.New("chaos.wait.wf", func(ctx workflow.Context, in chaosWaitIn) (string, error) {
	e, err := workflow.WaitForEvent(ctx, "chaos.wait", &workflow.EventWaitOptions{Match: "event.data.k == input.k", Input: in, LookBack: time.Hour})
	if err != nil {
		return "", err
	}
	return e.ID, nil
})

func chaosWaitFlow(c *heph.Client) *flow.Flow {
	b := flow.New("chaos.wait.flow").Start("await")
	flow.EventStep(b, "await", func(ctx context.Context, in chaosWaitIn) (flow.Result[any], error) {
		if err := c.AwaitEvent(ctx, "chaos.wait", &heph.AwaitEventOptions{Match: "event.data.k == input.k", Input: in, LookBack: time.Hour}); err != nil {
			return flow.Result[any]{}, err
		}
		return flow.Wait[any](), nil
	}, flow.Events(heph.EventReceived), flow.Waits(0))
	flow.Step(b, "got", func(ctx context.Context, in any) (string, error) {
		e, err := flow.Output[heph.EventRecord](ctx, "await")
		return "got " + e.ID, err
	})
	b.Edge("await", heph.EventReceived, "got")
	return b.MustBuild()
}

// TestChaosEventWaits: three processes run 20 workflows and 20 flows that
// each wait for the event of their key, with look-back; two matching
// events are sent per key (k-a, then k-b). An eighth of the processes'
// matches and delivered marks are lost after they committed; on
// PostgreSQL every session is also terminated every 100 ms while the workload makes progress. Every run
// completes with its first event, k-a, received once (one heph.event
// signal in a workflow's history).
func TestChaosEventWaits(t *testing.T) {
	inEachChaosBackend(t, runChaosEventWaits)
}

func runChaosEventWaits(t *testing.T, db chaosDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*chaosTimeout)
	defer cancel()
	const perKind = 20
	var clients []*heph.Client
	var lossy []*lossyWaits
	for i := range 3 {
		l := &lossyWaits{Store: db.open(t, fmt.Sprintf("hephaestus-chaos-ew-%d", i)), rng: rand.New(rand.NewPCG(uint64(i), 37))}
		c, err := heph.New(&heph.Config{Store: l, WorkerID: fmt.Sprint("wait-", i), Logger: chaosLogger(),
			LeaseDuration: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
			MinPollInterval: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(chaosWaitFlow(c)); err != nil {
			t.Fatal(err)
		}
		if err := c.RegisterWorkflows(chaosWaitWorkflow); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		clients, lossy = append(clients, c), append(lossy, l)
	}
	stopKiller, killRounds := chaosSessionKiller(t, ctx, db, "hephaestus-chaos-ew-")
	defer stopKiller()

	retry := func(what string, fn func() error) {
		t.Helper()
		for {
			err := fn()
			if err == nil || errors.Is(err, heph.ErrRunExists) {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	runs := map[string]string{} // run id -> key
	var kinds = map[string]string{}
	for n := range 2 * perKind {
		c := clients[n%3]
		k := fmt.Sprint("k", n)
		id := uuidFor(k)
		if n < perKind {
			retry("start workflow "+k, func() error {
				_, err := c.StartWorkflow(ctx, "chaos.wait.wf", chaosWaitIn{K: k}, &heph.WorkflowOptions{RunID: id})
				return err
			})
			kinds[id] = "workflow"
		} else {
			retry("start flow "+k, func() error {
				_, err := c.StartRun(ctx, "chaos.wait.flow", chaosWaitIn{K: k}, &heph.StartOptions{RunID: id})
				return err
			})
			kinds[id] = "flow"
		}
		runs[id] = k
		for _, suffix := range []string{"-a", "-b"} {
			retry("send "+k+suffix, func() error {
				_, err := clients[(n+1)%3].SendEvent(ctx, "chaos.wait", map[string]string{"k": k}, &heph.SendEventOptions{ID: k + suffix})
				return err
			})
		}
	}

	// Sessions are killed for 5 s more, while the waits are matched and
	// delivered, then no more: on a loaded machine killing without end
	// can keep every transaction from committing (as it did to
	// TestChaosTriggerGroups in CI under two busy loops and -race).
	time.AfterFunc(5*time.Second, stopKiller)
	reader := db.open(t, "chaos-reader")
	for id, k := range runs {
		var r *store.Run
		for {
			var err error
			r, err = reader.GetRun(ctx, id)
			if err == nil && r.Status.Terminal() {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s (%s, %s) did not end: %v %+v", id, kinds[id], k, err, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r.Status != hephtype.StatusCompleted || !strings.Contains(string(r.Output), k+"-a") {
			t.Errorf("%s run of %s: %s %s %s, want completed with %s-a", kinds[id], k, r.Status, r.Output, r.Error, k)
		}
		if kinds[id] != "workflow" {
			continue
		}
		h, err := reader.History(ctx, &store.HistoryParams{RunID: id})
		if err != nil {
			t.Fatal(err)
		}
		signals := 0
		for _, e := range h {
			if e.Kind == hephtype.EventSignalReceived && strings.HasPrefix(e.Name, "heph.event:") {
				signals++
			}
		}
		if signals != 1 {
			t.Errorf("workflow run of %s has %d heph.event signals, want 1", k, signals)
		}
	}
	stopKiller()
	var lostMatches, lostMarks int64
	for _, l := range lossy {
		lostMatches += l.lostMatches.Load()
		lostMarks += l.lostMarks.Load()
	}
	t.Logf("%s: %d runs; lost matches %d, lost delivered marks %d, kill rounds %d", db.name, len(runs), lostMatches, lostMarks, killRounds.Load())
}

// uuidFor is a run id derived from a key, so that a start retried after a
// killed session finds its run.
func uuidFor(k string) string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012x", hashKey(k))
}

func hashKey(k string) uint64 {
	var h uint64 = 1469598103934665603
	for i := range len(k) {
		h = (h ^ uint64(k[i])) * 1099511628211
	}
	return h & 0xffffffffffff
}
