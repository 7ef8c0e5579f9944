//go:build unix

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/store"
)

// TestChaosSigstop freezes a worker process (of three, on PostgreSQL) with
// SIGSTOP while it runs a slow step, for longer than its lease of 2 s:
// the others take its tasks over once the lease expires. Once another
// process has started the frozen one's step, the frozen one resumes
// (SIGCONT) and finishes the step too: its stale result must be refused.
// The sessions of a frozen process that sit in a transaction are ended
// by the server after 1 s (idle_in_transaction_session_timeout), so that
// its row locks do not hold the others up.
func TestChaosSigstop(t *testing.T) {
	db := chaosPostgres(t)
	const procs, rounds = 3, 3
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	st := db.open(t, "hephaestus-chaos-test")
	driver := newChaosDriver(t, st)
	spec := db.spec
	spec.LeaseMs = 2000
	spec.DSN = withDSNParam(spec.DSN, "idle_in_transaction_session_timeout", "1000")
	start := time.Now()
	fleet := newChaosFleet(t, spec, procs)
	frozen := map[*chaosProc]bool{}
	t.Cleanup(func() { // before the fleet stops its processes
		for p := range frozen {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
	l := newChaosLoad(t, ctx, driver, st, "ss")
	l.flowIn = func(i int) e2e.ChaosFlowInput {
		in := e2e.ChaosFlowInput{N: i}
		if i%2 == 0 {
			in.SlowMs = 1000
		}
		return in
	}
	type takeover struct {
		key      chaosKey
		frozen   *chaosProc
		frozenAt time.Time
	}
	var takeovers []takeover
	freezes := 0
	const flowsPerWave, wfsPerWave = 10, 4
	l.wave(flowsPerWave, wfsPerWave)
	waves := 1
	for round := 0; len(takeovers) < rounds; round++ {
		if waves > 4*rounds {
			t.Fatalf("%d waves ran and only %d takeovers of a frozen process were seen", waves, len(takeovers))
		}
		p := fleet.procs[round%procs]
		// Freeze it while it runs a slow step.
		var inflight []chaosKey
		startsBefore := map[chaosKey]int{} // the starts of each before the freeze
		var frozenAt time.Time
		for poll := 0; ; poll++ {
			fleet.mu.Lock()
			for k, slow := range fleet.inflight[p] {
				// Only a step whose latest attempt is p's: a step p still
				// runs after an earlier freeze was already taken over, and
				// nobody will start it again.
				if st := fleet.starters[k]; slow && len(st) > 0 && st[len(st)-1] == p {
					inflight = append(inflight, k)
					startsBefore[k] = len(fleet.starters[k])
				}
			}
			if len(inflight) > 0 {
				frozenAt = time.Now()
				if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				frozen[p] = true
				freezes++
			}
			fleet.mu.Unlock()
			if len(inflight) > 0 || poll%20 == 19 && l.finished() {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("process %s never ran a slow step", p.worker)
			case <-time.After(5 * time.Millisecond):
			}
		}
		if len(inflight) == 0 { // the wave ended first: another one
			l.wave(flowsPerWave, wfsPerWave)
			waves++
			continue
		}
		// Wait for another process to start one of its steps after the
		// freeze (or for the history to show the frozen process completed
		// them all before it froze: then the round does not count).
		var taken *chaosKey
		for taken == nil {
			fleet.mu.Lock()
			for _, k := range inflight {
				for _, q := range fleet.starters[k][startsBefore[k]:] {
					if q != p {
						taken = &k
					}
				}
			}
			fleet.mu.Unlock()
			if taken != nil || l.completedBy(inflight, p.worker) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no process took over the steps %v of the frozen %s", inflight, p.worker)
			case <-time.After(20 * time.Millisecond):
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		delete(frozen, p)
		if taken != nil {
			takeovers = append(takeovers, takeover{*taken, p, frozenAt})
			t.Logf("froze %s in step %s of run %s; another process took it over", p.worker, taken.step, taken.run)
		}
		l.wave(flowsPerWave, wfsPerWave)
		waves++
	}
	l.waitFinished()
	fleet.stopAll()
	l.check(db.name, "sigstop", start, fleet.execs.Load(),
		fmt.Sprintf("procs=%d stops=%d takeovers=%d waves=%d", procs, freezes, len(takeovers), waves))
	// The frozen process's result of a step taken over was refused: once
	// another process started the attempt after the freeze (it claimed the
	// task anew), every execution that began before the freeze held a
	// lost lease, and the execution whose outcome the history records
	// began after the freeze. (All processes read the same system clock.)
	for _, to := range takeovers {
		h, err := st.History(context.Background(), &store.HistoryParams{RunID: to.key.run})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Worker    string    `json:"worker"`
			StartedAt time.Time `json:"started_at"`
			Claim     int       `json:"claim"`
		}
		for _, ev := range h {
			if ev.Kind == "step_started" && ev.Step == to.key.step && ev.Index == max(to.key.index, 0) && ev.Attempt == to.key.attempt {
				_ = json.Unmarshal(ev.Data, &got)
			}
		}
		if !got.StartedAt.After(to.frozenAt) {
			t.Errorf("STALE RESULT in run %s: step %s attempt %d was frozen in %s at %s and taken over, yet the history records the execution of %s (claim %d) that started at %s, before the freeze:\n%s",
				to.key.run, to.key.step, to.key.attempt, to.frozen.worker, to.frozenAt.Format(time.RFC3339Nano), got.Worker, got.Claim, got.StartedAt.Format(time.RFC3339Nano), historyText(h))
		}
	}
}

// completedBy reports whether the history shows every one of keys
// started by worker: the attempts whose outcome it committed.
func (l *chaosLoad) completedBy(keys []chaosKey, worker string) bool {
	for _, k := range keys {
		h, err := l.st.History(l.ctx, &store.HistoryParams{RunID: k.run})
		if err != nil {
			return false
		}
		found := false
		for _, ev := range h {
			if ev.Kind == "step_started" && ev.Step == k.step && ev.Index == max(k.index, 0) && ev.Attempt == k.attempt {
				var d struct{ Worker string }
				_ = json.Unmarshal(ev.Data, &d)
				found = d.Worker == worker
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func historyText(h []store.Event) string {
	var b strings.Builder
	for _, ev := range h {
		fmt.Fprintf(&b, "  #%d %s step=%q index=%d attempt=%d data=%s\n", ev.Seq, ev.Kind, ev.Step, ev.Index, ev.Attempt, ev.Data)
	}
	return b.String()
}
