package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sseEvent is one server-sent event as a test reads it.
type sseEvent struct {
	id, name, data string
	hasID          bool
}

// sseConn is an open stream.
type sseConn struct {
	t      testing.TB
	res    *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
	// comments counts the comment lines (keep-alives) read.
	comments int
}

// openSSE opens a stream (path under the server, headers added) and
// checks its status and content type; a status other than 200 is
// returned with a nil conn.
func openSSE(t testing.TB, e *env, path string, header map[string]string) (*sseConn, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	rq, err := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rq.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		rq.Header.Set(k, v)
	}
	res, err := e.http.Client().Do(rq)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		return nil, res
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("GET %s: Content-Type %q", path, ct)
	}
	c := &sseConn{t: t, res: res, r: bufio.NewReader(res.Body), cancel: cancel}
	t.Cleanup(c.close)
	return c, res
}

func (c *sseConn) close() {
	c.cancel()
	_ = c.res.Body.Close()
}

// next reads the next event (comments are skipped and counted); ok is
// false when the stream ended.
func (c *sseConn) next() (ev sseEvent, ok bool) {
	c.t.Helper()
	var data []string
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return sseEvent{}, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.name == "" && len(data) == 0 && !ev.hasID {
				continue
			}
			ev.data = strings.Join(data, "\n")
			return ev, true
		case strings.HasPrefix(line, ":"):
			c.comments++
		case strings.HasPrefix(line, "id: "):
			ev.id, ev.hasID = strings.TrimPrefix(line, "id: "), true
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			c.t.Fatalf("a line that is no part of an event: %q", line)
		}
	}
}

// must is next that fails when the stream ended.
func (c *sseConn) must() sseEvent {
	c.t.Helper()
	ev, ok := c.next()
	if !ok {
		c.t.Fatal("the stream ended")
	}
	return ev
}

// A run's stream sends its history in order, resumes after Last-Event-ID
// without loss or repeat, and ends with "end" when the run is terminal.
func TestRunEventsStream(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		var run Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate", "input": map[string]any{}}, http.StatusCreated, &run)
		e.waitStatus(run.ID, "waiting")
		var before History
		e.api.call(http.MethodGet, "/api/v1/runs/"+run.ID+"/history", nil, http.StatusOK, &before)
		if len(before.Events) < 2 {
			t.Fatalf("history of a waiting run: %+v", before)
		}

		// Read the first entries, then drop the connection.
		c, _ := openSSE(t, e, "/api/v1/runs/"+run.ID+"/events", nil)
		var got []Event
		read := func(ev sseEvent) {
			t.Helper()
			var item Event
			if err := json.Unmarshal([]byte(ev.data), &item); err != nil {
				t.Fatalf("event %+v: %v", ev, err)
			}
			if ev.id != strconv.FormatInt(item.Seq, 10) || ev.name != item.Kind {
				t.Fatalf("event id %q and name %q for the entry %+v", ev.id, ev.name, item)
			}
			got = append(got, item)
		}
		for range 2 {
			read(c.must())
		}
		c.close()
		last := got[len(got)-1].Seq

		// More progress while nobody listens, then a reconnect.
		e.api.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/resume", map[string]any{"event": "go"}, http.StatusAccepted, nil)
		e.waitStatus(run.ID, "completed")
		c, _ = openSSE(t, e, "/api/v1/runs/"+run.ID+"/events", map[string]string{"Last-Event-ID": strconv.FormatInt(last, 10)})
		var end sseEvent
		for {
			ev := c.must()
			if ev.name == "end" {
				end = ev
				break
			}
			read(ev)
		}
		if _, ok := c.next(); ok {
			t.Error("the stream goes on after end")
		}
		var all History
		e.api.call(http.MethodGet, "/api/v1/runs/"+run.ID+"/history", nil, http.StatusOK, &all)
		if len(got) != len(all.Events) {
			t.Fatalf("streamed %d entries across the reconnect, the history has %d", len(got), len(all.Events))
		}
		for i := range got {
			g, w := got[i], all.Events[i]
			if g.Seq != w.Seq || g.Kind != w.Kind || g.Step != w.Step || !g.At.Equal(w.At) || string(g.Data) != string(w.Data) {
				t.Errorf("entry %d: streamed %+v, history %+v", i, g, w)
			}
		}
		var se StreamEnd
		if err := json.Unmarshal([]byte(end.data), &se); err != nil || se.Status != "completed" || se.Last != all.Last || end.hasID {
			t.Errorf("end event %+v (%+v, %v), want completed at %d without id", end, se, err, all.Last)
		}

		// ?after= does what Last-Event-ID does; a finished run's stream is
		// its history then end.
		c, _ = openSSE(t, e, "/api/v1/runs/"+run.ID+"/events?after="+strconv.FormatInt(all.Last-1, 10), nil)
		if ev := c.must(); ev.id != strconv.FormatInt(all.Last, 10) {
			t.Errorf("after %d: first event %+v", all.Last-1, ev)
		}
		if ev := c.must(); ev.name != "end" {
			t.Errorf("after the last entry: %+v, want end", ev)
		}
		// A business id addresses the run too; a bad Last-Event-ID is 400.
		_, res := openSSE(t, e, "/api/v1/runs/"+run.ID+"/events", map[string]string{"Last-Event-ID": "x"})
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("Last-Event-ID x: %d", res.StatusCode)
		}
		res.Body.Close()
		_, res = openSSE(t, e, "/api/v1/runs/nope/events", nil)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("an unknown run: %d", res.StatusCode)
		}
		res.Body.Close()
	})
}

