package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/store"
)

// lossyTriggers loses some of a process's trigger work at the two points
// where a process can die: after a claim of firings committed (the
// claimer never acts on them) and after it started a firing's run but
// before the firing's end was written. Both leave the firing pending
// under a lease that has to run out.
type lossyTriggers struct {
	store.Store
	mu                   sync.Mutex
	rng                  *rand.Rand
	lostClaims, lostEnds atomic.Int64
}

func (l *lossyTriggers) lose() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(8) == 0
}

// ClaimFirings loses a process's first claim that leased firings, and an
// eighth of the later ones: under load a claim leases many firings, and
// a process may make too few for an eighth alone to lose one (CI on
// d2e10ca: 0 lost claims).
func (l *lossyTriggers) ClaimFirings(ctx context.Context, p *store.ClaimFiringsParams) ([]*store.Firing, error) {
	fs, err := l.Store.ClaimFirings(ctx, p)
	if err == nil && len(fs) > 0 && (l.lostClaims.Load() == 0 || l.lose()) {
		l.lostClaims.Add(1)
		return nil, errors.New("chaos: the claimer died after its claim committed")
	}
	return fs, err
}

func (l *lossyTriggers) EndFiring(ctx context.Context, p *store.EndFiringParams) error {
	if l.lose() {
		l.lostEnds.Add(1)
		return errors.New("chaos: the claimer died before it ended the firing")
	}
	return l.Store.EndFiring(ctx, p)
}

// TestChaosTriggers: three processes (clients, each on its own store and
// connections) declare the same three triggers and send 300 events among
// them, a third of the ids sent twice by two processes. An eighth of their
// claims are lost after committing and an eighth of their firing ends are
// lost after the run started; on PostgreSQL every session is also
// terminated every 100 ms while the workload makes progress. Each (event, trigger) whose filter matches must
// start exactly one run, whose input the trigger's mapping made.
func TestChaosTriggers(t *testing.T) {
	inEachChaosBackend(t, runChaosTriggers)
}

func runChaosTriggers(t *testing.T, db chaosDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*chaosTimeout)
	defer cancel()
	const events = 300
	fired := flow.New("fired")
	flow.Step(fired, "take", func(ctx context.Context, in struct{ N int }) (int, error) { return in.N, nil })
	triggers := []*heph.Trigger{
		{Name: "all", Event: "chaos.ev", Target: heph.TargetFlow, TargetName: "fired"},
		{Name: "even", Event: "chaos.ev", Target: heph.TargetFlow, TargetName: "fired", Filter: "int(event.data.n) % 2 == 0"},
		{Name: "big", Event: "chaos.ev", Target: heph.TargetFlow, TargetName: "fired", Filter: "event.data.n >= 100",
			Input: `{"n": int(event.data.n) + 1000}`},
	}
	var clients []*heph.Client
	var lossy []*lossyTriggers
	for i := range 3 {
		l := &lossyTriggers{Store: db.open(t, fmt.Sprintf("hephaestus-chaos-trig-%d", i)), rng: rand.New(rand.NewPCG(uint64(i), 31))}
		c, err := heph.New(&heph.Config{Store: l, WorkerID: fmt.Sprint("trig-", i), Logger: chaosLogger(),
			LeaseDuration: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
			MinPollInterval: 20 * time.Millisecond, PollInterval: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(fired.MustBuild()); err != nil {
			t.Fatal(err)
		}
		if err := c.DeclareTriggers(ctx, triggers...); err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		clients, lossy = append(clients, c), append(lossy, l)
	}

	stopKiller, killRounds := chaosSessionKiller(t, ctx, db, "hephaestus-chaos-trig-")
	defer stopKiller()

	// Process i sends ids [100i, 100i+150): ids 100..149 and 200..249
	// twice, by two processes, and 0..49 by process 0 alone.
	var senders sync.WaitGroup
	for i, c := range clients {
		senders.Go(func() {
			for n := 100 * i; n < min(100*i+150, events); n++ {
				for {
					_, err := c.SendEvent(ctx, "chaos.ev", map[string]int{"n": n}, &heph.SendEventOptions{ID: fmt.Sprint("ev-", n)})
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						t.Errorf("send ev-%d: %v", n, err)
						return
					}
					time.Sleep(10 * time.Millisecond) // a killed connection: send again
				}
			}
		})
	}
	senders.Wait()
	for n := 250; n < events; n++ { // the ids no process sent: 250..299
		// Sessions are still killed, so a send can fail any
		// number of times in a row: send again until it is stored.
		for {
			_, err := clients[2].SendEvent(ctx, "chaos.ev", map[string]int{"n": n}, &heph.SendEventOptions{ID: fmt.Sprint("ev-", n)})
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("send ev-%d: %v", n, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// Wait until every firing ended (leases of lost claims run out).
	reader := db.open(t, "chaos-reader")
	want := map[string]int{}
	for {
		pending := 0
		for n := range events {
			fs, err := reader.Firings(ctx, fmt.Sprint("ev-", n))
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) != 3 {
				t.Fatalf("ev-%d has %d firings, want 3: %+v", n, len(fs), fs)
			}
			for _, f := range fs {
				if f.Status == store.FiringPending {
					pending++
				}
			}
		}
		if pending == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d firings still pending", pending)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopKiller()

	// Exactly one run per matched (event, trigger), with the mapped input.
	runs := map[string]string{}
	for n := range events {
		fs, err := reader.Firings(ctx, fmt.Sprint("ev-", n))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			match := f.Trigger == "all" || f.Trigger == "even" && n%2 == 0 || f.Trigger == "big" && n >= 100
			switch {
			case match && f.Status != store.FiringStarted, !match && f.Status != store.FiringSkipped:
				t.Errorf("ev-%d by %s: %s (%s)", n, f.Trigger, f.Status, f.Error)
				continue
			case !match:
				continue
			}
			if prev, ok := runs[f.RunID]; ok {
				t.Errorf("run %s started by ev-%d/%s and %s", f.RunID, n, f.Trigger, prev)
			}
			runs[f.RunID] = fmt.Sprintf("ev-%d/%s", n, f.Trigger)
			want[f.Trigger]++
			r, err := reader.GetRun(ctx, f.RunID)
			if err != nil {
				t.Errorf("the run of ev-%d/%s: %v", n, f.Trigger, err)
				continue
			}
			var in struct{ N int }
			wantN := n
			if f.Trigger == "big" {
				wantN += 1000
			}
			if json.Unmarshal(r.Input, &in) != nil || in.N != wantN {
				t.Errorf("the run of ev-%d/%s has input %s, want n %d", n, f.Trigger, r.Input, wantN)
			}
		}
	}
	page, err := reader.ListRuns(ctx, &store.ListRunsParams{Workflow: "fired", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != events+events/2+events-100 || len(runs) != len(page.Runs) {
		t.Errorf("%d runs of fired, %d firings started; want %d", len(page.Runs), len(runs), events+events/2+events-100)
	}
	var lostClaims, lostEnds int64
	for _, l := range lossy {
		lostClaims += l.lostClaims.Load()
		lostEnds += l.lostEnds.Load()
	}
	t.Logf("%s: %d runs for %d events x 3 triggers (all %d, even %d, big %d); lost claims %d, lost ends %d, kill rounds %d",
		db.name, len(page.Runs), events, want["all"], want["even"], want["big"], lostClaims, lostEnds, killRounds.Load())
	if lostClaims == 0 || lostEnds == 0 {
		t.Errorf("the faults did not happen: %d lost claims, %d lost ends", lostClaims, lostEnds)
	}
}
