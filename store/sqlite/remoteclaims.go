package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/store"
)

var _ store.RemoteClaims = (*Store)(nil)

// The statements of store.RemoteClaims (migration 0012_remote_claims).
const (
	remoteClaimCols = "task_id, token, run_id, secret_hash, principal, worker_id, claimed_at, deadline, lease_us"

	// Deletes up to ?1 records whose task is gone.
	qRemoteClaimPrune = "DELETE FROM remote_claims WHERE task_id IN (SELECT c.task_id FROM remote_claims c " +
		"WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.id = c.task_id) LIMIT ?1)"
	// Writes the record while the task holds the claim (?1, ?2).
	qRemoteClaimPut = "INSERT INTO remote_claims (" + remoteClaimCols + ") " +
		"SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9 WHERE EXISTS (SELECT 1 FROM tasks WHERE id = ?1 AND token = ?2 AND owner IS NOT NULL) " +
		"ON CONFLICT (task_id) DO UPDATE SET token = excluded.token, run_id = excluded.run_id, secret_hash = excluded.secret_hash, " +
		"principal = excluded.principal, worker_id = excluded.worker_id, claimed_at = excluded.claimed_at, " +
		"deadline = excluded.deadline, lease_us = excluded.lease_us"
	qRemoteClaimDelete = "DELETE FROM remote_claims WHERE task_id = ?1 AND token = ?2"
)

// PutRemoteClaim records a claim handed to a remote worker.
func (s *Store) PutRemoteClaim(ctx context.Context, c *store.RemoteClaim) error {
	if err := s.check(); err != nil {
		return fmt.Errorf("put remote claim: %w", err)
	}
	if err := c.Check(); err != nil {
		return fmt.Errorf("put remote claim: %w", err)
	}
	var n int64
	err := s.withWriter(ctx, func(w *wconn) error {
		return w.tx(func() error {
			w.arg(int64(store.PruneRemoteClaimsBatch))
			if err := w.adhocExec(qRemoteClaimPrune); err != nil {
				return err
			}
			w.arg(c.TaskID)
			w.arg(c.Token)
			w.arg(c.RunID)
			w.arg(c.SecretHash)
			w.arg(c.Principal)
			w.arg(c.WorkerID)
			w.arg(micros(c.ClaimedAt))
			w.arg(micros(c.Deadline))
			w.arg(c.Lease.Microseconds())
			var err error
			n, err = w.adhocExecN(qRemoteClaimPut)
			return err
		})
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
	var claimed, deadline, lease int64
	err := s.reader.QueryRowContext(ctx, "SELECT "+remoteClaimCols+" FROM remote_claims WHERE task_id = ?", taskID).
		Scan(&c.TaskID, &c.Token, &c.RunID, &c.SecretHash, &c.Principal, &c.WorkerID, &claimed, &deadline, &lease)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get remote claim of task %d: %w", taskID, store.ErrRemoteClaimNotFound)
	}
	if err != nil {
		return nil, s.fail("get remote claim", err)
	}
	c.ClaimedAt, c.Deadline, c.Lease = fromMicros(claimed), fromMicros(deadline), time.Duration(lease)*time.Microsecond
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
	err := s.withWriter(ctx, func(w *wconn) error {
		w.arg(p.TaskID)
		w.arg(p.Token)
		return w.adhocExec(qRemoteClaimDelete)
	})
	if err != nil {
		return s.fail("delete remote claim", err)
	}
	return nil
}
