package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

// ClaimTasks leases up to p.Limit ready tasks in one statement. Tasks that
// another transaction holds locked are skipped, not waited for, so
// claimers of many processes never queue behind each other.
func (s *Store) ClaimTasks(ctx context.Context, p *store.ClaimParams) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	if err := checkClaim(p); err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	if len(p.Queues) == 0 {
		return nil, nil
	}
	var out []*store.Task
	var controlled []string
	// A claim that reached the server may have committed: run it again
	// only when nothing was sent.
	err := s.once(ctx, func(ctx context.Context) error {
		sql, args := claimArgs(&s.q, p)
		// One round trip. Should a statement fail, the pool drops the
		// connection, left in a failed transaction. The claim skips
		// controlled queues; the statement before it names them.
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(applySettings)
		b.Queue(claimSettings)
		b.Queue(s.sq(controlledSQL), p.Queues)
		if s.typedArrays {
			args = arrayArgs(args)
		}
		b.Queue(sql, args...)
		b.Queue("COMMIT")
		br := s.pool.SendBatch(ctx, b)
		defer br.Close()
		for range 3 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if controlled, err = controlledQueues(rows); err != nil {
			return err
		}
		if rows, err = br.Query(); err != nil {
			return err
		}
		if out, err = collectTasks(rows); err != nil {
			return err
		}
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = fmt.Errorf("the transaction was rolled back (%s)", tag)
		}
		return err
	})
	if err != nil {
		return nil, s.fail("claim tasks", err)
	}
	s.known.putLeases(out)
	for _, q := range controlled {
		if len(out) >= p.Limit {
			break
		}
		ts, err := s.claimControlled(ctx, p, q, p.Limit-len(out))
		if err != nil {
			if len(out) > 0 {
				break // what is leased goes to the caller; the rest waits for the next claim
			}
			return nil, s.fail("claim tasks", err)
		}
		out = append(out, ts...)
	}
	return out, nil
}

// applySettings starts the transactions of Apply and ClaimTasks (as SET
// LOCAL would). Their statements read and write rows by key, and their
// plans must say so whatever the statistics: a queue table's are often
// stale or, on a new table, missing, and a plan cached while a table was
// small stays when it grows. The planner could then scan a whole table to
// lock a few runs. (JIT, never worth it for these statements, would take
// the disabled plans' costs for a reason to compile them.)
//
// And their plans are generic: made once per connection and statement, not
// for each execution's arrays. The custom plans PostgreSQL otherwise makes
// for statements with parameters cost more to plan than to run for these
// (measured: about 450 µs of the 950 µs of a one-step completion; see
// docs/benchmarks.md), and they gain nothing, every access being by key.
const applySettings = "SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), " +
	"set_config('plan_cache_mode', 'force_generic_plan', true)"

// claimSettings precede claims in their transaction. A claim must walk the
// claim index in order and stop at its limit; the plan that reads every
// ready task of the queue and sorts them costs as much as the queue is
// long, yet the planner picks it whenever it believes the queue short.
const claimSettings = "SELECT set_config('enable_sort', 'off', true)"

func checkClaim(p *store.ClaimParams) error {
	switch {
	case p.Owner == "":
		return errors.New("Owner is empty")
	case p.Limit <= 0:
		return fmt.Errorf("Limit must be positive, got %d", p.Limit)
	case p.LeaseFor <= 0:
		return fmt.Errorf("LeaseFor must be positive, got %v", p.LeaseFor)
	case p.Now.IsZero():
		return errors.New("Now is zero")
	}
	return nil
}

// claimArgs is the claim statement for p and its arguments. One queue
// gets a plan that walks the claim index in order and stops at the limit;
// a claim that lists handlers reads per queue and handler
// (claimHandlersSQL).
func claimArgs(q *queries, p *store.ClaimParams) (string, []any) {
	now := truncate(p.Now)
	until := truncate(p.Now.Add(p.LeaseFor))
	if p.Handlers != nil {
		return q.claimHandlers, []any{p.Queues, p.Owner, until, now, p.Limit, p.HandlerSet()}
	}
	if len(p.Queues) == 1 {
		return q.claimOne, []any{p.Queues[0], p.Owner, until, now, p.Limit, p.HandlerSet()}
	}
	return q.claimMany, []any{p.Queues, p.Owner, until, now, p.Limit, p.HandlerSet()}
}

