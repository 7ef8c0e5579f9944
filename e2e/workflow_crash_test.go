package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"github.com/hephaestus-go/hephaestus/workflow"
)

// The workflow crash tests kill a process running code-first workflows
// with SIGKILL in the middle of their work — during activities, inside a
// phase with async update handlers in flight, during a durable sleep —
// restart it on the same database, and check that every workflow finishes
// with the result it would have had.
//
// The child process (this test binary again, see TestMain) runs one
// scenario, named by $HEPH_WF_CRASH_CHILD ("scenario round path"), and
// talks to the test through lines on its stdout.

const wfCrashEnv = "HEPH_WF_CRASH_CHILD"

// printer writes protocol lines for the parent.
var printer sync.Mutex

func say(format string, args ...any) {
	printer.Lock()
	defer printer.Unlock()
	fmt.Printf(format+"\n", args...)
}

const (
	crashWorkflows  = 40
	crashActivities = 4
	crashSleep      = 1500 * time.Millisecond
	crashRestocks   = 5
)

// crashChain is four sequential slow activities, each adding its number.
var (
	crashAdd = workflow.NewActivity("crash.add", func(ctx context.Context, in [2]int) (int, error) {
		select {
		case <-time.After(time.Duration(5000+rand.IntN(20000)) * time.Microsecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return in[0] + in[1], nil
	})
	crashChain = workflow.New("crash_chain", func(ctx workflow.Context, n int) (int, error) {
		for i := range crashActivities {
			var err error
			if n, err = crashAdd.Execute(ctx, [2]int{n, i}); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
)

// The sleep scenario: an activity, a durable sleep, an activity.
var (
	crashStep = workflow.NewActivity("crash.step", func(ctx context.Context, name string) (string, error) {
		say("step %s", name)
		return name, nil
	})
	crashSleeper = workflow.New("crash_sleeper", func(ctx workflow.Context, _ struct{}) (string, error) {
		a, err := crashStep.Execute(ctx, "a")
		if err != nil {
			return "", err
		}
		before := workflow.Now(ctx)
		if err := workflow.Sleep(ctx, crashSleep); err != nil {
			return "", err
		}
		slept := workflow.Now(ctx).Sub(before)
		b, err := crashStep.Execute(ctx, "b")
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s+%s slept>=%t", a, b, slept >= crashSleep), nil
	})
)

// The phase scenario: the seed's Inventory, whose price lookups are slow.
var crashPrice = workflow.NewActivity("crash.price", func(ctx context.Context, sku string) (int, error) {
	say("price %s", sku)
	select {
	case <-time.After(400 * time.Millisecond):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return e2e.PriceOf(sku), nil
})

var crashInventory = e2e.InventoryWorkflow(crashPrice)

func crashRestock(i int) e2e.Restock {
	return e2e.Restock{SKU: fmt.Sprintf("sku%d", i%3), Quantity: i + 1}
}

// wfCrashChild runs one round of a scenario.
func wfCrashChild(spec string) error {
	parts := strings.SplitN(spec, " ", 3)
	if len(parts) != 3 {
		return fmt.Errorf("bad %s %q", wfCrashEnv, spec)
	}
	scenario, path := parts[0], parts[2]
	round, _ := strconv.Atoi(parts[1])
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := heph.New(&heph.Config{
		Store: st, Queues: map[string]int{"default": 16},
		LeaseDuration: time.Second, HeartbeatInterval: 250 * time.Millisecond, PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := c.RegisterWorkflows(crashChain, crashSleeper, crashInventory); err != nil {
		return err
	}
	if err := c.RegisterActivities(crashAdd, crashStep, crashPrice); err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = c.Stop(ctx) }()
	switch scenario {
	case "activity":
		return crashActivityRound(ctx, c)
	case "sleep":
		return crashSleepRound(ctx, c, round)
	case "phase":
		return crashPhaseRound(ctx, c, round)
	}
	return fmt.Errorf("unknown scenario %q", scenario)
}

// crashActivityRound starts the workflows not started yet and waits for
// all of them, printing "progress N" as they complete.
func crashActivityRound(ctx context.Context, c *heph.Client) error {
	var mu sync.Mutex
	done := 0
	for i := range crashWorkflows {
		// A restarted child picks up the workflows the killed one started.
		id := fmt.Sprintf("w%d", i)
		var r *heph.WorkflowRun[int]
		run, err := c.FindWorkflow(ctx, crashChain.Name(), id)
		switch {
		case err == nil:
			r = heph.GetWorkflow(c, crashChain, run.ID)
		case errors.Is(err, heph.ErrRunNotFound):
			r, err = heph.StartWorkflow(ctx, c, crashChain, i*100, &heph.WorkflowOptions{ID: id})
		}
		if err != nil {
			return err
		}
		go func() {
			if _, err := r.Get(ctx); err != nil {
				say("error %v", err)
				return
			}
			mu.Lock()
			done++
			say("progress %d", done)
			mu.Unlock()
		}()
	}
	for {
		mu.Lock()
		n := done
		mu.Unlock()
		if n == crashWorkflows {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func crashSleepRound(ctx context.Context, c *heph.Client, round int) error {
	if round == 0 {
		r, err := heph.StartWorkflow(ctx, c, crashSleeper, struct{}{}, &heph.WorkflowOptions{ID: "sleeper"})
		if err != nil {
			return err
		}
		// Tell the parent once the timer is stored.
		for {
			h, err := c.History(ctx, r.ID)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(h, func(e heph.HistoryEvent) bool { return e.Kind == hephtype.EventTimerStarted }) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		say("sleeping")
		select {} // until killed
	}
	run, err := c.FindWorkflow(ctx, crashSleeper.Name(), "sleeper")
	if err != nil {
		return err
	}
	out, err := heph.GetWorkflow(c, crashSleeper, run.ID).Get(ctx)
	if err != nil {
		return err
	}
	say("result %s", out)
	return nil
}

func crashPhaseRound(ctx context.Context, c *heph.Client, round int) error {
	if round == 0 {
		r, err := heph.StartWorkflow(ctx, c, crashInventory, struct{}{}, &heph.WorkflowOptions{ID: "inventory"})
		if err != nil {
			return err
		}
		for i := range crashRestocks {
			go func() {
				// The caller dies with this process; the update lives on.
				_, err := heph.Update[e2e.StockEntry](ctx, c, r.ID, "restock", crashRestock(i), nil)
				if err != nil {
					say("error %v", err)
				}
			}()
		}
		select {} // until killed
	}
	run, err := c.FindWorkflow(ctx, crashInventory.Name(), "inventory")
	if err != nil {
		return err
	}
	// The handlers accepted before the crash finish; then close the phase.
	for {
		stock, err := heph.Query[map[string]e2e.StockEntry](ctx, c, run.ID)
		if err != nil {
			return err
		}
		n := 0
		for _, e := range stock {
			n += e.Quantity
		}
		if n == crashRestockTotal() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.SignalWorkflow(ctx, run.ID, "close", nil); err != nil {
		return err
	}
	out, err := heph.GetWorkflow(c, crashInventory, run.ID).Get(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(out)
	say("result %s", b)
	return nil
}

func crashRestockTotal() int {
	n := 0
	for i := range crashRestocks {
		n += crashRestock(i).Quantity
	}
	return n
}

// crashRound runs the child for one round; kill, when set, is called with
// each line and says when to send SIGKILL. It returns the child's lines.
func crashRound(t *testing.T, scenario string, round int, path string, kill func(line string) bool) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %s", wfCrashEnv, scenario, round, path))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if strings.HasPrefix(line, "error ") {
			t.Errorf("round %d: %s", round, line)
		}
		if kill != nil && !killed && kill(line) {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	switch {
	case kill != nil && !killed:
		t.Fatalf("round %d: the child ended (%v) before it could be killed; it said %q", round, err, lines)
	case kill == nil && err != nil:
		t.Fatalf("round %d: %v", round, err)
	}
	return lines
}

func lastResult(t *testing.T, lines []string) string {
	t.Helper()
	for i := len(lines) - 1; i >= 0; i-- {
		if r, ok := strings.CutPrefix(lines[i], "result "); ok {
			return r
		}
	}
	t.Fatalf("no result in %q", lines)
	return ""
}

func openCrashDB(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestWorkflowCrashDuringActivities kills a process running 40 workflows
// of four slow activities twice, while activities run.
func TestWorkflowCrashDuringActivities(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "crash.db")
	for round, at := range []int{5, 20} {
		crashRound(t, "activity", round, path, func(line string) bool {
			n, ok := strings.CutPrefix(line, "progress ")
			k, _ := strconv.Atoi(n)
			return ok && k >= at
		})
	}
	crashRound(t, "activity", 2, path, nil)

	st := openCrashDB(t, path)
	ctx := context.Background()
	page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: crashChain.Name(), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != crashWorkflows {
		t.Fatalf("%d runs, want %d", len(page.Runs), crashWorkflows)
	}
	for _, r := range page.Runs {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.BusinessID, "id::w"))
		if r.Status != hephtype.StatusCompleted || string(r.Output) != strconv.Itoa(i*100+0+1+2+3) {
			t.Errorf("run %s: %s %s %s", r.BusinessID, r.Status, r.Output, r.Error)
			continue
		}
		h, err := st.History(ctx, &store.HistoryParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		completed := map[int]int{}
		for _, ev := range h {
			if ev.Kind == hephtype.EventStepCompleted {
				completed[ev.Index]++
			}
		}
		if len(completed) != crashActivities {
			t.Errorf("run %s: activities %v completed", r.BusinessID, completed)
		}
		for seq, n := range completed {
			if n != 1 {
				t.Errorf("run %s: activity #%d completed %d times", r.BusinessID, seq, n)
			}
		}
	}
}

// TestWorkflowCrashDuringSleep kills the process while a workflow sleeps
// on a durable timer; after the restart the timer fires and the workflow
// finishes.
func TestWorkflowCrashDuringSleep(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "crash.db")
	crashRound(t, "sleep", 0, path, func(line string) bool { return line == "sleeping" })
	lines := crashRound(t, "sleep", 1, path, nil)
	// The workflow measured its sleep on its own (deterministic) clock.
	if got := lastResult(t, lines); got != "a+b slept>=true" {
		t.Fatalf("result %q", got)
	}
	st := openCrashDB(t, path)
	r, err := st.FindRun(context.Background(), &store.FindRunParams{Workflow: crashSleeper.Name(), BusinessID: "id::sleeper"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.History(context.Background(), &store.HistoryParams{RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	got := map[hephtype.EventKind]int{}
	var due struct {
		FireAt time.Time `json:"fire_at"`
	}
	for _, ev := range h {
		got[ev.Kind]++
		switch ev.Kind {
		case hephtype.EventTimerStarted:
			if err := json.Unmarshal(ev.Data, &due); err != nil || due.FireAt.IsZero() {
				t.Fatalf("timer_started data %s: %v", ev.Data, err)
			}
		case hephtype.EventTimerFired:
			// Stamped with its commit's time, which follows the claim of
			// the timer task, which follows the time the timer was due.
			if ev.At.Before(due.FireAt.Truncate(time.Microsecond)) {
				t.Errorf("the timer fired at %v, before it was due at %v", ev.At, due.FireAt)
			}
		}
	}
	want := map[hephtype.EventKind]int{hephtype.EventTimerStarted: 1, hephtype.EventTimerFired: 1, hephtype.EventStepCompleted: 2, hephtype.EventRunCompleted: 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d %s events, want %d", got[k], k, n)
		}
	}
}

// TestWorkflowCrashInPhase kills the process while five async update
// handlers of a phase run their activities; after the restart the
// handlers finish, the phase closes, and the result holds every restock.
func TestWorkflowCrashInPhase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "crash.db")
	started := map[string]bool{}
	prices := 0
	crashRound(t, "phase", 0, path, func(line string) bool {
		if sku, ok := strings.CutPrefix(line, "price "); ok {
			started[sku] = true
			prices++
		}
		return prices >= crashRestocks
	})
	lines := crashRound(t, "phase", 1, path, nil)
	var got map[string]e2e.StockEntry
	if err := json.Unmarshal([]byte(lastResult(t, lines)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]e2e.StockEntry{}
	for i := range crashRestocks {
		rs := crashRestock(i)
		want[rs.SKU] = e2e.StockEntry{Quantity: want[rs.SKU].Quantity + rs.Quantity, Price: e2e.PriceOf(rs.SKU)}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
	// The price lookups in flight at the crash ran again after it.
	if n := strings.Count(strings.Join(lines, "\n"), "price "); n == 0 || n > crashRestocks {
		t.Fatalf("%d price lookups after the restart, want those cut short by the crash", n)
	}
}