// A stream outlives the request timeout, sends keep-alives while nothing
// happens, and passes on what happens then.
func TestRunEventsOutlivesTimeout(t *testing.T) {
	b := backends()[0]
	e := newEnv(t, b, &Config{Insecure: true, RequestTimeout: 50 * time.Millisecond, StreamKeepAlive: 10 * time.Millisecond})
	r, err := e.client.StartRun(t.Context(), "gate", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, res := openSSE(t, e, "/api/v1/runs/"+r.ID+"/events", nil)
	if c == nil {
		t.Fatalf("status %d", res.StatusCode)
	}
	// Twenty keep-alives, each after a wait of 10 ms at least: the stream
	// is open well past the 50 ms request timeout.
	for n := 0; n < 20; {
		line, err := c.r.ReadString('\n')
		switch {
		case err != nil:
			t.Fatalf("the stream ended after %d keep-alives: %v", n, err)
		case line == ": keep-alive\n":
			n++
		case line == "event: end\n":
			t.Fatal("the stream of a waiting run ends")
		}
	}
	if err := e.client.ResumeRun(t.Context(), r.ID, "go", nil); err != nil {
		t.Fatal(err)
	}
	for {
		ev, ok := c.next()
		if !ok {
			t.Fatal("the stream ended without end")
		}
		if ev.name == "end" {
			break
		}
	}
}

// Config.MaxStreams bounds the open streams: one more is 503 with
// Retry-After, and a place frees when a stream closes. EndStreams ends
// them and refuses new ones.
func TestStreamLimit(t *testing.T) {
	e := newEnv(t, backends()[0], &Config{Insecure: true, MaxStreams: 1})
	c, _ := openSSE(t, e, "/api/v1/runs/events", nil)
	if c == nil {
		t.Fatal("the first stream was refused")
	}
	_, res := openSSE(t, e, "/api/v1/runs/events", nil)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
		res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a stream beyond the limit: %d %v", res.StatusCode, res.Header)
	}
	res.Body.Close()
	c.close()
	deadline := time.Now().Add(30 * time.Second)
	for e.server.OpenStreams() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed stream still holds its place after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, res = openSSE(t, e, "/api/v1/runs/events", nil)
	if c == nil {
		t.Fatalf("after a stream closed: %d", res.StatusCode)
	}
	e.server.EndStreams()
	if _, ok := c.next(); ok {
		t.Fatal("an event after EndStreams")
	}
	_, res = openSSE(t, e, "/api/v1/runs/events", nil)
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a stream after EndStreams: %d", res.StatusCode)
	}
	res.Body.Close()
}

