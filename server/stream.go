package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/hephtype"
	"github.com/hephaestus-go/hephaestus/store"
)

// The live streams: server-sent events (text/event-stream) of a run's
// history (GET /runs/{id}/events) and of the runs list (GET
// /runs/events). A stream is not bounded by Config.RequestTimeout: it
// lasts until the caller leaves, the run ends, or the server ends the
// streams (EndStreams); Config.MaxStreams bounds how many are open.

// Defaults of Config's stream settings.
const (
	DefaultMaxStreams      = 512
	DefaultStreamKeepAlive = 15 * time.Second
	// changeOverlap is how far before its last point the runs stream
	// reads again, so that a change committed late by another process
	// (stamped before a change already sent) is not skipped.
	changeOverlap = 5 * time.Second
	// streamRetryAfter is the Retry-After of a stream refused at the limit.
	streamRetryAfter = "5"
	// runsStreamGap is the least time between two reads of the runs
	// stream: every commit of the process wakes it, so under load the
	// changes of a moment are read together, not once per commit.
	runsStreamGap = 250 * time.Millisecond
)

// streams are the open streams of a server.
type streams struct {
	mu    sync.Mutex
	open  map[*call]context.CancelFunc
	ended bool
}

// handleStream adds a route that streams: its handler runs without the
// request timeout, and counts against Config.MaxStreams.
func (s *Server) handleStream(method, path string, a access, h func(c *call) error) {
	s.handle(method, path, a, "", h)
	s.routes[len(s.routes)-1].stream = true
}

// EndStreams ends the open streams and refuses new ones (503): call it
// when the server shuts down (http.Server.RegisterOnShutdown), since a
// stream otherwise lasts as long as its caller stays.
func (s *Server) EndStreams() {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	s.live.ended = true
	for _, cancel := range s.live.open {
		cancel()
	}
}

// OpenStreams returns the number of streams open now.
func (s *Server) OpenStreams() int {
	s.live.mu.Lock()
	defer s.live.mu.Unlock()
	return len(s.live.open)
}

// sse writes the events of one stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// openStream takes a place among the open streams (a 503 problem with
// Retry-After when there is none) and writes the stream's headers. The
// context ends when the caller leaves or the server ends its streams;
// release gives the place back.
func (s *Server) openStream(c *call) (ctx context.Context, out *sse, release func(), err error) {
	ctx, cancel := context.WithCancel(c.ctx())
	s.live.mu.Lock()
	switch {
	case s.live.ended:
		s.live.mu.Unlock()
		cancel()
		c.w.Header().Set("Retry-After", streamRetryAfter)
		return nil, nil, nil, &Problem{Status: http.StatusServiceUnavailable, Kind: kindUnavailable, Detail: "the server is shutting down: connect again to another one or later"}
	case len(s.live.open) >= s.cfg.MaxStreams:
		s.live.mu.Unlock()
		cancel()
		c.w.Header().Set("Retry-After", streamRetryAfter)
		return nil, nil, nil, &Problem{Status: http.StatusServiceUnavailable, Kind: kindUnavailable,
			Detail: fmt.Sprintf("the server has %d streams open, its limit (MaxStreams): connect again later", s.cfg.MaxStreams)}
	}
	if s.live.open == nil {
		s.live.open = map[*call]context.CancelFunc{}
	}
	s.live.open[c] = cancel
	s.live.mu.Unlock()
	release = func() {
		s.live.mu.Lock()
		delete(s.live.open, c)
		s.live.mu.Unlock()
		cancel()
	}
	h := c.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // a proxy must pass each event on at once
	c.wrote = true
	c.w.WriteHeader(http.StatusOK)
	out = &sse{w: c.w, rc: http.NewResponseController(c.w)}
	if err := out.flush(); err != nil {
		release()
		return nil, nil, nil, err
	}
	return ctx, out, release, nil
}

// event writes one event (id may be empty: the caller's last id stays).
func (o *sse) event(id, name string, data []byte) error {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + name + "\n")
	// JSON has no raw newline, but a data line must not hold one.
	for line := range strings.SplitSeq(string(data), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	_, err := o.w.Write([]byte(b.String()))
	return err
}

