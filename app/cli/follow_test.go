package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hephaestus-go/hephaestus/app/cli"
	"github.com/hephaestus-go/hephaestus/flow"
)

// cuttingProxy passes requests on to the API; it ends each of the first
// cuts streams of events after two events, as a dropped connection.
type cuttingProxy struct {
	up   *url.URL
	rp   *httputil.ReverseProxy
	mu   sync.Mutex
	cuts int
	// lastIDs are the Last-Event-ID headers of the streams opened.
	lastIDs []string
}

func (p *cuttingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/events") {
		p.rp.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.lastIDs = append(p.lastIDs, r.Header.Get("Last-Event-ID"))
	cut := p.cuts > 0
	p.cuts--
	p.mu.Unlock()
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.up.String()+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	res, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(res.StatusCode)
	rc := http.NewResponseController(w)
	br := bufio.NewReader(res.Body)
	events, inEvent := 0, false
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			_, _ = io.WriteString(w, line)
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
		switch {
		case line == "\n" && inEvent:
			events, inEvent = events+1, false
			if cut && events == 2 {
				return // the connection drops after two events
			}
		case line != "\n" && !strings.HasPrefix(line, ":"):
			inEvent = true
		}
	}
}

func (p *cuttingProxy) opened() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lastIDs...)
}

// heph history --follow reads the run's stream of events and prints
// every entry once, in order, across connections that drop: it connects
// again after the last event it printed.
func TestHistoryFollowReconnects(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, st := sqliteClient(t)
	b := flow.New("gate")
	flow.EventStep(b, "wait", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("go"), flow.Waits(0))
	flow.Step(b, "after", func(ctx context.Context, in any) (string, error) { return "done", nil })
	if err := c.Register(b.Start("wait").Edge("wait", "go", "after").Edge("after", flow.EventOK, flow.Done).MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)
	up, err := url.Parse(env[cli.EnvAddr])
	if err != nil {
		t.Fatal(err)
	}
	proxy := &cuttingProxy{up: up, rp: httputil.NewSingleHostReverseProxy(up), cuts: 3}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	env = map[string]string{cli.EnvAddr: ps.URL, cli.EnvInsecure: "1"}

	r, err := c.StartRun(ctx, "gate", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"history", r.ID, "--follow", "-o", "json"}, &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }})
	}()
	// Progress once the stream was cut at least twice.
	for len(proxy.opened()) < 3 {
		if ctx.Err() != nil {
			t.Fatalf("the follower opened %v streams", proxy.opened())
		}
		time.Sleep(time.Millisecond) // polling for the reconnects, not timing them
	}
	if err := c.ResumeRun(ctx, r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("heph history --follow: exit %d, %s", code, errOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("heph history --follow did not end with the run; printed:\n%s", out.String())
	}
	all, err := c.History(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for line := range strings.Lines(strings.TrimSpace(out.String())) {
		var e struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		seqs = append(seqs, e.Seq)
	}
	if len(seqs) != len(all) {
		t.Fatalf("printed the entries %v, the history has %d", seqs, len(all))
	}
	for i, e := range all {
		if seqs[i] != e.Seq {
			t.Fatalf("printed the entries %v, want 1..%d once each", seqs, len(all))
		}
	}
	// Each reconnect named the last entry printed: 2, then 4, then 6
	// (or the run's end came sooner).
	ids := proxy.opened()
	if ids[0] != "" || ids[1] != "2" || ids[2] != "4" {
		t.Errorf("the streams opened after %q, want \"\", 2, 4, ...", ids)
	}
}

// heph show --follow prints the run, then again when it changes, until
// it ends.
func TestShowFollow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c, st := sqliteClient(t)
	b := flow.New("gate")
	flow.EventStep(b, "wait", func(ctx context.Context, in any) (flow.Result[any], error) {
		return flow.Wait[any](), nil
	}, flow.Events("go"), flow.Waits(0))
	flow.Step(b, "after", func(ctx context.Context, in any) (string, error) { return "done", nil })
	if err := c.Register(b.Start("wait").Edge("wait", "go", "after").Edge("after", flow.EventOK, flow.Done).MustBuild()); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	env := serveAPI(t, c, st)
	r, err := c.StartRun(ctx, "gate", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		got, err := c.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == "waiting" {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling for the state, not timing it
	}
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"show", r.ID, "--follow", "-o", "json"}, &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }})
	}()
	for !strings.Contains(out.String(), `"waiting"`) {
		if ctx.Err() != nil {
			t.Fatalf("heph show --follow printed %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.ResumeRun(ctx, r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("heph show --follow: exit %d, %s", code, errOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("heph show --follow did not end with the run; printed:\n%s", out.String())
	}
	var statuses []string
	for line := range strings.Lines(strings.TrimSpace(out.String())) {
		var run struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(line), &run); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		statuses = append(statuses, run.Status)
	}
	if len(statuses) < 2 || statuses[0] != "waiting" || statuses[len(statuses)-1] != "completed" {
		t.Fatalf("show --follow printed the statuses %v, want waiting first and completed last", statuses)
	}
}
