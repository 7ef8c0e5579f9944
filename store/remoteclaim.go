package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// ErrRemoteClaimNotFound: no remote claim is recorded for the task (it
// was never handed to a remote worker, its outcome committed, or a later
// hand-out replaced it and was itself removed).
var ErrRemoteClaimNotFound = errors.New("remote claim not found")

// Limits of a remote claim record.
const (
	// MaxPrincipal bounds RemoteClaim.Principal.
	MaxPrincipal = 1024
	// RemoteSecretHashSize is the size of RemoteClaim.SecretHash (SHA-256).
	RemoteSecretHashSize = 32
)

// RemoteClaims keeps the facts of the claims handed to workers outside
// the process (migration remote_claims): one record per task, written
// when the task is handed out, so that the worker's token need carry no
// more than the task's id and a secret. The server, not the token, says
// which claim (fence), identity, deadline and lease a report is held to.
type RemoteClaims interface {
	// PutRemoteClaim records c for its task, replacing the task's earlier
	// record, while the task still holds the claim c.Token names: when the
	// task is gone or was claimed again it writes nothing and fails with
	// ErrLeaseLost. On the way it deletes up to PruneRemoteClaimsBatch
	// records whose task is gone (the outcome committed and its record was
	// not deleted, the run was cancelled or pruned): records live no
	// longer than their tasks, give or take a hand-out.
	PutRemoteClaim(ctx context.Context, c *RemoteClaim) error
	// GetRemoteClaim returns the record of a task, or
	// ErrRemoteClaimNotFound.
	GetRemoteClaim(ctx context.Context, taskID int64) (*RemoteClaim, error)
	// DeleteRemoteClaim deletes the record of p.TaskID if it is still the
	// one of claim p.Token (a later hand-out's record stays). Deleting a
	// record that is not there is not an error.
	DeleteRemoteClaim(ctx context.Context, p *DeleteRemoteClaimParams) error
}

// PruneRemoteClaimsBatch bounds the stale records PutRemoteClaim deletes.
const PruneRemoteClaimsBatch = 100

// RemoteClaim is the record of a claim handed to a remote worker.
type RemoteClaim struct {
	TaskID int64
	// Token is the claim's fence (Lease.Token).
	Token int64
	RunID string
	// SecretHash is the SHA-256 of the secret the worker's token carries;
	// the secret itself is never stored.
	SecretHash []byte
	// Principal is the identity that claimed ("" for a caller in the
	// process); only it may report on the task.
	Principal string
	WorkerID  string
	// ClaimedAt is when the attempt started; Deadline when it must be
	// done; Lease how far each heartbeat extends the lease.
	ClaimedAt time.Time
	Deadline  time.Time
	Lease     time.Duration
}

// Check validates a record.
func (c *RemoteClaim) Check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.TaskID <= 0 {
		bad("TaskID is %d; it must be positive", c.TaskID)
	}
	if c.RunID == "" {
		bad("RunID is empty")
	}
	if len(c.SecretHash) != RemoteSecretHashSize {
		bad("SecretHash is %d bytes; it must be %d", len(c.SecretHash), RemoteSecretHashSize)
	}
	if len(c.Principal) > MaxPrincipal || !utf8.ValidString(c.Principal) {
		bad("Principal must be valid UTF-8 of at most %d bytes", MaxPrincipal)
	}
	if c.WorkerID == "" {
		bad("WorkerID is empty")
	}
	if c.ClaimedAt.IsZero() || c.Deadline.Before(c.ClaimedAt) {
		bad("ClaimedAt must be set and Deadline not before it")
	}
	if c.Lease <= 0 {
		bad("Lease is %s; it must be positive", c.Lease)
	}
	if len(errs) > 0 {
		return fmt.Errorf("remote claim of task %d: %w", c.TaskID, errors.Join(errs...))
	}
	return nil
}

// DeleteRemoteClaimParams names the record to delete.
type DeleteRemoteClaimParams struct {
	TaskID int64
	// Token is the claim's fence: a record of another claim is kept.
	Token int64
}

// Check validates p.
func (p *DeleteRemoteClaimParams) Check() error {
	if p.TaskID <= 0 {
		return fmt.Errorf("delete remote claim: TaskID is %d; it must be positive", p.TaskID)
	}
	return nil
}
