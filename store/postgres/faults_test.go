package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flow"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
)

const (
	faultRuns  = 300
	faultSteps = 3
)

// faultFlow is a chain of three steps that take a few milliseconds each;
// step i adds i to the previous output.
func faultFlow() *flow.Flow {
	b := flow.New("faults").BusinessKey("n", flow.ScopeForever)
	for i := range faultSteps {
		var opts []flow.StepOption
		if i > 0 {
			opts = append(opts, flow.DependsOn(fmt.Sprintf("s%d", i-1)))
		}
		flow.Step(b, fmt.Sprintf("s%d", i), func(ctx context.Context, in int) (int, error) {
			select {
			case <-time.After(time.Duration(2000+rand.IntN(6000)) * time.Microsecond):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			if i > 0 {
				prev, err := flow.Output[int](ctx, fmt.Sprintf("s%d", i-1))
				return prev + i, err
			}
			return in, nil
		}, opts...)
	}
	return b.MustBuild()
}

// faultLoad runs faultRuns runs through a client on dsn while inject is
// called with the number of runs completed so far (from a goroutine of
// its own, every few milliseconds, until every run completed), then checks
// that every run completed exactly once per step.
func faultLoad(t *testing.T, dsn string, inject func(completed int)) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := postgres.Open(ctx, &postgres.Config{DSN: dsn, Timeout: 15 * time.Second, ConnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs logCounter
	c, err := heph.New(&heph.Config{
		Store: st, Queues: map[string]int{"default": 4},
		LeaseDuration: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond, PollInterval: 200 * time.Millisecond,
		Logger: slog.New(&logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(faultFlow()); err != nil {
		t.Fatal(err)
	}
	var completed atomic.Int64
	var commitFailures atomic.Int64
	unsubscribe := c.Subscribe(func(e heph.Event) {
		switch e.Kind {
		case heph.RunCompleted:
			completed.Add(1)
		case heph.CommitFailed:
			commitFailures.Add(1)
		}
	})
	defer unsubscribe()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background()) //nolint:errcheck // checked below

	// The faults, while runs are in flight.
	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			inject(int(completed.Load()))
		}
	})
	stopFaults := sync.OnceFunc(func() { close(stop); faults.Wait() })
	defer stopFaults()

	// Starts that fail are tried again: the business key (scope forever)
	// makes a start that did commit come back as a duplicate.
	var starts sync.WaitGroup
	next := atomic.Int64{}
	for range 4 {
		starts.Go(func() {
			for i := int(next.Add(1)) - 1; i < faultRuns; i = int(next.Add(1)) - 1 {
				for {
					_, err := c.StartRun(ctx, "faults", i, &heph.StartOptions{BusinessValue: strconv.Itoa(i)})
					if err == nil || errors.Is(err, heph.ErrDuplicateRun) {
						break
					}
					if ctx.Err() != nil {
						t.Errorf("start %d: %v", i, err)
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	starts.Wait()

	// Wait for every run to complete, as the store says.
	var done []*store.Run
	for {
		page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "faults", Statuses: []hephtype.RunStatus{hephtype.StatusCompleted}, Limit: 1000})
		if err == nil {
			done = page.Runs
			if len(done) == faultRuns {
				break
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d runs completed in time (last error: %v); logs: %s", len(done), faultRuns, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopFaults()
	t.Logf("%d runs completed; %d failed commits; logs: %s", len(done), commitFailures.Load(), logs.String())
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	page, err := st.ListRuns(ctx, &store.ListRunsParams{Workflow: "faults", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != faultRuns {
		t.Fatalf("%d runs stored, want %d", len(page.Runs), faultRuns)
	}
	for _, r := range page.Runs {
		if r.Status != hephtype.StatusCompleted {
			t.Errorf("run %s is %s: %s", r.BusinessID, r.Status, r.Error)
			continue
		}
		h, err := st.History(ctx, &store.HistoryParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		completions := map[string]int{}
		for _, ev := range h {
			switch ev.Kind {
			case hephtype.EventStepCompleted:
				completions[ev.Step]++
			case hephtype.EventRunCompleted:
				completions["run"]++
			}
		}
		for i := range faultSteps {
			if n := completions[fmt.Sprintf("s%d", i)]; n != 1 {
				t.Errorf("run %s: step s%d completed %d times", r.BusinessID, i, n)
			}
		}
		if completions["run"] != 1 {
			t.Errorf("run %s completed %d times", r.BusinessID, completions["run"])
		}
		value, _ := strconv.Atoi(strings.TrimPrefix(r.BusinessID, "n::"))
		if want := value + 0 + 1 + 2; !jsonIs(r.Output, fmt.Sprintf(`{"s2":%d}`, want)) {
			t.Errorf("run %s: output %s, want s2 = %d", r.BusinessID, r.Output, want)
		}
	}
}

func jsonIs(got []byte, want string) bool {
	return strings.ReplaceAll(string(got), " ", "") == want
}

// logCounter is a slog handler that counts records by message.
type logCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[r.Level.String()+" "+r.Message]++
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }
func (l *logCounter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, n := range l.counts {
		out = append(out, fmt.Sprintf("%q×%d", k, n))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// TestFaultsTerminateBackends kills every session of the test database
// (the pool's, Listen's) again and again while 300 runs are in flight.
func TestFaultsTerminateBackends(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	admin := connect(t, dsn)
	var rounds, killed int
	last := time.Time{}
	faultLoad(t, dsn, func(completed int) {
		// A round every 150 ms, while runs remain, at most 25.
		if completed >= faultRuns || rounds >= 25 || time.Since(last) < 150*time.Millisecond {
			return
		}
		last = time.Now()
		rounds++
		var n int
		err := admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
		if err != nil {
			t.Errorf("kill sessions: %v", err)
		}
		killed += n
	})
	t.Logf("%d rounds killed %d sessions", rounds, killed)
	if rounds < 5 {
		t.Fatalf("only %d rounds of kills happened while runs were in flight", rounds)
	}
}

// TestFaultsServerRestart restarts a private PostgreSQL server twice
// while 300 runs are in flight.
func TestFaultsServerRestart(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	restarts := []int{40, 160} // restart once this many runs completed
	done := 0
	faultLoad(t, srv.dsn, func(completed int) {
		if done == len(restarts) || completed < restarts[done] {
			return
		}
		if completed >= faultRuns {
			t.Errorf("the runs completed before restart %d", done+1)
			done = len(restarts)
			return
		}
		start := time.Now()
		if err := srv.ctl("restart", "-m", "fast"); err != nil {
			t.Errorf("restart: %v", err)
		}
		t.Logf("restart %d at %d runs completed took %v", done+1, completed, time.Since(start).Round(time.Millisecond))
		done++
	})
	if done != len(restarts) {
		t.Fatalf("%d restarts of %d happened", done, len(restarts))
	}
}

// server is a throwaway PostgreSQL cluster in a temporary directory, on a
// port of its own: restarting it disturbs nobody else.
type server struct {
	dir, data, bin, dsn string
	runAs               string // user to run the server as; "" for the current one
}

func newServer(t *testing.T) *server {
	t.Helper()
	bin, err := pgBin()
	if err != nil {
		pgtest.Unavailable(t, fmt.Errorf("no PostgreSQL server binaries for a private cluster: %w", err))
	}
	s := &server{bin: bin}
	if os.Geteuid() == 0 {
		// The server refuses to run as root.
		if _, err := user.Lookup("postgres"); err != nil {
			pgtest.Unavailable(t, fmt.Errorf("running as root and no postgres user for a private cluster: %w", err))
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			pgtest.Unavailable(t, fmt.Errorf("running as root and no runuser for a private cluster: %w", err))
		}
		s.runAs = "postgres"
	}
	// Not t.TempDir: its parents are private to root.
	s.dir, err = os.MkdirTemp("", "heph-faults-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	if s.runAs != "" {
		u, _ := user.Lookup(s.runAs)
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	s.data = filepath.Join(s.dir, "data")
	port := freePort(t)
	if err := s.run("initdb", "-D", s.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50", port, s.dir)
	if err := s.ctl("start", "-o", opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd := s.cmd("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("stop the private cluster: %v\n%s", err, out)
		}
	})
	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	// Make sure it answers.
	conn, err := pgx.Connect(t.Context(), s.dsn)
	if err != nil {
		t.Fatalf("connect to the private cluster: %v", err)
	}
	conn.Close(t.Context())
	return s
}

func (s *server) cmd(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.runAs != "" {
		return exec.Command("runuser", append([]string{"-u", s.runAs, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

// run runs a command with its output to a file, not a pipe: a server
// that pg_ctl starts inherits the output, and would keep a pipe open.
func (s *server) run(name string, args ...string) error {
	out, err := os.CreateTemp("", "heph-faults-out-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := s.cmd(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		text, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, text)
	}
	return nil
}

// ctl runs pg_ctl with an action, waiting for it to take effect; the
// server logs to a file in the cluster's directory.
func (s *server) ctl(action string, args ...string) error {
	args = append([]string{"-D", s.data, "-w", "-t", "60", "-l", filepath.Join(s.dir, "log"), action}, args...)
	return s.run("pg_ctl", args...)
}

// pgBin finds the directory of pg_ctl and initdb.
func pgBin() (string, error) {
	if dir := os.Getenv("HEPH_PG_BINDIR"); dir != "" {
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("pg_ctl")
	if err != nil {
		return "", err
	}
	if _, err := exec.LookPath("initdb"); err != nil {
		return "", err
	}
	return filepath.Dir(p), nil
}

func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
