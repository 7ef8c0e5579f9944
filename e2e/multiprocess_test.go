package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

const (
	multiRuns     = 1000
	multiProcs    = 3
	multiEnvDSN   = "HEPH_MULTI_CHILD_DSN"
	multiEnvChild = "HEPH_MULTI_CHILD_ID"
)

// multiFlow is a three-step chain; each step returns the id of the process
// that ran it, and says on stdout when it starts and ends.
func multiFlow(child string, out func(string)) *flow.Flow {
	b := flow.New("multi")
	for i := range 3 {
		name := fmt.Sprintf("m%d", i)
		var opts []flow.StepOption
		if i > 0 {
			opts = append(opts, flow.DependsOn(fmt.Sprintf("m%d", i-1)))
		}
		flow.Step(b, name, func(ctx context.Context, in int) (string, error) {
			info, _ := flow.CallInfo(ctx)
			out(fmt.Sprintf("start %s %s", info.RunID, name))
			select {
			case <-time.After(time.Duration(1000+rand.IntN(4000)) * time.Microsecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			out(fmt.Sprintf("done %s %s", info.RunID, name))
			return child, nil
		}, opts...)
	}
	return b.MustBuild()
}

// multiChild is one worker process of TestMultiProcess (see TestMain): it
// works until every run has completed.
func multiChild(dsn, id string) error {
	ctx := context.Background()
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn, MaxConns: 8})
	if err != nil {
		return err
	}
	defer st.Close()
	var mu sync.Mutex
	out := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(s)
	}
	c, err := heph.New(&heph.Config{
		Store: st, Queues: map[string]int{"default": 8}, WorkerID: "child-" + id,
		LeaseDuration: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		MinPollInterval: 20 * time.Millisecond, PollInterval: 200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := c.Register(multiFlow(id, out)); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	for {
		l, err := c.ListRuns(ctx, &heph.ListOptions{Flow: "multi", Statuses: []hephtype.RunStatus{heph.StatusCompleted}, Limit: 1000})
		if err != nil {
			return err
		}
		if len(l.Runs) == multiRuns {
			break
		}
		time.Sleep(100 * time.Millisecond) // the child polls the shared database; the test itself never sleeps
	}
	return c.Stop(ctx)
}

// TestMultiProcess: three OS processes share one PostgreSQL database and
// run 1,000 runs of a three-step flow; one is killed with SIGKILL part-way.
// Every run completes, no step completion is applied twice, and the steps
// the dead process was running are completed by the survivors once its
// leases expire.
func TestMultiProcess(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	starter, err := heph.New(&heph.Config{Store: st, Logger: e2e.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = starter.Stop(ctx) }()
	if err := starter.Register(multiFlow("starter", func(string) {})); err != nil {
		t.Fatal(err)
	}
	reqs := make([]heph.StartRequest, multiRuns)
	for i := range reqs {
		reqs[i] = heph.StartRequest{Input: i}
	}
	if _, err := starter.StartRuns(ctx, "multi", reqs); err != nil {
		t.Fatal(err)
	}

	type proc struct {
		cmd     *exec.Cmd
		started map[string]bool // "run step" started and not done
		done    atomic.Int64
		wait    chan error
	}
	procs := make([]*proc, multiProcs)
	var mu sync.Mutex
	for i := range procs {
		p := &proc{started: map[string]bool{}, wait: make(chan error, 1)}
		p.cmd = exec.Command(os.Args[0])
		p.cmd.Env = append(os.Environ(), multiEnvDSN+"="+dsn, fmt.Sprintf("%s=%d", multiEnvChild, i))
		p.cmd.Stderr = os.Stderr
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 {
					continue
				}
				key := f[1] + " " + f[2]
				mu.Lock()
				switch f[0] {
				case "start":
					p.started[key] = true
				case "done":
					delete(p.started, key)
					p.done.Add(1)
				}
				mu.Unlock()
			}
			p.wait <- p.cmd.Wait()
		}()
		procs[i] = p
	}
	// Kill the first process once it has done a share of the work.
	victim := procs[0]
	for victim.done.Load() < 300 {
		select {
		case err := <-victim.wait:
			t.Fatalf("process 0 ended (%v) before it could be killed", err)
		case <-ctx.Done():
			t.Fatal("process 0 made no progress")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-victim.wait; err == nil {
		t.Fatal("the killed process exited cleanly")
	}
	mu.Lock()
	inFlight := map[string]bool{}
	for k := range victim.started {
		inFlight[k] = true
	}
	mu.Unlock()
	t.Logf("killed process 0 after %d steps, with %d steps in flight", victim.done.Load(), len(inFlight))
	for i, p := range procs[1:] {
		if err := <-p.wait; err != nil {
			t.Fatalf("process %d: %v", i+1, err)
		}
	}

	page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "multi", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != multiRuns {
		t.Fatalf("%d runs, want %d", len(page.Runs), multiRuns)
	}
	takenOver := 0
	for _, r := range page.Runs {
		if r.Status != hephtype.StatusCompleted {
			t.Errorf("run %s is %s: %s", r.ID, r.Status, r.Error)
			continue
		}
		h, err := st.History(ctx, &store.HistoryParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		completions := map[string]int{}
		for _, ev := range h {
			if ev.Kind != hephtype.EventStepCompleted {
				continue
			}
			completions[ev.Step]++
			if inFlight[r.ID+" "+ev.Step] {
				var by string
				_ = json.Unmarshal(ev.Data, &by)
				if by == "0" {
					t.Errorf("run %s step %s: completed by the killed process", r.ID, ev.Step)
				}
				takenOver++
			}
		}
		for i := range 3 {
			if n := completions[fmt.Sprintf("m%d", i)]; n != 1 {
				t.Errorf("run %s: step m%d completed %d times", r.ID, i, n)
			}
		}
	}
	if takenOver != len(inFlight) {
		t.Errorf("%d of the %d steps in flight in the killed process were completed by survivors", takenOver, len(inFlight))
	}
}