// comment writes a comment line, which the caller ignores: a keep-alive.
func (o *sse) comment(text string) error {
	if _, err := o.w.Write([]byte(": " + text + "\n\n")); err != nil {
		return err
	}
	return o.flush()
}

func (o *sse) flush() error { return o.rc.Flush() }

// fail ends a stream with an "error" event holding the problem of err.
func (o *sse) fail(err error) {
	b, merr := json.Marshal(problemOf(err))
	if merr != nil {
		return
	}
	if o.event("", "error", b) == nil {
		_ = o.flush()
	}
}

// lastEventID returns the Last-Event-ID header of a reconnecting caller
// ("" without).
func lastEventID(c *call) string { return strings.TrimSpace(c.r.Header.Get("Last-Event-ID")) }

// eventJSON converts a history entry as GET /runs/{id}/history shows it.
func eventJSON(e *hephaestus.HistoryEvent) *Event {
	return &Event{Seq: e.Seq, Kind: string(e.Kind), Step: e.Step, Index: e.Index, Attempt: e.Attempt,
		Name: e.Name, Data: e.Data, Error: e.Error, At: e.At.UTC()}
}

// StreamEnd is the data of a run stream's last event ("end"): the run
// ended and every entry of its history was sent.
type StreamEnd struct {
	Status string `json:"status"`
	// Last is the seq of the last entry of the run's history.
	Last int64 `json:"last"`
}

// runEvents streams a run's history: an event per entry, in order (id
// the entry's seq, event its kind, data the entry as the history shows
// it), from after the Last-Event-ID header or the after parameter, then
// "end" once the run is terminal and every entry was sent.
func (s *Server) runEvents(c *call) error {
	q := c.query()
	after := q.int64("after")
	if err := q.err(); err != nil {
		return err
	}
	if h := lastEventID(c); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return paramProblem("header", "Last-Event-ID", fmt.Sprintf("%q is not the seq of a history entry (a non-negative integer)", h))
		}
		after = n
	}
	id := c.r.PathValue("id")
	cl := s.cfg.Client
	evs, err := cl.HistoryAfter(c.ctx(), id, after, 0)
	if err != nil {
		return err
	}
	ctx, out, release, err := s.openStream(c)
	if err != nil {
		return err
	}
	defer release()
	for {
		for i := range evs {
			ev := eventJSON(&evs[i])
			c.hidePayloads(ev)
			b, err := json.Marshal(ev)
			if err != nil {
				out.fail(err)
				return nil
			}
			if out.event(strconv.FormatInt(evs[i].Seq, 10), string(evs[i].Kind), b) != nil {
				return nil
			}
			after = evs[i].Seq
		}
		if len(evs) > 0 && out.flush() != nil {
			return nil
		}
		r, err := cl.GetRun(ctx, id)
		if err != nil {
			s.endStream(ctx, out, err)
			return nil
		}
		wait := s.cfg.StreamKeepAlive
		if r.Status.Terminal() {
			wait = 0 // what the last commit wrote, then the end
		}
		evs, err = cl.HistoryAfter(ctx, id, after, wait)
		switch {
		case err != nil:
			s.endStream(ctx, out, err)
			return nil
		case len(evs) > 0:
		case r.Status.Terminal():
			b, _ := json.Marshal(&StreamEnd{Status: string(r.Status), Last: after})
			if out.event("", "end", b) == nil {
				_ = out.flush()
			}
			return nil
		case out.comment("keep-alive") != nil:
			return nil
		}
	}
}

// endStream ends a stream on err: silently when the caller left or the
// server ended its streams, else with an "error" event.
func (s *Server) endStream(ctx context.Context, out *sse, err error) {
	if ctx.Err() == nil {
		s.cfg.Logger.Warn("server: a stream failed", "err", err)
		out.fail(err)
	}
}

