package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

const (
	crashRuns  = 200
	crashSteps = 5
	crashEnv   = "HEPH_CRASH_CHILD_DB"
)

// crashFlow is a chain of five steps that each take a little while, so a
// kill lands in the middle of step code as often as between steps.
func crashFlow() *flow.Flow {
	b := flow.New("crash").BusinessKey("n", flow.ScopeForever)
	for i := range crashSteps {
		var opts []flow.StepOption
		if i > 0 {
			opts = append(opts, flow.DependsOn(fmt.Sprintf("s%d", i-1)))
		}
		flow.Step(b, fmt.Sprintf("s%d", i), func(ctx context.Context, in int) (int, error) {
			select {
			case <-time.After(time.Duration(2000+rand.IntN(8000)) * time.Microsecond):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			if i > 0 { // each step adds its number to the previous output
				prev, err := flow.Output[int](ctx, fmt.Sprintf("s%d", i-1))
				return prev + i, err
			}
			return in, nil
		}, opts...)
	}
	return b.MustBuild()
}

// crashChild is the child process of TestCrashRecovery (see TestMain): it
// starts the runs that are not there yet and works until all of them have
// completed, printing "progress N" as runs complete.
func crashChild(path string) error {
	return runCrashChild(path, crashFlow(), crashRuns)
}

// runCrashChild is the child process of a crash test: it runs f on the
// SQLite file at path with short leases, starts runs 0..n-1 of it (a
// restarted child skips the runs a killed one started: their business
// ids are unique forever), prints "progress k" at each completion for
// the parent, and returns once all n have completed, after a clean Stop.
func runCrashChild(path string, f *flow.Flow, n int) error {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{
		Store: st, Queues: map[string]int{"default": 8},
		LeaseDuration: time.Second, HeartbeatInterval: 250 * time.Millisecond, PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := c.Register(f); err != nil {
		return err
	}
	l, err := c.ListRuns(ctx, &heph.ListOptions{Flow: f.Name(), Statuses: []hephtype.RunStatus{heph.StatusCompleted}, Limit: 1000})
	if err != nil {
		return err
	}
	done := len(l.Runs)
	var mu sync.Mutex
	all := make(chan struct{})
	c.Subscribe(func(e heph.Event) {
		if e.Kind != heph.RunCompleted {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done++
		fmt.Printf("progress %d\n", done)
		if done == n {
			close(all)
		}
	})
	if err := c.Start(ctx); err != nil {
		return err
	}
	for i := range n {
		_, err := c.StartRun(ctx, f.Name(), i, &heph.StartOptions{BusinessValue: strconv.Itoa(i)})
		if err != nil && !errors.Is(err, heph.ErrDuplicateRun) {
			return err
		}
	}
	mu.Lock()
	finished := done >= n
	mu.Unlock()
	if !finished {
		<-all
	}
	return c.Stop(ctx)
}

// TestCrashRecovery kills a process running 200 runs with SIGKILL three
// times at different points, restarts it, and checks that every run
// completes with exactly one completion per step in its history.
func TestCrashRecovery(t *testing.T) {
	// Its processes and database are its own: it overlaps the suite's
	// tests instead of running alone before them.
	t.Parallel()
	path := filepath.Join(t.TempDir(), "crash.db")
	kills := []int{20, 80, 140} // kill once this many runs have completed
	for round := 0; round <= len(kills); round++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		killed := false
		last := 0
		for sc.Scan() {
			line := sc.Text()
			if n, ok := strings.CutPrefix(line, "progress "); ok {
				last, _ = strconv.Atoi(n)
				if round < len(kills) && last >= kills[round] && !killed {
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					killed = true
				}
			}
		}
		err = cmd.Wait()
		if round < len(kills) {
			if !killed {
				t.Fatalf("round %d: the child finished (%v) before it could be killed at %d completed runs", round, err, kills[round])
			}
			t.Logf("round %d: killed with %d runs completed", round, last)
			continue
		}
		if err != nil {
			t.Fatalf("final child: %v", err)
		}
		t.Logf("final round: %d runs completed", last)
	}

	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "crash", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != crashRuns {
		t.Fatalf("%d runs stored, want %d", len(page.Runs), crashRuns)
	}
	for _, r := range page.Runs {
		if r.Status != hephtype.StatusCompleted {
			t.Errorf("run %s (%s) is %s: %s", r.ID, r.BusinessID, r.Status, r.Error)
			continue
		}
		h, err := st.History(ctx, &store.HistoryParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		completions := map[string]int{}
		for _, ev := range h {
			if ev.Kind == hephtype.EventStepCompleted {
				completions[ev.Step]++
			}
			if ev.Kind == hephtype.EventRunCompleted {
				completions["run"]++
			}
		}
		for i := range crashSteps {
			if n := completions[fmt.Sprintf("s%d", i)]; n != 1 {
				t.Errorf("run %s: step s%d completed %d times", r.BusinessID, i, n)
			}
		}
		if completions["run"] != 1 {
			t.Errorf("run %s completed %d times", r.BusinessID, completions["run"])
		}
		value, _ := strconv.Atoi(strings.TrimPrefix(r.BusinessID, "n::"))
		if want := fmt.Sprintf(`{"s4":%d}`, value+0+1+2+3+4); string(r.Output) != want {
			t.Errorf("run %s: output %s, want %s", r.BusinessID, r.Output, want)
		}
	}
}
