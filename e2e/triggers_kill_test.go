package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

// trigKillEnv makes this binary one of the processes the triggers' SIGKILL
// test sends events from and kills: "dsn|child|first|last".
const trigKillEnv = "HEPH_TRIGKILL_CHILD"

// The triggers' SIGKILL test: 10,000 events, three triggers.
const (
	trigKillEvents = 10000
	trigKillName   = "kill.ev"
)

func trigKillTriggers() []*heph.Trigger {
	return []*heph.Trigger{
		{Name: "all", Event: trigKillName, Target: heph.TargetFlow, TargetName: "trigkill.noop"},
		{Name: "copy", Event: trigKillName, Target: heph.TargetFlow, TargetName: "trigkill.noop", Input: `{"copy": event.data.n}`},
		{Name: "keyed", Event: trigKillName, Target: heph.TargetFlow, TargetName: "trigkill.noop", ConcurrencyKey: `"k" + string(int(event.data.n) % 7)`},
	}
}

// trigKillFlow's step is on a queue nobody serves: the test counts the
// runs the triggers started, not their work.
func trigKillFlow() *flow.Flow {
	b := flow.New("trigkill.noop")
	flow.Step(b, "work", func(ctx context.Context, in any) (any, error) { return in, nil }, flow.Queue("trigkill.nobody"))
	return b.MustBuild()
}

// trigKillChild runs a client with the triggers, sends the events
// [first, last] (each again after a restart: a re-send of the same ids),
// prints "sent", and carries out firings until it is killed.
func trigKillChild(spec string) error {
	parts := strings.Split(spec, "|")
	if len(parts) != 4 {
		return fmt.Errorf("bad spec %q", spec)
	}
	first, _ := strconv.Atoi(parts[2])
	last, _ := strconv.Atoi(parts[3])
	ctx := context.Background()
	// Sessions are killed every 250 ms, so opening (migrations), declaring
	// and starting (publishing to the catalog) can fail any number of
	// times: set up again until it all succeeds.
	var c *heph.Client
	for {
		var err error
		if c, err = trigKillClient(ctx, parts[0], parts[1]); err == nil {
			break
		}
		fmt.Fprintln(os.Stderr, "triggers kill child: set up again:", err)
		time.Sleep(20 * time.Millisecond)
	}
	for n := first; n <= last; n++ {
		for {
			_, err := c.SendEvent(ctx, trigKillName, map[string]int{"n": n}, &heph.SendEventOptions{ID: fmt.Sprint("k-", n)})
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond) // a killed connection: send again
		}
	}
	fmt.Println("sent")
	select {} // carries out firings until killed
}

// trigKillClient opens the store and starts a client with the triggers;
// on an error it closes what it opened.
func trigKillClient(ctx context.Context, dsn, name string) (*heph.Client, error) {
	st, err := postgres.Open(ctx, &postgres.Config{DSN: withDSNParam(dsn, "application_name", "hephaestus-trigkill-"+name)})
	if err != nil {
		return nil, err
	}
	c, err := heph.New(&heph.Config{Store: st, WorkerID: "trigkill-" + name, Logger: chaosLogger(),
		LeaseDuration: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		MinPollInterval: 20 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err == nil {
		err = c.Register(trigKillFlow())
	}
	if err == nil {
		err = c.DeclareTriggers(ctx, trigKillTriggers()...)
	}
	if err == nil {
		err = c.Start(ctx)
	}
	if err != nil {
		if c != nil {
			_ = c.Stop(ctx)
		}
		_ = st.Close()
		return nil, err
	}
	return c, nil
}

type trigKillProc struct {
	cmd  *exec.Cmd
	sent chan struct{}
}

func startTrigKill(t *testing.T, dsn string, i, first, last int) *trigKillProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d|%d", trigKillEnv, dsn, i, first, last))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &trigKillProc{cmd: cmd, sent: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "sent" {
				close(p.sent)
			}
		}
	}()
	return p
}

func (p *trigKillProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
}

