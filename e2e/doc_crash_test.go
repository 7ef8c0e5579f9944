package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

const (
	docCrashRuns = 60
	docCrashEnv  = "HEPH_DOC_CRASH_CHILD_DB"
)

// docCrashDoc chains five steps; each adds its number to the output of
// the one before, through a template, so the final output proves every
// step ran on its predecessor's one output.
const docCrashDoc = `
name: doc-crash
business_key: {name: n, scope: forever}
steps:
  s0: {action: add, args: {prev: "{{input}}", n: 0}, next: s1}
  s1: {action: add, args: {prev: "{{steps.s0.output}}", n: 1}, next: s2}
  s2: {action: add, args: {prev: "{{steps.s1.output}}", n: 2}, next: s3}
  s3: {action: add, args: {prev: "{{steps.s2.output}}", n: 3}, next: s4}
  s4: {action: add, args: {prev: "{{steps.s3.output}}", n: 4}, done: true}
`

func docCrashFlow() (*flow.Flow, error) {
	reg := flowdoc.NewRegistry()
	err := flowdoc.RegisterAction(reg, "add", func(ctx context.Context, c flowdoc.ActionCall, in struct {
		Prev int `json:"prev"`
		N    int `json:"n"`
	}) (int, error) {
		select { // long enough for a kill to land in step code
		case <-time.After(time.Duration(2000+rand.IntN(8000)) * time.Microsecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return in.Prev + in.N, nil
	})
	if err != nil {
		return nil, err
	}
	return flowdoc.Load("crash.yaml", []byte(docCrashDoc), reg)
}

// docCrashChild is the child process of TestDocCrashRecovery (see
// TestMain): it starts the runs not there yet and works until all have
// completed, printing "progress N" as runs complete.
func docCrashChild(path string) error {
	f, err := docCrashFlow()
	if err != nil {
		return err
	}
	return runCrashChild(path, f, docCrashRuns)
}

// TestDocCrashRecovery kills a process running document runs with
// SIGKILL twice, restarts it, and checks that every run completes with
// the right output and one completion per step.
func TestDocCrashRecovery(t *testing.T) {
	// Its processes and database are its own: it overlaps the suite's
	// tests instead of running alone before them.
	t.Parallel()
	path := filepath.Join(t.TempDir(), "doccrash.db")
	kills := []int{10, 35}
	for round := 0; round <= len(kills); round++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), docCrashEnv+"="+path)
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
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "progress "); ok {
				last, _ := strconv.Atoi(n)
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
				t.Fatalf("round %d: the child finished (%v) before it could be killed", round, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("final child: %v", err)
		}
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, &sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "doc-crash", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != docCrashRuns {
		t.Fatalf("%d runs stored, want %d", len(page.Runs), docCrashRuns)
	}
	for _, r := range page.Runs {
		if r.Status != hephtype.StatusCompleted {
			t.Errorf("run %s is %s: %s", r.BusinessID, r.Status, r.Error)
			continue
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(r.BusinessID, "n::"))
		var out map[string]int
		if err := json.Unmarshal(r.Output, &out); err != nil || out["s4"] != n+10 {
			t.Errorf("run %s: output %s, want {\"s4\":%d}", r.BusinessID, r.Output, n+10)
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
		}
		for i := range 5 {
			if c := completions[fmt.Sprintf("s%d", i)]; c != 1 {
				t.Errorf("run %s: step s%d completed %d times", r.BusinessID, i, c)
			}
		}
	}
}
