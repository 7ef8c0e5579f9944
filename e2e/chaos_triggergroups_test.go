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

// lossyGroups loses trigger work where a process can die: after a claim
// of firings or of groups committed, after a join committed (the
// firing's end with it), and before a group's end is written.
type lossyGroups struct {
	store.Store
	mu   sync.Mutex
	rng  *rand.Rand
	lost atomic.Int64
}

func (l *lossyGroups) lose() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rng.IntN(8) == 0 {
		l.lost.Add(1)
		return true
	}
	return false
}

func (l *lossyGroups) ClaimFirings(ctx context.Context, p *store.ClaimFiringsParams) ([]*store.Firing, error) {
	fs, err := l.Store.ClaimFirings(ctx, p)
	if err == nil && len(fs) > 0 && l.lose() {
		return nil, errors.New("chaos: the claimer died after its claim committed")
	}
	return fs, err
}

func (l *lossyGroups) JoinGroup(ctx context.Context, p *store.JoinGroupParams) error {
	err := l.Store.JoinGroup(ctx, p)
	if err == nil && l.lose() {
		return errors.New("chaos: the claimer died after its join committed")
	}
	return err
}

func (l *lossyGroups) ClaimGroups(ctx context.Context, p *store.ClaimGroupsParams) ([]*store.TriggerGroup, error) {
	gs, err := l.Store.ClaimGroups(ctx, p)
	if err == nil && len(gs) > 0 && l.lose() {
		return nil, errors.New("chaos: the claimer died after its group claim committed")
	}
	return gs, err
}

func (l *lossyGroups) EndGroup(ctx context.Context, p *store.EndGroupParams) error {
	if l.lose() {
		return errors.New("chaos: the claimer died before it ended the group")
	}
	return l.Store.EndGroup(ctx, p)
}

// TestChaosTriggerGroups: three processes declare a debounced, a
// throttled and a batching trigger (10 keys) and send 300 events among
// them (a third of the ids twice), while an eighth of their claims,
// joins and group ends are lost and, on PostgreSQL, every session is
// terminated every 100 ms while the workload makes progress. Every event must end in exactly one group
// per trigger, every group must start exactly one run with the input its
// events make, and no throttle window may start more than its limit.
func TestChaosTriggerGroups(t *testing.T) {
	inEachChaosBackend(t, runChaosTriggerGroups)
}

func runChaosTriggerGroups(t *testing.T, db chaosDB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*chaosTimeout)
	defer cancel()
	const events = 300
	clients, lossy := startGroupClients(t, ctx, db, "hephaestus-chaos-grp-")
	stopKiller, killRounds := chaosSessionKiller(t, ctx, db, "hephaestus-chaos-grp-")
	defer stopKiller()
	sendGroupEvents(ctx, clients, events, func(n int) (string, any) { return fmt.Sprint("g-", n), map[string]int{"n": n, "k": n % 10} })
	// Sessions are killed for 5 s more, while the joins and group starts
	// run, then no more: on a loaded machine a join (an advisory lock and
	// three writes) can take longer than the 100 ms between kills, and
	// killing without end could keep every one of them from committing
	// (CI on 317dc14 timed out so, under two busy loops and -race).
	time.AfterFunc(5*time.Second, stopKiller)
	reader := db.open(t, "chaos-reader")
	groups := waitGroupsEnded(ctx, t, reader, "g-", events)
	stopKiller()
	checkChaosGroups(ctx, t, reader, groups, events, 0)
	var lost int64
	for _, l := range lossy {
		lost += l.lost.Load()
	}
	t.Logf("%s: groups deb %d, thr %d, bat %d; lost %d, kill rounds %d", db.name, len(groups["deb"]), len(groups["thr"]), len(groups["bat"]), lost, killRounds.Load())
	if lost == 0 {
		t.Errorf("no fault happened")
	}
}

