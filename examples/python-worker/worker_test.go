package pythonworker_test

// End-to-end tests of the Python example worker (heph_worker.py) against
// a real server on loopback, on SQLite and on PostgreSQL: the server has
// no Go function for the document's actions, so only the Python process
// can run its steps.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	heph "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/internal/pgtest"
	"github.com/hephaestus-go/hephaestus/server"
	"github.com/hephaestus-go/hephaestus/store"
	"github.com/hephaestus-go/hephaestus/store/postgres"
	"github.com/hephaestus-go/hephaestus/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience bounds every wait for an event; nothing asserts on time.
const patience = 2 * time.Minute

func TestPythonWorkerSQLite(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(context.Background(), &sqlite.Config{Path: filepath.Join(t.TempDir(), "heph.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	runPythonWorkerTests(t, st)
}

func TestPythonWorkerPostgres(t *testing.T) {
	t.Parallel()
	st, err := postgres.Open(context.Background(), &postgres.Config{DSN: pgtest.DSN(t)})
	if err != nil {
		pgtest.Unavailable(t, err)
		return
	}
	t.Cleanup(func() { _ = st.Close() })
	runPythonWorkerTests(t, st)
}

func runPythonWorkerTests(t *testing.T, st store.Store) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is needed for the Python worker's test (.ci/run installs it): %v", err)
	}
	e := startServer(t, st)
	t.Run("RunsTheQuoteFlow", func(t *testing.T) { testQuote(t, e) })
	t.Run("PythonUnitTests", testPythonUnit)
	t.Run("KilledWorkerLosesNothing", func(t *testing.T) { testKilledWorker(t, e) })
}

// env is a server on loopback with a worker token.
type env struct {
	url         string
	admin       string // an admin token, for the test's own calls
	workerToken string
}

func startServer(t *testing.T, st store.Store) *env {
	t.Helper()
	ctx := context.Background()
	c, err := heph.New(&heph.Config{Store: st, LeaseDuration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// No Go actions: every action a document names runs remotely.
	reg := flowdoc.NewRegistry()
	reg.SetFallback(flowdoc.RemoteAction)
	if err := c.RegisterDocuments(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(&server.Config{Client: c, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) })
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		wg.Wait()
		srv.Stop()
		_ = c.Stop(sctx)
	})
	_, _, admin, err := server.NewToken(ctx, st.(store.Admin), &server.TokenParams{Principal: "test-admin", Role: server.RoleAdmin}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, _, wtok, err := server.NewToken(ctx, st.(store.Admin), &server.TokenParams{Principal: "python", Service: true, Role: server.RoleWorker}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{url: "http://" + ln.Addr().String(), admin: admin, workerToken: wtok}
	doc, err := os.ReadFile("flow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e.call(t, "POST", "/documents", map[string]any{"name": "quote", "format": "yaml", "content": string(doc)}, nil)
	slow := "name: slow\nsteps:\n  hold:\n    action: slow\n    args: {started_dir: \"{{input.started_dir}}\", until_file: \"{{input.until_file}}\"}\n    done: true\n"
	e.call(t, "POST", "/documents", map[string]any{"name": "slow", "format": "yaml", "content": slow}, nil)
	return e
}

// call sends a request with the admin token and decodes a 2xx answer
// into out.
func (e *env) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.url+"/api/v1"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

type run struct {
	ID               string          `json:"id"`
	Status           string          `json:"status"`
	Output           json.RawMessage `json:"output"`
	Error            string          `json:"error"`
	SearchAttributes map[string]any  `json:"search_attributes"`
}

// result waits for the run to end, through the API's long poll.
func (e *env) result(t *testing.T, id string) *run {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		var r run
		if code := e.call(t, "GET", "/runs/"+id+"/result?wait=20s", nil, &r); code == http.StatusOK {
			return &r
		}
	}
	t.Fatalf("run %s did not end within %s", id, patience)
	return nil
}

// worker is a running heph_worker.py.
type worker struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

func (e *env) startWorker(t *testing.T, id string, extra ...string) *worker {
	t.Helper()
	args := append([]string{"heph_worker.py", "--addr", e.url, "--worker-id", id}, extra...)
	cmd := exec.Command("python3", args...)
	cmd.Env = append(os.Environ(), "HEPH_TOKEN="+e.workerToken, "PYTHONUNBUFFERED=1")
	w := &worker{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		// Killed, not stopped: a stopped worker first waits for its
		// long-polling claim to return.
		_ = cmd.Process.Kill()
		<-w.done
		if t.Failed() {
			t.Logf("worker %s said:\n%s", id, w.out.String())
		}
	})
	return w
}

func testQuote(t *testing.T, e *env) {
	e.startWorker(t, "py-quote")
	cases := []struct {
		customer string
		amount   float64
		total    float64
	}{{"vip-7", 100, 80}, {"c-1", 100, 100}, {"vip-2", 50, 40}}
	ids := make([]string, len(cases))
	for i, c := range cases {
		var r run
		e.call(t, "POST", "/runs", map[string]any{"kind": "document", "name": "quote",
			"input": map[string]any{"customer": c.customer, "amount": c.amount}}, &r)
		ids[i] = r.ID
	}
	for i, c := range cases {
		r := e.result(t, ids[i])
		if r.Status != "completed" {
			t.Fatalf("run %s (%s): %s %s", r.ID, c.customer, r.Status, r.Error)
		}
		var out struct {
			Price struct {
				Total float64 `json:"total"`
			} `json:"price"`
		}
		if err := json.Unmarshal(r.Output, &out); err != nil || out.Price.Total != c.total {
			t.Errorf("run %s (%s): output %s, want total %v", r.ID, c.customer, r.Output, c.total)
		}
		// The worker upserted the tier with lookup_customer's result.
		if tier := map[bool]string{true: "gold", false: "standard"}[c.total < c.amount]; r.SearchAttributes["tier"] != tier {
			t.Errorf("run %s (%s): search attributes %v, want tier %s", r.ID, c.customer, r.SearchAttributes, tier)
		}
	}
	// What the actions logged is in the run's step logs, per step.
	var logs struct {
		Records []struct {
			Step    string          `json:"step"`
			Worker  string          `json:"worker"`
			Message string          `json:"message"`
			Attrs   json.RawMessage `json:"attrs"`
		} `json:"records"`
	}
	e.call(t, "GET", "/runs/"+ids[0]+"/logs", nil, &logs)
	var got []string
	for _, r := range logs.Records {
		got = append(got, r.Step+" "+r.Worker+" "+r.Message+" "+string(r.Attrs))
	}
	want := []string{`customer py-quote looked up the customer {"customer":"vip-7","tier":"gold"}`, `price py-quote priced the order {"amount":100.0,"discount":0.2}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logs of run %s:\n%s\nwant\n%s", ids[0], strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The worker is listed with what it handles.
	var workers []struct {
		ID       string   `json:"id"`
		Handlers []string `json:"handlers"`
	}
	e.call(t, "GET", "/workers", nil, &workers)
	found := false
	for _, w := range workers {
		if w.ID == "py-quote" {
			found = strings.Contains(strings.Join(w.Handlers, ","), "action:quote")
		}
	}
	if !found {
		t.Errorf("GET /workers does not list py-quote with action:quote: %+v", workers)
	}
}

// A worker killed while it holds a task loses nothing: its lease expires,
// another worker runs the step, and the step completes once, with the
// second worker's output.
func testKilledWorker(t *testing.T, e *env) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	if err := os.Mkdir(started, 0o755); err != nil {
		t.Fatal(err)
	}
	until := filepath.Join(dir, "go")
	var r run
	e.call(t, "POST", "/runs", map[string]any{"kind": "document", "name": "slow",
		"input": map[string]any{"started_dir": started, "until_file": until}}, &r)

	first := e.startWorker(t, "py-doomed", "--lease", "2s")
	waitFile(t, filepath.Join(started, "py-doomed"))
	// What it logged reaches the server with a heartbeat, before the kill.
	if got := e.waitLogs(t, r.ID); !strings.Contains(got, "py-doomed holding the task") {
		t.Fatalf("logs before the kill: %s", got)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-first.done
	if err := os.WriteFile(until, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.startWorker(t, "py-second", "--lease", "2s")
	end := e.result(t, r.ID)
	if end.Status != "completed" || !strings.Contains(string(end.Output), "py-second") {
		t.Fatalf("run %s: %s output %s error %s; want completed by py-second", r.ID, end.Status, end.Output, end.Error)
	}
	var hist struct {
		Events []struct {
			Kind string `json:"kind"`
			Step string `json:"step"`
		} `json:"events"`
	}
	e.call(t, "GET", "/runs/"+r.ID+"/history", nil, &hist)
	completed := 0
	for _, ev := range hist.Events {
		if ev.Kind == "step_completed" && ev.Step == "hold" {
			completed++
		}
	}
	if completed != 1 {
		t.Fatalf("step hold completed %d times in the history, want once: %+v", completed, hist.Events)
	}
	// The killed worker's log is kept, with the second's (the same attempt:
	// a lease lost is not an attempt).
	if got := e.waitLogs(t, r.ID); !strings.Contains(got, "1 py-doomed holding the task") || !strings.Contains(got, "1 py-second holding the task") {
		t.Fatalf("logs after the run: %s", got)
	}
}

// waitLogs returns the run's step logs as lines "attempt worker message",
// waiting (the API's long poll) until there is one.
func (e *env) waitLogs(t *testing.T, id string) string {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		var page struct {
			Records []struct {
				Attempt int    `json:"attempt"`
				Worker  string `json:"worker"`
				Message string `json:"message"`
			} `json:"records"`
		}
		e.call(t, "GET", "/runs/"+id+"/logs?wait=20s", nil, &page)
		if len(page.Records) > 0 {
			var lines []string
			for _, r := range page.Records {
				lines = append(lines, fmt.Sprintf("%d %s %s", r.Attempt, r.Worker, r.Message))
			}
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("run %s logged nothing within %s", id, patience)
	return ""
}

// The worker's own unit tests (python3 -m unittest; standard library only).
func testPythonUnit(t *testing.T) {
	cmd := exec.Command("python3", "-B", "-m", "unittest", "-v", "test_heph_worker")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		} else if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not appear within %s", path, patience)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.b.String())
}
