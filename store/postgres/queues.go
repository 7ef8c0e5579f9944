package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Queues = (*Store)(nil)

const (
	getQueueSQL = "SELECT " + queueCols + ", window_start, window_starts FROM §queues WHERE name = $1"
	// Creates or replaces the limits of queue $1 (keeping its pause), and
	// wakes its workers (channel $10): a raised limit frees slots.
	putQueueSQL = `WITH u AS (
		INSERT INTO §queues (name, max_running, max_running_per_key, rate_limit, rate_period, key_rate_limit,
			key_rate_period, fair, weights, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $11)
		ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running,
			max_running_per_key = excluded.max_running_per_key, rate_limit = excluded.rate_limit,
			rate_period = excluded.rate_period, key_rate_limit = excluded.key_rate_limit,
			key_rate_period = excluded.key_rate_period, fair = excluded.fair, weights = excluded.weights,
			updated_at = excluded.updated_at
		RETURNING name)
	SELECT count(pg_notify($10, name)) FROM u`
	// Pauses or resumes queue $1 ($2), and wakes its workers (channel $4).
	pauseQueueSQL = `WITH u AS (
		INSERT INTO §queues (name, paused, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
		RETURNING name, paused)
	SELECT count(pg_notify($4, name)) FILTER (WHERE NOT paused) FROM u`
	// The figures of queue $1 at $2.
	statsSQL = `SELECT
		(SELECT count(*) FROM §tasks WHERE queue = $1 AND ready_at <= $2 AND (lease_until IS NULL OR lease_until <= $2)),
		(SELECT count(*) FROM §tasks WHERE queue = $1 AND ready_at > $2 AND (lease_until IS NULL OR lease_until <= $2)),
		(SELECT count(*) FROM §tasks WHERE queue = $1 AND owner IS NOT NULL AND lease_until > $2),
		(SELECT min(ready_at) FROM §tasks WHERE queue = $1 AND ready_at <= $2 AND (lease_until IS NULL OR lease_until <= $2))`
	// The running work of queue $1 at $2 per key, most first, at most $3
	// keys, each with the total.
	runningByKeySQL = `SELECT key, n, sum(n) OVER () FROM (
		SELECT l.key, count(*) AS n FROM §queue_leases l JOIN §tasks t ON t.id = l.task_id AND t.token = l.token
		WHERE l.queue = $1 AND t.owner IS NOT NULL AND t.lease_until > $2 GROUP BY l.key) AS k
	ORDER BY n DESC, key LIMIT $3`
	// Every queue with a configuration or tasks (a skip scan of
	// tasks_claim for the latter).
	allQueuesSQL = `WITH RECURSIVE q(name) AS (
		SELECT min(queue) FROM §tasks
		UNION ALL
		SELECT (SELECT min(queue) FROM §tasks WHERE queue > q.name) FROM q WHERE q.name IS NOT NULL)
	SELECT name FROM q WHERE name IS NOT NULL UNION SELECT name FROM §queues ORDER BY 1`
)

// PutQueue creates or replaces a queue's limits.
func (s *Store) PutQueue(ctx context.Context, p *store.PutQueueParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("put queue: %w", err)
	}
	q := &p.Queue
	if err := q.Check(); err != nil {
		return fmt.Errorf("put queue: %w", err)
	}
	if p.Now.IsZero() {
		return errors.New("put queue: Now is zero")
	}
	var weights *string
	if len(q.Weights) > 0 {
		b, err := json.Marshal(q.Weights)
		if err != nil {
			return fmt.Errorf("put queue: %w", err)
		}
		w := string(b)
		weights = &w
	}
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.sq(putQueueSQL), q.Name, q.MaxRunning, q.MaxRunningPerKey, q.Rate.Limit,
			q.Rate.Period.Microseconds(), q.KeyRate.Limit, q.KeyRate.Period.Microseconds(), q.Fair, weights,
			s.channel, truncate(p.Now))
		return err
	})
	if err != nil {
		return s.fail("put queue", err)
	}
	return nil
}