// collectTasks reads tasks in claim order (RETURNING has none).
func collectTasks(rows pgx.Rows) ([]*store.Task, error) {
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, store.ClaimOrder)
	return out, nil
}

// Heartbeat extends the leases still held to p.Until, and records the
// details p names on their tasks.
func (s *Store) Heartbeat(ctx context.Context, p *store.HeartbeatParams) ([]int64, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	if len(p.Leases) == 0 {
		return nil, nil
	}
	if p.Until.IsZero() {
		return nil, errors.New("heartbeat: Until is zero")
	}
	ids, details := []int64{}, []*string{}
	for id, d := range p.Details {
		ids, details = append(ids, id), append(details, jsonArg(d))
	}
	lost, err := s.leases(ctx, s.q.heartbeat, p.Leases, truncate(p.Until), ids, details)
	if err != nil {
		return nil, s.fail("heartbeat", err)
	}
	return lost, nil
}

// ReleaseTasks makes leased tasks claimable again at once.
func (s *Store) ReleaseTasks(ctx context.Context, leases []store.Lease) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("release tasks: %w", err)
	}
	if len(leases) == 0 {
		return nil
	}
	if _, err := s.leases(ctx, s.q.release, leases); err != nil {
		return s.fail("release tasks", err)
	}
	return nil
}

// leases runs a leaseSQL statement over leases (and extra arguments from
// $3 on) and returns the ids of
// the leases it found no longer held. Running it twice does no harm.
func (s *Store) leases(ctx context.Context, sql string, leases []store.Lease, extra ...any) ([]int64, error) {
	ids, tokens := make([]int64, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		ids[i], tokens[i] = l.TaskID, l.Token
	}
	var held []int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sql, append([]any{ids, tokens}, extra...)...)
		if err != nil {
			return err
		}
		held, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, err
	}
	var lost []int64
	for _, l := range leases {
		if !slices.Contains(held, l.TaskID) && !slices.Contains(lost, l.TaskID) {
			lost = append(lost, l.TaskID)
		}
	}
	return lost, nil
}

// GetTask returns a task by id.
func (s *Store) GetTask(ctx context.Context, id int64) (*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	var t *store.Task
	err := s.idempotent(ctx, func(ctx context.Context) (err error) {
		t, err = scanTask(s.pool.QueryRow(ctx, s.q.getTask, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get task %d: %w", id, store.ErrTaskNotFound)
	}
	if err != nil {
		return nil, s.fail("get task", err)
	}
	return t, nil
}

// NextReady returns when a task of the queues that p.Handlers can run is
// next claimable.
func (s *Store) NextReady(ctx context.Context, p *store.NextReadyParams) (time.Time, bool, error) {
	if err := s.check(); err != nil {
		return time.Time{}, false, fmt.Errorf("next ready: %w", err)
	}
	if len(p.Queues) == 0 {
		return time.Time{}, false, nil
	}
	var next *time.Time
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.q.nextReady, p.Queues, p.Handlers).Scan(&next)
	})
	if err != nil {
		return time.Time{}, false, s.fail("next ready", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return next.UTC(), true, nil
}

// StrandedTasks returns claimable tasks of a queue that no handler of
// p.Served can run, oldest ready first.
func (s *Store) StrandedTasks(ctx context.Context, p *store.StrandedParams) ([]*store.Task, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("stranded tasks: %w", err)
	}
	limit, err := p.Check()
	if err != nil {
		return nil, fmt.Errorf("stranded tasks: %w", err)
	}
	var out []*store.Task
	err = s.idempotent(ctx, func(ctx context.Context) error {
		q := s.q.stranded
		if p.PerRun {
			q = s.q.strandedPerRun
		}
		rows, err := s.pool.Query(ctx, q, p.Queue, truncate(p.ReadyBefore), truncate(p.Now), nonNil(p.Served), limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Task, error) { return scanTask(row) })
		return err
	})
	if err != nil {
		return nil, s.fail("stranded tasks", err)
	}
	return out, nil
}