// runsFilter is the filter of the runs stream: the list filters of GET
// /runs that the stream takes.
func runsFilter(q *query) *hephaestus.ListOptions {
	opts := &hephaestus.ListOptions{Flow: q.str("workflow"), Limit: 1000}
	switch k := q.str("kind"); k {
	case "", string(hephaestus.KindFlow), string(hephaestus.KindWorkflow):
		opts.Kind = hephaestus.RunKind(k)
	default:
		q.failFix("kind", `pass "flow" (flows, documents and jobs) or "workflow"`, "%q is not a kind of run", k)
	}
	statuses := q.list("status")
	for _, st := range statuses {
		switch {
		case st == statusScheduled && len(statuses) > 1:
			q.failFix("status", "pass scheduled alone", "scheduled is not combined with other statuses")
		case st == statusScheduled:
			opts.Scheduled = true
		case !hephtype.RunStatus(st).Valid():
			q.failFix("status", "pass one of "+strings.Join(runStatusNames, ", "), "%q is not a run status", st)
		default:
			opts.Statuses = append(opts.Statuses, hephtype.RunStatus(st))
		}
	}
	return opts
}

// changeCursor is the id of a runs stream's event: the run's last change
// (updated_at and id), in the form of a list's cursor.
func changeCursor(p hephaestus.RunChange) string { return store.EncodeRunCursor(p.At, p.ID) }

// after reports whether the change a comes after b.
func changeAfter(a, b hephaestus.RunChange) bool {
	if c := a.At.Compare(b.At); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}

// runsEvents streams the runs list: an event "run" each time a run the
// filters keep is created or changes (data the run as GET /runs lists
// it, id the point of its change). It resumes after the Last-Event-ID
// header or the after parameter (an event's id); without either it
// starts a few seconds before now, so that a page rendered just before
// misses nothing.
func (s *Server) runsEvents(c *call) error {
	q := c.query()
	opts := runsFilter(q)
	from := q.str("after")
	if err := q.err(); err != nil {
		return err
	}
	where := "query parameter after"
	if h := lastEventID(c); h != "" {
		from, where = h, "header Last-Event-ID"
	}
	cl := s.cfg.Client
	// floor: what the caller has seen (a resumed stream sends nothing up
	// to it); last: the newest change sent.
	var floor, last hephaestus.RunChange
	if from != "" {
		at, id, err := store.DecodeRunCursor(from)
		if err != nil {
			return badRequest(fmt.Sprintf("%s: %q is not the id of an event of this stream", where, from))
		}
		floor = hephaestus.RunChange{At: at, ID: id}
	} else {
		floor = cl.ChangeBefore(changeOverlap)
		floor.At = floor.At.Add(-time.Microsecond)
	}
	last = floor
	// A first read answers an error (a bad filter) as a problem.
	probe := *opts
	probe.Limit = 1
	if _, err := cl.RunsChangedAfter(c.ctx(), &probe, last, 0); err != nil {
		return err
	}
	ctx, out, release, err := s.openStream(c)
	if err != nil {
		return err
	}
	defer release()
	// sent: the change of each run sent within the overlap before last.
	sent := map[string]time.Time{}
	for {
		// Read from a little before the last change sent, dropping what
		// was sent: a change committed late is still seen.
		from := hephaestus.RunChange{At: last.At.Add(-changeOverlap)}
		for {
			runs, err := cl.RunsChangedAfter(ctx, opts, from, 0)
			if err != nil {
				s.endStream(ctx, out, err)
				return nil
			}
			for _, r := range runs {
				p := hephaestus.ChangeOf(r)
				from = p
				if !changeAfter(p, floor) || sent[r.ID].Equal(r.UpdatedAt) {
					continue
				}
				b, err := json.Marshal(runJSON(r, false))
				if err != nil {
					out.fail(err)
					return nil
				}
				if changeAfter(p, last) {
					last = p
				}
				if out.event(changeCursor(last), "run", b) != nil {
					return nil
				}
				sent[r.ID] = r.UpdatedAt
			}
			if len(runs) < opts.Limit {
				break
			}
		}
		if out.flush() != nil {
			return nil
		}
		for id, at := range sent {
			if at.Before(last.At.Add(-changeOverlap)) {
				delete(sent, id)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(runsStreamGap):
		}
		runs, err := cl.RunsChangedAfter(ctx, opts, last, s.cfg.StreamKeepAlive)
		if err != nil {
			s.endStream(ctx, out, err)
			return nil
		}
		if len(runs) == 0 && out.comment("keep-alive") != nil {
			return nil
		}
	}
}