// PauseQueue pauses or resumes a queue.
func (s *Store) PauseQueue(ctx context.Context, p *store.PauseQueueParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("pause queue: %w", err)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("pause queue: %w", err)
	}
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.sq(pauseQueueSQL), p.Name, p.Paused, truncate(p.Now), s.channel)
		return err
	})
	if err != nil {
		return s.fail("pause queue", err)
	}
	return nil
}

// GetQueue returns a queue's configuration.
func (s *Store) GetQueue(ctx context.Context, name string) (*store.Queue, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get queue: %w", err)
	}
	q, _, err := s.getQueue(ctx, name)
	if err != nil {
		return nil, err
	}
	return q, nil
}

func (s *Store) getQueue(ctx context.Context, name string) (*store.Queue, *queueWindow, error) {
	var q store.Queue
	var w queueWindow
	err := s.idempotent(ctx, func(ctx context.Context) error {
		var ws *time.Time
		dest := append(queueDest(&q), &ws, &w.starts)
		if err := s.pool.QueryRow(ctx, s.sq(getQueueSQL), name).Scan(dest...); err != nil {
			return err
		}
		w.start = fromNull(ws)
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, fmt.Errorf("get queue %s: %w", name, store.ErrQueueNotFound)
	}
	if err != nil {
		return nil, nil, s.fail("get queue", err)
	}
	q.UpdatedAt = q.UpdatedAt.UTC()
	return &q, &w, nil
}

type queueWindow struct {
	start  time.Time
	starts int
}

// QueueStats returns the figures of queues.
func (s *Store) QueueStats(ctx context.Context, p *store.QueueStatsParams) ([]*store.QueueStats, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	top, err := p.Check()
	if err != nil {
		return nil, fmt.Errorf("queue stats: %w", err)
	}
	names := p.Names
	if len(names) == 0 {
		err := s.idempotent(ctx, func(ctx context.Context) error {
			rows, err := s.pool.Query(ctx, s.sq(allQueuesSQL))
			if err != nil {
				return err
			}
			names, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err != nil {
			return nil, s.fail("queue stats", err)
		}
	}
	now := truncate(p.Now)
	out := make([]*store.QueueStats, 0, len(names))
	for _, name := range names {
		st := &store.QueueStats{Queue: store.Queue{Name: name}}
		q, w, err := s.getQueue(ctx, name)
		switch {
		case errors.Is(err, store.ErrQueueNotFound):
		case err != nil:
			return nil, err
		default:
			st.Queue, st.Configured = *q, true
			if q.Rate.Limit > 0 && w.start.Equal(q.Rate.Window(now)) {
				st.Window, st.WindowStarts = w.start, w.starts
			} else if q.Rate.Limit > 0 {
				st.Window = q.Rate.Window(now)
			}
		}
		err = s.idempotent(ctx, func(ctx context.Context) error {
			var oldest *time.Time
			var ready, sched, leased int64
			if err := s.pool.QueryRow(ctx, s.sq(statsSQL), name, now).Scan(&ready, &sched, &leased, &oldest); err != nil {
				return err
			}
			st.Ready, st.Scheduled, st.Leased, st.OldestReady = int(ready), int(sched), int(leased), fromNull(oldest)
			rows, err := s.pool.Query(ctx, s.sq(runningByKeySQL), name, now, top)
			if err != nil {
				return err
			}
			defer rows.Close()
			st.RunningByKey, st.Running = nil, 0
			for rows.Next() {
				var k string
				var n, total int64
				if err := rows.Scan(&k, &n, &total); err != nil {
					return err
				}
				st.RunningByKey = append(st.RunningByKey, store.KeyCount{Key: k, Count: int(n)})
				st.Running = int(total)
			}
			return rows.Err()
		})
		if err != nil {
			return nil, s.fail("queue stats", err)
		}
		out = append(out, st)
	}
	return out, nil
}
