package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// StreamEvent is one server-sent event of a stream.
type StreamEvent struct {
	// ID is the event's id ("" for one without: an end or an error).
	ID string
	// Event is its name: a history entry's kind, "run", "end", "error".
	Event string
	// Data is its data (JSON).
	Data json.RawMessage
}

// Stream is an open stream of server-sent events (text/event-stream).
// Read it with Next; Close it when done.
type Stream struct {
	body io.ReadCloser
	r    *bufio.Reader
	// idle closes the connection when nothing came for StreamIdle.
	idle *time.Timer
	// LastID is the id of the last event read that had one: what a
	// reconnect sends as Last-Event-ID.
	LastID string
}

// StreamIdle is how long a stream may send nothing, not even a
// keep-alive (the server sends one every 15 seconds), before the
// connection is taken for dead and closed: Next then fails as on a
// dropped connection.
const StreamIdle = 50 * time.Second

// ErrStreamFailed wraps the problem of a stream's "error" event: the
// server ended the stream on a failure.
var ErrStreamFailed = errors.New("the stream failed")

// OpenStream opens GET path (under /api/v1) as a stream of events,
// sending lastID as Last-Event-ID when it is not empty. An answer other
// than 200 is its *Error, as for every call.
func (c *Client) OpenStream(ctx context.Context, path string, query url.Values, lastID string) (*Stream, error) {
	target := c.base.String() + "/api/v1" + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "text/event-stream, application/problem+json")
	req.Header.Set("User-Agent", c.agent)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("GET %s: %w", path, ctx.Err())
		}
		return nil, fmt.Errorf("GET %s: %w: %w", req.URL.Redacted(), ErrUnreachable, unwrapURL(err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode < 400 {
			return nil, fmt.Errorf("GET %s: status %d, want a stream", path, resp.StatusCode)
		}
		return nil, problem(resp, b)
	}
	st := &Stream{body: resp.Body, r: bufio.NewReader(resp.Body), LastID: lastID}
	st.idle = time.AfterFunc(StreamIdle, func() { _ = resp.Body.Close() })
	return st, nil
}

// RunEvents opens the stream of a run's history (GET /runs/{id}/events),
// after the entry lastID (its seq; "" for the whole history).
func (c *Client) RunEvents(ctx context.Context, id, lastID string) (*Stream, error) {
	return c.OpenStream(ctx, "/runs/"+seg(id)+"/events", nil, lastID)
}

// RunsEvents opens the stream of the runs list's changes (GET
// /runs/events), with the list's status and workflow filters of f,
// after the event lastID ("" for from now).
func (c *Client) RunsEvents(ctx context.Context, f *RunFilter, lastID string) (*Stream, error) {
	q := url.Values{}
	if f != nil {
		if len(f.Statuses) > 0 {
			q.Set("status", strings.Join(f.Statuses, ","))
		}
		if f.Workflow != "" {
			q.Set("workflow", f.Workflow)
		}
	}
	return c.OpenStream(ctx, "/runs/events", q, lastID)
}

// Next returns the next event; comments (keep-alives) are skipped. It
// returns io.EOF when the server closed the stream after a whole event,
// io.ErrUnexpectedEOF when the connection ended within one, and an error
// wrapping ErrStreamFailed for an "error" event (with the problem's
// *Error). An "end" event is returned as any other.
func (s *Stream) Next() (*StreamEvent, error) {
	var (
		ev      StreamEvent
		data    []string
		started bool
	)
	for {
		line, err := s.r.ReadString('\n')
		s.idle.Reset(StreamIdle)
		if err != nil {
			if err == io.EOF && !started && line == "" {
				return nil, io.EOF
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if !started {
				continue
			}
			ev.Data = json.RawMessage(strings.Join(data, "\n"))
			if ev.ID != "" {
				s.LastID = ev.ID
			}
			if ev.Event == "error" {
				e := &Error{Status: http.StatusInternalServerError, Body: ev.Data}
				var p struct {
					Status int    `json:"status"`
					Title  string `json:"title"`
					Detail string `json:"detail"`
					Fix    string `json:"fix"`
				}
				if json.Unmarshal(ev.Data, &p) == nil {
					if p.Status != 0 {
						e.Status = p.Status
					}
					e.Title, e.Detail, e.Fix = p.Title, p.Detail, p.Fix
				}
				return nil, fmt.Errorf("%w: %w", ErrStreamFailed, e)
			}
			return &ev, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		started = true
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
		}
	}
}

// Close closes the stream.
func (s *Stream) Close() error {
	s.idle.Stop()
	return s.body.Close()
}
