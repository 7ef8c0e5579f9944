package sqlite

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.Queues = (*Store)(nil)

const (
	getQueueSQL = "SELECT " + queueCols + ", window_start, window_starts FROM queues WHERE name = ?1"
	putQueueSQL = `INSERT INTO queues (name, max_running, max_running_per_key, rate_limit, rate_period, key_rate_limit,
			key_rate_period, fair, weights, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
		ON CONFLICT (name) DO UPDATE SET max_running = ?2, max_running_per_key = ?3, rate_limit = ?4, rate_period = ?5,
			key_rate_limit = ?6, key_rate_period = ?7, fair = ?8, weights = ?9, updated_at = ?10`
	pauseQueueSQL = `INSERT INTO queues (name, paused, updated_at) VALUES (?1, ?2, ?3)
		ON CONFLICT (name) DO UPDATE SET paused = ?2, updated_at = ?3`
	statsSQL = `SELECT
		(SELECT count(*) FROM tasks WHERE queue = ?1 AND ready_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2)),
		(SELECT count(*) FROM tasks WHERE queue = ?1 AND ready_at > ?2 AND (lease_until IS NULL OR lease_until <= ?2)),
		(SELECT count(*) FROM tasks WHERE queue = ?1 AND owner IS NOT NULL AND lease_until > ?2),
		(SELECT min(ready_at) FROM tasks WHERE queue = ?1 AND ready_at <= ?2 AND (lease_until IS NULL OR lease_until <= ?2))`
	runningByKeySQL = `SELECT l.key, count(*) AS n FROM queue_leases l JOIN tasks t ON t.id = l.task_id AND t.token = l.token
		WHERE l.queue = ?1 AND t.owner IS NOT NULL AND t.lease_until > ?2 GROUP BY l.key ORDER BY n DESC, l.key`
	allQueuesSQL = "SELECT DISTINCT queue FROM tasks UNION SELECT name FROM queues ORDER BY 1"
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
	var weights any
	if len(q.Weights) > 0 {
		b, err := json.Marshal(q.Weights)
		if err != nil {
			return fmt.Errorf("put queue: %w", err)
		}
		weights = string(b)
	}
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(q.Name)
			w.arg(int64(q.MaxRunning))
			w.arg(int64(q.MaxRunningPerKey))
			w.arg(int64(q.Rate.Limit))
			w.arg(q.Rate.Period.Microseconds())
			w.arg(int64(q.KeyRate.Limit))
			w.arg(q.KeyRate.Period.Microseconds())
			w.arg(q.Fair)
			w.arg(weights)
			w.arg(micros(p.Now))
			w.queues.valid = false
			_, err := w.execText(putQueueSQL)
			return err
		})
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
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(p.Name)
			w.arg(p.Paused)
			w.arg(micros(p.Now))
			w.queues.valid = false
			_, err := w.execText(pauseQueueSQL)
			return err
		})
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
	var q *store.Queue
	err := s.withWriter(ctx, func(w *wconn) error {
		var err error
		q, _, err = getQueue(w, name)
		return err
	})
	if err != nil {
		return nil, s.fail("get queue", err)
	}
	if q == nil {
		return nil, fmt.Errorf("get queue %s: %w", name, store.ErrQueueNotFound)
	}
	return q, nil
}

// getQueue reads a queue's configuration and rate window; nil when it
// has none.
func getQueue(w *wconn, name string) (*store.Queue, *queueWindow, error) {
	var q *store.Queue
	var win queueWindow
	w.arg(name)
	err := each(w, getQueueSQL, 13, func(v []driver.Value) error {
		q = &store.Queue{}
		if v[11] != nil {
			win.start = fromMicros(vInt(v[11]))
		}
		win.starts = int(vInt(v[12]))
		return queueFromValues(q, v)
	})
	return q, &win, err
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
	now := micros(p.Now)
	var out []*store.QueueStats
	err = s.withWriter(ctx, func(w *wconn) error {
		out = nil
		return w.tx(func() error {
			names := p.Names
			if len(names) == 0 {
				if err := each(w, allQueuesSQL, 1, func(v []driver.Value) error {
					names = append(names, vString(v[0]))
					return nil
				}); err != nil {
					return err
				}
			}
			for _, name := range names {
				st := &store.QueueStats{Queue: store.Queue{Name: name}}
				q, win, err := getQueue(w, name)
				if err != nil {
					return err
				}
				if q != nil {
					st.Queue, st.Configured = *q, true
					if q.Rate.Limit > 0 {
						st.Window = q.Rate.Window(p.Now)
						if win.start.Equal(st.Window) {
							st.WindowStarts = win.starts
						}
					}
				}
				w.arg(name)
				w.arg(now)
				if err := each(w, statsSQL, 4, func(v []driver.Value) error {
					st.Ready, st.Scheduled, st.Leased = int(vInt(v[0])), int(vInt(v[1])), int(vInt(v[2]))
					if v[3] != nil {
						st.OldestReady = fromMicros(vInt(v[3]))
					}
					return nil
				}); err != nil {
					return err
				}
				w.arg(name)
				w.arg(now)
				if err := each(w, runningByKeySQL, 2, func(v []driver.Value) error {
					n := int(vInt(v[1]))
					st.Running += n
					if len(st.RunningByKey) < top {
						st.RunningByKey = append(st.RunningByKey, store.KeyCount{Key: vString(v[0]), Count: n})
					}
					return nil
				}); err != nil {
					return err
				}
				out = append(out, st)
			}
			return nil
		})
	})
	if err != nil {
		return nil, s.fail("queue stats", err)
	}
	return out, nil
}
