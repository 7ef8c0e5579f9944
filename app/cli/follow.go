package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	apiclient "github.com/hephaestus-go/hephaestus/client"
)

// Following a run: the server's stream of its history (GET
// /runs/{id}/events, server-sent events), reconnected with Last-Event-ID
// when the connection drops, so that every event is handled once.

// streamRetries is how many times in a row a follower tries to connect
// again before it gives up; reconnectWait the first wait between tries,
// doubled up to maxReconnectWait.
const (
	streamRetries    = 8
	reconnectWait    = 100 * time.Millisecond
	maxReconnectWait = 5 * time.Second
)

// followRun calls handle with each event of the run's history after
// after, in order, until the run's stream ends ("end", whose data it
// passes to handle too) or handle fails. A dropped connection is opened
// again after the last event handled; an answer of the server (a 404, a
// 403) or an "error" event ends it with that error.
func followRun(ctx context.Context, api *apiclient.Client, id string, after int64, handle func(ev *apiclient.StreamEvent) error) error {
	last := ""
	if after > 0 {
		last = strconv.FormatInt(after, 10)
	}
	fails, wait := 0, reconnectWait
	for {
		st, err := api.RunEvents(ctx, id, last)
		if err == nil {
			var ended bool
			ended, err = drain(st, handle)
			last = st.LastID
			_ = st.Close()
			if ended || (err != nil && !dropped(err)) {
				return err
			}
			if err == nil || dropped(err) {
				fails, wait = 0, reconnectWait // it was connected: a new drop
			}
		}
		if err != nil && !dropped(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fails++; fails > streamRetries {
			return fmt.Errorf("follow run %s: the connection dropped %d times in a row: %w", id, fails-1, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, maxReconnectWait)
	}
}

// drain handles the events of one connection; ended reports the end
// event.
func drain(st *apiclient.Stream, handle func(ev *apiclient.StreamEvent) error) (ended bool, err error) {
	for {
		ev, err := st.Next()
		if err != nil {
			if err == io.EOF {
				return false, io.ErrUnexpectedEOF // closed without end: connect again
			}
			return false, err
		}
		if err := handle(ev); err != nil {
			return false, err
		}
		if ev.Event == "end" {
			return true, nil
		}
	}
}

// dropped reports whether err is a connection that failed or ended
// early (connect again), not an answer of the server.
func dropped(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *apiclient.Error
	if errors.As(err, &ae) {
		return ae.Status == 502 || ae.Status == 503 || ae.Status == 504
	}
	return true
}

// followHistory prints events as they come until the run ends. Rows are
// printed one at a time, so their columns are not aligned across waits.
func followHistory(ctx context.Context, g *globals, api *apiclient.Client, id string, after int64) error {
	w := g.env.Stdout
	if !g.json() {
		fmt.Fprintln(w, strings.Join(historyHeader, "  "))
	}
	return followRun(ctx, api, id, after, func(ev *apiclient.StreamEvent) error {
		if ev.Event == "end" {
			return nil
		}
		if g.json() {
			_, err := fmt.Fprintf(w, "%s\n", compactJSON(ev.Data))
			return err
		}
		var e apiclient.HistoryEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return fmt.Errorf("decode the event %s of run %s: %w", ev.ID, id, err)
		}
		tw := newTable(w)
		historyRow(tw, &e)
		return tw.Flush()
	})
}

// followShow prints the run, then again each time its status or steps
// change, until it ends: with -o json one run per line.
func followShow(ctx context.Context, g *globals, api *apiclient.Client, id string, print func(run *apiclient.Run, body []byte) error) error {
	var shown string
	show := func() error {
		rctx, cancel := g.reqCtx(ctx, 0)
		defer cancel()
		run, resp, err := api.GetRun(rctx, id)
		if err != nil {
			return err
		}
		// What a reader sees change: the status, the condition, the
		// steps, the output and error.
		key, _ := json.Marshal([]any{run.Status, run.ScheduledFor, run.Condition, run.Steps, run.Output, run.Error})
		if string(key) == shown {
			return nil
		}
		if shown != "" && !g.json() {
			fmt.Fprintln(g.env.Stdout)
		}
		shown = string(key)
		return print(run, resp.Body)
	}
	// The entries so far are in what show prints: follow after them.
	rctx, cancel := g.reqCtx(ctx, 0)
	h, _, err := api.History(rctx, id, 0, 0)
	cancel()
	if err != nil {
		return err
	}
	if err := show(); err != nil {
		return err
	}
	return followRun(ctx, api, id, h.Last, func(*apiclient.StreamEvent) error { return show() })
}