// sendGroupEvents sends "chaos.g" events 0..events-1 (event(n) is the
// n-th's id and data) from the clients: client i sends
// [100i, 100i+150), retrying until stored, so 100..149 and 200..249 are
// sent twice.
func sendGroupEvents(ctx context.Context, clients []*heph.Client, events int, event func(n int) (string, any)) {
	var senders sync.WaitGroup
	for i, c := range clients {
		senders.Go(func() {
			for n := 100 * i; n < min(100*i+150, events); n++ {
				id, data := event(n)
				for {
					_, err := c.SendEvent(ctx, "chaos.g", data, &heph.SendEventOptions{ID: id})
					if err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	senders.Wait()
}

// startGroupClients starts three processes (named prefix0..2) that
// declare a debounced, a throttled and a batching trigger of "chaos.g"
// events, keyed by event.data.k, each on a lossyGroups store.
func startGroupClients(t *testing.T, ctx context.Context, db chaosDB, prefix string) ([]*heph.Client, []*lossyGroups) {
	grouped := flow.New("grouped")
	flow.Step(grouped, "take", func(ctx context.Context, in any) (any, error) { return in, nil })
	triggers := []*heph.Trigger{
		{Name: "deb", Event: "chaos.g", Target: heph.TargetFlow, TargetName: "grouped", Input: "event.data.n", Key: "event.data.k", Debounce: 300 * time.Millisecond},
		{Name: "thr", Event: "chaos.g", Target: heph.TargetFlow, TargetName: "grouped", Input: "event.data.n", Key: "event.data.k",
			Throttle: &heph.Throttle{Limit: 3, Period: 500 * time.Millisecond}},
		{Name: "bat", Event: "chaos.g", Target: heph.TargetFlow, TargetName: "grouped", Input: "event.data.n", Key: "event.data.k",
			Batch: &heph.Batch{Size: 5, Window: 400 * time.Millisecond}},
	}
	var clients []*heph.Client
	var lossy []*lossyGroups
	for i := range 3 {
		l := &lossyGroups{Store: db.open(t, fmt.Sprint(prefix, i)), rng: rand.New(rand.NewPCG(uint64(i), 37))}
		c, err := heph.New(&heph.Config{Store: l, WorkerID: fmt.Sprint("grp-", i), Logger: chaosLogger(),
			LeaseDuration: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
			MinPollInterval: 20 * time.Millisecond, PollInterval: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Register(grouped.MustBuild()); err != nil {
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
	return clients, lossy
}

// waitGroupsEnded waits until every firing of events prefix0 ..
// prefix<events-1> is grouped and every group of the three triggers
// ended, and returns the groups. A firing once grouped stays so, and
// every event is sent by now, so the firings are read until all are
// grouped and then only the groups (each read of the firings is one
// query per event).
func waitGroupsEnded(ctx context.Context, t *testing.T, reader store.Store, prefix string, events int) map[string][]*store.TriggerGroup {
	grouped := false
	for {
		open := 0
		if !grouped {
			open = pendingFirings(ctx, t, reader, prefix, events)
			grouped = open == 0
		}
		out := map[string][]*store.TriggerGroup{}
		for _, tr := range []string{"deb", "thr", "bat"} {
			if !grouped {
				break
			}
			gs, err := reader.ListTriggerGroups(ctx, &store.ListTriggerGroupsParams{Trigger: tr, Limit: store.MaxGroupsPage})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range gs {
				if g.Status == store.GroupOpen {
					open++
				}
			}
			out[tr] = gs
		}
		if open == 0 {
			return out
		}
		if ctx.Err() != nil {
			t.Fatalf("%d firings and groups still open", open)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pendingFirings counts the firings of events prefix0 ..
// prefix<events-1> that wait to be grouped; any other status than
// pending and grouped fails the test.
func pendingFirings(ctx context.Context, t *testing.T, reader store.Store, prefix string, events int) int {
	open := 0
	for n := range events {
		fs, err := reader.Firings(ctx, fmt.Sprint(prefix, n))
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 3 {
			t.Fatalf("%s%d has %d firings, want 3: %+v", prefix, n, len(fs), fs)
		}
		for _, f := range fs {
			if f.Status == store.FiringPending {
				open++
			} else if f.Status != store.FiringGrouped {
				t.Fatalf("%s%d by %s: %s (%s)", prefix, n, f.Trigger, f.Status, f.Error)
			}
		}
	}
	return open
}

// checkChaosGroups checks that each event is in one group per trigger,
// each group started one run with its events' input, and no throttle
// window of a key holds more than its limit; "grouped" has otherRuns
// runs besides theirs.
func checkChaosGroups(ctx context.Context, t *testing.T, reader store.Store, groups map[string][]*store.TriggerGroup, events, otherRuns int) {
	runs := map[string]string{}
	for tr, gs := range groups {
		seen := map[string]int64{}
		windows := map[string]int{}
		for _, g := range gs {
			if g.Status != store.GroupStarted || len(g.Events) == 0 {
				t.Errorf("%s group %d: %s (%s) with %d events", tr, g.ID, g.Status, g.Error, len(g.Events))
				continue
			}
			var ns []int
			for _, e := range g.Events {
				if prev, ok := seen[e.EventID]; ok {
					t.Errorf("%s: %s in groups %d and %d", tr, e.EventID, prev, g.ID)
				}
				seen[e.EventID] = g.ID
				var n int
				if _, err := fmt.Sscanf(e.EventID, "g-%d", &n); err != nil {
					t.Errorf("%s group %d: event id %q: %v", tr, g.ID, e.EventID, err)
				}
				ns = append(ns, n)
				if fmt.Sprint(n%10) != g.Key {
					t.Errorf("%s group %d of key %s holds %s", tr, g.ID, g.Key, e.EventID)
				}
			}
			if prev, ok := runs[g.RunID]; ok {
				t.Errorf("run %s started by %s group %d and %s", g.RunID, tr, g.ID, prev)
			}
			runs[g.RunID] = fmt.Sprint(tr, " group ", g.ID)
			want, _ := json.Marshal(ns[len(ns)-1])
			switch tr {
			case "bat":
				if len(ns) > 5 {
					t.Errorf("batch %d holds %d events", g.ID, len(ns))
				}
				want, _ = json.Marshal(ns)
			case "thr":
				windows[g.Key+"@"+g.DueAt.String()]++
				if n := windows[g.Key+"@"+g.DueAt.String()]; n > 3 {
					t.Errorf("throttle window %s@%v starts %d runs", g.Key, g.DueAt, n)
				}
			}
			r, err := reader.GetRun(ctx, g.RunID)
			if err != nil {
				t.Errorf("the run of %s group %d: %v", tr, g.ID, err)
				continue
			}
			var got, exp any
			if json.Unmarshal(r.Input, &got) != nil || json.Unmarshal(want, &exp) != nil || fmt.Sprint(got) != fmt.Sprint(exp) {
				t.Errorf("the run of %s group %d has input %s, want %s", tr, g.ID, r.Input, want)
			}
		}
		if len(seen) != events {
			t.Errorf("%s: %d events in groups, want %d", tr, len(seen), events)
		}
	}
	if n := countRuns(ctx, t, reader, "grouped"); n != len(runs)+otherRuns {
		t.Errorf("%d runs of grouped, %d groups started and %d runs before", n, len(runs), otherRuns)
	}
}

// countRuns counts the runs of a workflow, page by page.
func countRuns(ctx context.Context, t *testing.T, reader store.Store, workflow string) int {
	n, cursor := 0, ""
	for {
		page, err := reader.ListRuns(ctx, &store.ListRunsParams{Workflow: workflow, Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Runs)
		if page.Next == "" {
			return n
		}
		cursor = page.Next
	}
}