// Exactly once under SIGKILL: three processes send 10,000 events between
// them (ids 3,000 to 3,999 and 6,000 to 6,999 by two processes, and every
// id again by a process restarted after a kill) to three triggers, while
// a process is killed with SIGKILL and started again every 1.5 s (for
// eight kills) and every PostgreSQL session of theirs is terminated every
// 250 ms. Each (event, trigger) pair started exactly one run: 30,000 runs.
func TestTriggersSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dsn := pgtest.DSN(t)
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ranges := [3][2]int{{0, 3999}, {3000, 6999}, {6000, trigKillEvents - 1}}
	procs := make([]*trigKillProc, 3)
	var mu sync.Mutex
	for i, r := range ranges {
		procs[i] = startTrigKill(t, dsn, i, r[0], r[1])
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range procs {
			p.kill()
		}
	})
	admin, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", "trigkill-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	stopConnKiller := killTrigKillConns(ctx, dsn)

	rng := rand.New(rand.NewPCG(7, 11))
	for range 8 {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(1500 * time.Millisecond):
		}
		i := rng.IntN(3)
		mu.Lock()
		procs[i].kill()
		procs[i] = startTrigKill(t, dsn, i, ranges[i][0], ranges[i][1])
		mu.Unlock()
	}
	stopConnKiller()
	for i, p := range procs {
		select {
		case <-p.sent:
		case <-ctx.Done():
			t.Fatalf("process %d never sent all its events", i)
		}
	}
	waitTrigKillFirings(ctx, t, admin)
	checkTrigKillRuns(ctx, t, admin)
}

// killTrigKillConns terminates the children's sessions every 250 ms until
// the returned func is called.
func killTrigKillConns(ctx context.Context, dsn string) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		conn, err := pgx.Connect(ctx, withDSNParam(dsn, "application_name", "trigkill-killer"))
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = current_database() AND application_name LIKE 'hephaestus-trigkill-%'`); err != nil {
				return
			}
		}
	})
	return sync.OnceFunc(func() { close(stop); wg.Wait() })
}

// waitTrigKillFirings waits until every event is stored with its three
// firings, none pending (the leases of killed processes run out).
func waitTrigKillFirings(ctx context.Context, t *testing.T, admin *pgx.Conn) {
	t.Helper()
	for {
		var events, firings, pending int
		err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM heph.sent_events WHERE name = $1),
			(SELECT count(*) FROM heph.event_firings), (SELECT count(*) FROM heph.event_firings WHERE status = 'pending')`, trigKillName).
			Scan(&events, &firings, &pending)
		if err != nil {
			t.Fatal(err)
		}
		if events == trigKillEvents && firings == 3*trigKillEvents && pending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d events, %d firings, %d pending; want %d, %d, 0", events, firings, pending, trigKillEvents, 3*trigKillEvents)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// checkTrigKillRuns: one started firing and one run per (event, trigger).
func checkTrigKillRuns(ctx context.Context, t *testing.T, admin *pgx.Conn) {
	t.Helper()
	var started, runs, pairs, orphans int
	err := admin.QueryRow(ctx, `SELECT (SELECT count(*) FROM heph.event_firings WHERE status = 'started'),
		(SELECT count(*) FROM heph.runs WHERE metadata ? 'trigger'),
		(SELECT count(DISTINCT (metadata->>'event', metadata->>'trigger')) FROM heph.runs WHERE metadata ? 'trigger'),
		(SELECT count(*) FROM heph.event_firings f LEFT JOIN heph.runs r ON r.id::text = f.run_id WHERE r.id IS NULL)`).
		Scan(&started, &runs, &pairs, &orphans)
	if err != nil {
		t.Fatal(err)
	}
	if started != 3*trigKillEvents || runs != 3*trigKillEvents || pairs != 3*trigKillEvents || orphans != 0 {
		t.Fatalf("%d firings started, %d runs for %d (event, trigger) pairs, %d firings without their run; want %d, %d, %d, 0",
			started, runs, pairs, orphans, 3*trigKillEvents, 3*trigKillEvents, 3*trigKillEvents)
	}
}