// The streams take credentials as every route does: none is 401; a
// session cookie (the dashboard's EventSource) is one.
func TestStreamAuth(t *testing.T) {
	e := newEnv(t, backends()[0], &Config{})
	tok := e.token("viewer", RoleRead)
	r, err := e.client.StartRun(t.Context(), "gate", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/v1/runs/events", "/api/v1/runs/" + r.ID + "/events"} {
		_, res := openSSE(t, e, p, nil)
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a credential: %d", p, res.StatusCode)
		}
		res.Body.Close()
		if c, res := openSSE(t, e, p, map[string]string{"Authorization": "Bearer " + tok}); c == nil {
			t.Errorf("GET %s with a token: %d", p, res.StatusCode)
		} else {
			c.close()
		}
		if c, res := openSSE(t, e, p, map[string]string{"Cookie": SessionCookie + "=" + e.signIn(tok)}); c == nil {
			t.Errorf("GET %s with a session: %d", p, res.StatusCode)
		} else {
			c.close()
		}
	}
}

// runEvent decodes a runs stream event.
func runEvent(t *testing.T, ev sseEvent) *Run {
	t.Helper()
	var r Run
	if ev.name != "run" || !ev.hasID || json.Unmarshal([]byte(ev.data), &r) != nil || r.ID == "" {
		t.Fatalf("a runs stream event %+v", ev)
	}
	return &r
}

// waitRun reads a runs stream until an event shows the run with the
// status, and returns the event ids seen on the way (by run).
func waitRun(t *testing.T, c *sseConn, id, status string, seen map[string][]string) sseEvent {
	t.Helper()
	for {
		ev := c.must()
		r := runEvent(t, ev)
		if seen != nil {
			seen[r.ID] = append(seen[r.ID], r.Status+"@"+r.UpdatedAt.Format(time.RFC3339Nano))
		}
		if r.ID == id && r.Status == status {
			return ev
		}
	}
}

// The runs stream sends a new run and its status changes, filters by
// status, and resumes after Last-Event-ID with what changed since, and
// nothing it sent before.
func TestRunsStream(t *testing.T) {
	forEach(t, func(t *testing.T, b backend) {
		e := newEnv(t, b, nil)
		c, _ := openSSE(t, e, "/api/v1/runs/events", nil)
		done, _ := openSSE(t, e, "/api/v1/runs/events?status=completed&workflow=gate", nil)
		var run Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "gate", "input": map[string]any{}}, http.StatusCreated, &run)
		waitRun(t, c, run.ID, "waiting", nil)
		e.api.call(http.MethodPost, "/api/v1/runs/"+run.ID+"/resume", map[string]any{"event": "go"}, http.StatusAccepted, nil)
		last := waitRun(t, c, run.ID, "completed", nil)
		if r := runEvent(t, done.must()); r.ID != run.ID || r.Status != "completed" {
			t.Errorf("the stream of completed gate runs sends %+v first", r)
		}
		c.close()

		// Another run while nobody listens; then a reconnect.
		var other Run
		e.api.call(http.MethodPost, "/api/v1/runs", map[string]any{"name": "greet", "input": map[string]any{"name": "x"}}, http.StatusCreated, &other)
		e.waitStatus(other.ID, "completed")
		c, _ = openSSE(t, e, "/api/v1/runs/events", map[string]string{"Last-Event-ID": last.id})
		seen := map[string][]string{}
		waitRun(t, c, other.ID, "completed", seen)
		if len(seen[run.ID]) != 0 {
			t.Errorf("the resumed stream sends again the run it sent before: %v", seen[run.ID])
		}
		// Each change of the run is sent once.
		if s := seen[other.ID]; len(s) != len(slices.Compact(slices.Clone(s))) {
			t.Errorf("the run %s comes twice for one change: %v", other.ID, s)
		}
		// The list's filter of scheduled runs is one of the stream's too.
		if sc, res := openSSE(t, e, "/api/v1/runs/events?status=scheduled", nil); sc == nil {
			t.Errorf("status=scheduled: %d", res.StatusCode)
		} else {
			sc.close()
		}
		// A bad filter or cursor is a 400 problem.
		for _, p := range []string{"/api/v1/runs/events?status=nope", "/api/v1/runs/events?status=scheduled,failed", "/api/v1/runs/events?kind=x", "/api/v1/runs/events?after=zzz"} {
			_, res := openSSE(t, e, p, nil)
			if res.StatusCode != http.StatusBadRequest {
				t.Errorf("GET %s: %d", p, res.StatusCode)
			}
			res.Body.Close()
		}
	})
}
