package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.RemoteClaims = (*Store)(nil)

const remoteClaimCols = "task_id, token, run_id, secret_hash, principal, worker_id, claimed_at, deadline, lease_us"

// remoteClaimQueries are the statements of store.RemoteClaims (migration
// 0014_remote_claims), in the store's schema.
type remoteClaimQueries struct {
	put, get, del string
}

func newRemoteClaimQueries(schema string) *remoteClaimQueries {
	s := func(q string) string { return strings.ReplaceAll(q, "§", `"`+schema+`".`) }
	return &remoteClaimQueries{
		// Deletes up to $10 records whose task is gone, and writes the
		// record while the task holds the claim ($1, $2). The task of each
		// record is looked up by key (a scalar subquery, which PostgreSQL
		// runs per record): as NOT EXISTS it could be planned as a hash
		// anti-join over a scan of the whole task table, which it was,
		// with a backlog of 100,000 tasks, whenever the records' table,
		// bloated by dead rows between vacuums, looked big to the planner.
		put: s("WITH pruned AS (DELETE FROM §remote_claims WHERE task_id IN (SELECT c.task_id FROM §remote_claims c " +
			"WHERE (SELECT t.id FROM §tasks t WHERE t.id = c.task_id) IS NULL LIMIT $10)) " +
			"INSERT INTO §remote_claims (" + remoteClaimCols + ") " +
			"SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE EXISTS (SELECT 1 FROM §tasks WHERE id = $1 AND token = $2 AND owner IS NOT NULL) " +
			"ON CONFLICT (task_id) DO UPDATE SET token = excluded.token, run_id = excluded.run_id, secret_hash = excluded.secret_hash, " +
			"principal = excluded.principal, worker_id = excluded.worker_id, claimed_at = excluded.claimed_at, " +
			"deadline = excluded.deadline, lease_us = excluded.lease_us"),
		get: s("SELECT " + remoteClaimCols + " FROM §remote_claims WHERE task_id = $1"),
		del: s("DELETE FROM §remote_claims WHERE task_id = $1 AND token = $2"),
	}
}

// PutRemoteClaim records a claim handed to a remote worker.
func (s *Store) PutRemoteClaim(ctx context.Context, c *store.RemoteClaim) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("put remote claim: %w", err)
	}
	if err := c.Check(); err != nil {
		return fmt.Errorf("put remote claim: %w", err)
	}
	var n int64
	// Writing the same record twice does no harm.
	err := s.idempotent(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, s.rc.put, c.TaskID, c.Token, c.RunID, c.SecretHash, c.Principal, c.WorkerID,
			truncate(c.ClaimedAt), truncate(c.Deadline), c.Lease.Microseconds(), store.PruneRemoteClaimsBatch)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return s.fail("put remote claim", err)
	}
	if n == 0 {
		return fmt.Errorf("put remote claim of task %d: %w", c.TaskID, store.ErrLeaseLost)
	}
	return nil
}

// GetRemoteClaim returns the record of a task.
func (s *Store) GetRemoteClaim(ctx context.Context, taskID int64) (*store.RemoteClaim, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("get remote claim: %w", err)
	}
	var c store.RemoteClaim
	var lease int64
	err := s.idempotent(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, s.rc.get, taskID).
			Scan(&c.TaskID, &c.Token, &c.RunID, &c.SecretHash, &c.Principal, &c.WorkerID, &c.ClaimedAt, &c.Deadline, &lease)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get remote claim of task %d: %w", taskID, store.ErrRemoteClaimNotFound)
	}
	if err != nil {
		return nil, s.fail("get remote claim", err)
	}
	c.ClaimedAt, c.Deadline, c.Lease = c.ClaimedAt.UTC(), c.Deadline.UTC(), time.Duration(lease)*time.Microsecond
	return &c, nil
}

// DeleteRemoteClaim deletes the record of a claim, if it is still there.
func (s *Store) DeleteRemoteClaim(ctx context.Context, p *store.DeleteRemoteClaimParams) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("delete remote claim: %w", err)
	}
	if err := p.Check(); err != nil {
		return err
	}
	err := s.idempotent(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, s.rc.del, p.TaskID, p.Token)
		return err
	})
	if err != nil {
		return s.fail("delete remote claim", err)
	}
	return nil
}
