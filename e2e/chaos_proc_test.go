package e2e_test

// The chaos tests with worker processes: the test binary again, in the
// mode TestMain selects with $HEPH_CHAOS_CHILD, runs workers for the
// workload; the test process starts runs and sends messages through a
// client without workers, and kills, freezes and replaces the workers.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/e2e"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
)

const chaosEnv = "HEPH_CHAOS_CHILD"

// chaosSpec tells a worker process what to open and how to run.
type chaosSpec struct {
	Backend string `json:"backend"`
	Path    string `json:"path,omitempty"`
	DSN     string `json:"dsn,omitempty"`
	Worker  string `json:"worker,omitempty"`
	LeaseMs int    `json:"lease_ms,omitempty"`
}

// chaosChild is a worker process (see TestMain): it runs workers for the
// workload until its standard input ends (the test closed it, or died),
// then stops gracefully. It reports every execution of step and activity
// code on its standard output:
//
//	exec start|done <run> <step> <index> <attempt> <slow 0|1> <activity 0|1>
func chaosChild(raw string) error {
	var spec chaosSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		return fmt.Errorf("bad %s: %w", chaosEnv, err)
	}
	ctx := context.Background()
	var st store.Store
	var err error
	switch spec.Backend {
	case "sqlite":
		// A long busy timeout: several processes write to the file, on a
		// machine that may be loaded.
		st, err = sqlite.Open(ctx, &sqlite.Config{Path: spec.Path, BusyTimeout: 30 * time.Second})
	case "postgres":
		st, err = openChaosPostgres(ctx, spec.DSN, 6)
	default:
		err = fmt.Errorf("unknown backend %q", spec.Backend)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	lease := time.Duration(spec.LeaseMs) * time.Millisecond
	c, err := heph.New(&heph.Config{
		Store: st, Queues: map[string]int{"default": 8, e2e.ChaosJobQueue: 4}, WorkerID: spec.Worker,
		LeaseDuration: lease, HeartbeatInterval: lease / 4,
		MinPollInterval: 20 * time.Millisecond, PollInterval: 200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, Logger: chaosLogger(),
	})
	if err != nil {
		return err
	}
	if err := e2e.RegisterChaos(c, st); err != nil {
		return err
	}
	var mu sync.Mutex
	b01 := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	e2e.SetChaosTrace(func(e e2e.ChaosExec) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("exec %s %s %s %d %d %d %d\n", e.Phase, e.RunID, e.Step, e.Index, e.Attempt, b01(e.Slow), b01(e.Activity))
	})
	if err := c.Start(ctx); err != nil {
		return err
	}
	mu.Lock()
	fmt.Println("ready")
	mu.Unlock()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes it
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return c.Stop(sctx)
}

// chaosKey names an attempt of a step or activity.
type chaosKey struct {
	run, step string
	index     int
	attempt   int
}

// chaosProc is a worker process.
type chaosProc struct {
	worker string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *chaosTail
	// started and done count its executions of step and activity code.
	started, done atomic.Int64
	ready         chan struct{} // closed once its workers run
	exited        chan struct{}
	err           error // after exited
	killed        bool
}

// chaosFleet runs the worker processes of a test.
type chaosFleet struct {
	t     *testing.T
	spec  chaosSpec
	procs []*chaosProc // the live process of each slot
	all   []*chaosProc

	mu sync.Mutex
	// inflight: executions a process started and did not finish.
	inflight map[*chaosProc]map[chaosKey]bool
	// starters: the processes that started each attempt.
	starters map[chaosKey][]*chaosProc
	execs    atomic.Int64
	// armed, when set, is asked at each execution a process starts
	// whether to fire: the process is then sent on fire.
	armed func(p *chaosProc) bool
	fire  chan *chaosProc
}

func newChaosFleet(t *testing.T, spec chaosSpec, n int) *chaosFleet {
	f := &chaosFleet{t: t, spec: spec, inflight: map[*chaosProc]map[chaosKey]bool{}, starters: map[chaosKey][]*chaosProc{},
		fire: make(chan *chaosProc, 1)}
	t.Cleanup(f.stopAll)
	for i := range n {
		f.procs = append(f.procs, f.spawn(i))
	}
	return f
}

// spawn starts a worker process for a slot.
func (f *chaosFleet) spawn(slot int) *chaosProc {
	t := f.t
	spec := f.spec
	spec.Worker = fmt.Sprintf("chaos-%d-%d", slot, len(f.all))
	raw, _ := json.Marshal(spec)
	p := &chaosProc{worker: spec.Worker, stderr: &chaosTail{}, ready: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), chaosEnv+"="+string(raw))
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.inflight[p] = map[chaosKey]bool{}
	f.mu.Unlock()
	f.all = append(f.all, p)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.line(p, sc.Text())
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

func (f *chaosFleet) line(p *chaosProc, line string) {
	if line == "ready" {
		close(p.ready)
		return
	}
	fs := strings.Fields(line)
	if len(fs) != 8 || fs[0] != "exec" {
		return
	}
	index, _ := strconv.Atoi(fs[4])
	attempt, _ := strconv.Atoi(fs[5])
	k := chaosKey{run: fs[2], step: fs[3], index: index, attempt: attempt}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch fs[1] {
	case "start":
		p.started.Add(1)
		f.execs.Add(1)
		if fs[7] == "0" { // flow steps: the ones a frozen worker's takeover is checked on
			f.inflight[p][k] = fs[6] == "1"
			f.starters[k] = append(f.starters[k], p)
		}
		if f.armed != nil && f.armed(p) {
			f.armed = nil
			f.fire <- p
		}
	case "done":
		p.done.Add(1)
		delete(f.inflight[p], k)
	}
}

