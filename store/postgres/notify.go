package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hephaestus-go/hephaestus/store"
)

// Reconnection backoff of Listen, and how often an idle listening
// connection is checked.
const (
	listenMinBackoff = 50 * time.Millisecond
	listenMaxBackoff = 5 * time.Second
	listenPing       = 30 * time.Second
)

// Listen calls fn with every notification that a commit of any process
// sent on the store's channels, until ctx ends or the store is closed: a
// queue that got ready tasks (Channel), a run whose leased tasks were
// cancelled (CancelChannel). It holds a connection of its own, outside the
// pool, that listens on both. When the connection fails it connects again,
// waiting between attempts with a capped exponential backoff and jitter;
// notifications sent meanwhile are lost, which costs latency, never
// correctness (workers poll and heartbeat too). fn runs on Listen's
// goroutine: it should return quickly.
func (s *Store) Listen(ctx context.Context, fn func(store.Notification)) error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return fmt.Errorf("listen: %w", s.check())
	}
	s.listeners.Add(1)
	s.mu.Unlock()
	defer s.listeners.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel) // Close ends Listen
	defer stop()

	if s.conn == nil {
		// Poll only (TransactionPooling without DirectDSN): LISTEN needs a
		// session of its own, which a pooler in transaction mode does not
		// keep. Nothing is delivered; workers poll.
		<-ctx.Done()
		if s.closed.Load() {
			return fmt.Errorf("listen: %w", s.check())
		}
		return ctx.Err()
	}

	backoff := listenMinBackoff
	for {
		err := s.listen(ctx, fn, func() { backoff = listenMinBackoff })
		if ctx.Err() != nil {
			if s.closed.Load() {
				return fmt.Errorf("listen: %w", s.check())
			}
			return ctx.Err()
		}
		_ = err // the next attempt tells whether the failure lasts
		if !sleep(ctx, jitter(backoff)) {
			continue // ctx ended: reported above
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listen connects, listens and delivers notifications until the
// connection fails or ctx ends. connected is called once listening.
func (s *Store) listen(ctx context.Context, fn func(store.Notification), connected func()) error {
	cc := s.conn.Copy()
	if cc.RuntimeParams["application_name"] == "hephaestus" {
		cc.RuntimeParams["application_name"] = "hephaestus-listen"
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	listen := "LISTEN " + pgx.Identifier{s.channel}.Sanitize() + "; LISTEN " + pgx.Identifier{s.cancels}.Sanitize()
	if _, err := conn.Exec(ctx, listen); err != nil {
		return err
	}
	connected()
	// A cancellation or a ready task notified before LISTEN took effect
	// (at start, or while reconnecting) is lost: have the listener check.
	fn(store.Notification{Resync: true})
	for {
		// Wake up now and then to check that the connection lives: one
		// that died without a word would otherwise wait forever.
		wctx, cancel := context.WithTimeout(ctx, listenPing)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			switch n.Channel {
			case s.channel:
				fn(store.Notification{Queue: n.Payload})
			case s.cancels:
				fn(store.Notification{RunID: n.Payload})
			}
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case pgconn.Timeout(err) && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = conn.Ping(pctx)
			cancel()
			if err == nil {
				continue
			}
		}
		return err
	}
}