// arm makes the fleet fire when fn, asked as a process starts an
// execution of step or activity code, says so; nil disarms it.
func (f *chaosFleet) arm(fn func(p *chaosProc) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = fn
	if fn == nil {
		select {
		case <-f.fire:
		default:
		}
	}
}

// kill kills a process with SIGKILL and waits until it is gone.
func (f *chaosFleet) kill(p *chaosProc) {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		f.t.Fatalf("kill %s: %v", p.worker, err)
	}
	p.killed = true
	<-p.exited
	if p.err == nil {
		f.t.Errorf("the killed process %s exited cleanly", p.worker)
	}
}

// stopAll stops every process still running: it closes their standard
// input (they stop gracefully), and kills those that do not exit.
func (f *chaosFleet) stopAll() {
	for _, p := range f.all {
		select {
		case <-p.exited:
			continue
		default:
		}
		_ = p.stdin.Close() // a frozen process was resumed by its test's cleanup
	}
	for _, p := range f.all {
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			f.t.Errorf("process %s did not stop; killing it. Its stderr:\n%s", p.worker, p.stderr)
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if !p.killed && p.err != nil {
			f.t.Errorf("process %s: %v; its stderr:\n%s", p.worker, p.err, p.stderr)
		}
	}
}

// chaosTail keeps the last 8 KiB written to it.
type chaosTail struct {
	mu  sync.Mutex
	buf []byte
}

func (w *chaosTail) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if len(w.buf) > 8<<10 {
		w.buf = w.buf[len(w.buf)-8<<10:]
	}
	return len(b), nil
}

func (w *chaosTail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(bytes.Clone(w.buf))
}

// newChaosDriver is the test's own client: it starts runs (their first
// decisions run here) and sends messages, and works no queue of the
// workflows: updates are requests that the worker processes, which this
// test kills, accept or reject (their validators run there).
func newChaosDriver(t *testing.T, st store.Store) *heph.Client {
	t.Helper()
	c, err := heph.New(&heph.Config{Store: st, Queues: map[string]int{"chaos-driver": 1}, PollInterval: 100 * time.Millisecond, Logger: chaosLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e2e.RegisterChaos(c, st); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

// TestChaosSigkill kills worker processes with SIGKILL, each once it has
// run a (seeded) random number of steps and while it runs one, and starts
// a replacement, while the workload runs in waves: a wave of runs at the
// start and after each kill, so that every kill lands on work in flight.
// PostgreSQL runs three worker processes at once, SQLite two (one file;
// the test process writes to it too).
func TestChaosSigkill(t *testing.T) {
	// Its processes and database are its own: it overlaps the suite's
	// tests instead of running alone before them.
	t.Parallel()
	for _, b := range chaosBackends() {
		t.Run(b.name, func(t *testing.T) {
			db := b.db(t)
			procs, kills := 3, 6
			if db.name == "sqlite" {
				procs, kills = chaosSQLiteProcs(), 5
			}
			seed := chaosSeed(t, 1)
			rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
			ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
			defer cancel()
			st := db.open(t, "hephaestus-chaos-test")
			driver := newChaosDriver(t, st)
			spec := db.spec
			spec.LeaseMs = 2000
			start := time.Now()
			fleet := newChaosFleet(t, spec, procs)
			l := newChaosLoad(t, ctx, driver, st, "sk")
			const flowsPerWave, wfsPerWave = 12, 4
			l.wave(flowsPerWave, wfsPerWave)
			killed, waves, victim := 0, 1, 0
			for killed < kills {
				p := fleet.procs[victim%procs]
				// Kill it as it starts a step, once the processes ran this
				// many steps since the last kill.
				base, at := fleet.execs.Load(), int64(10+rng.IntN(30))
				fleet.arm(func(q *chaosProc) bool { return q == p && fleet.execs.Load()-base >= at })
				fired := false
				for !fired {
					select {
					case <-fleet.fire:
						fired = true
					case <-ctx.Done():
						t.Fatalf("process %s: no kill point in time (%d steps since the last kill)", p.worker, fleet.execs.Load()-base)
					case <-time.After(50 * time.Millisecond):
					}
					if !fired && l.finished() {
						break
					}
				}
				fleet.arm(nil)
				if fired {
					inflight := p.started.Load() - p.done.Load()
					fleet.kill(p)
					killed++
					t.Logf("killed %s after %d steps, with about %d in flight", p.worker, p.started.Load(), inflight)
					fleet.procs[victim%procs] = fleet.spawn(victim % procs)
					victim++
				}
				// The next wave: work for the next kill (or, when the
				// last wave ended first, another chance), once every
				// process runs.
				if waves > 4*kills {
					t.Fatalf("%d waves ran and only %d processes could be killed", waves, killed)
				}
				for _, q := range fleet.procs {
					select {
					case <-q.ready:
					case <-q.exited:
						t.Fatalf("process %s exited (%v); its stderr:\n%s", q.worker, q.err, q.stderr)
					case <-ctx.Done():
						t.Fatalf("process %s never started its workers", q.worker)
					}
				}
				l.wave(flowsPerWave, wfsPerWave)
				waves++
			}
			l.waitFinished()
			fleet.stopAll()
			l.check(db.name, "sigkill", start, fleet.execs.Load(),
				fmt.Sprintf("procs=%d kills=%d waves=%d seed=%d", procs, killed, waves, seed))
		})
	}
}

// chaosSQLiteProcs is how many worker processes share the SQLite file:
// $HEPH_CHAOS_SQLITE_PROCS, or 2.
func chaosSQLiteProcs() int {
	if n, err := strconv.Atoi(os.Getenv("HEPH_CHAOS_SQLITE_PROCS")); err == nil && n > 0 {
		return n
	}
	return 2
}
