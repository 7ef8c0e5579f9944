package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hephaestus-go/hephaestus/hephtype"
)

// Errors of principals, API tokens, sessions and bulk operations.
var (
	// ErrPrincipalNotFound: no principal has the given name.
	ErrPrincipalNotFound = errors.New("principal not found")
	// ErrPrincipalDisabled: the principal was disabled; it gets no new
	// tokens or sessions.
	ErrPrincipalDisabled = errors.New("principal disabled")
	// ErrSessionNotFound: no session has the given hash (it expired and
	// was pruned, was signed out, or never existed).
	ErrSessionNotFound = errors.New("session not found")
	// ErrSessionExists: a create names a session hash that is stored.
	ErrSessionExists = errors.New("a session with this hash exists")
	// ErrTokenNotFound: no token has the given id or hash.
	ErrTokenNotFound = errors.New("token not found")
	// ErrTokenExists: a create names a token id or hash that is stored, or
	// a name that an active (not revoked) token has.
	ErrTokenExists = errors.New("a token with this id, hash or active name exists")
	// ErrOperationNotFound: no bulk operation has the given id.
	ErrOperationNotFound = errors.New("operation not found")
	// ErrOperationExists: a create names an operation id that is stored.
	ErrOperationExists = errors.New("an operation with this id exists")
)

// Admin is the administration seam: what an API server shares with the
// other servers on the same database, apart from the engine's Store:
// principals (the users and services that call the API), their API
// tokens (hashed) and dashboard sessions (hashed), the audit log of
// mutating calls, and bulk operations (cancel or retry every run that
// matches a filter), whose progress any server can pick up when the one
// that ran it dies. Both backends' *Store implement it besides Store;
// the conformance suite is storetest.RunAdmin.
//
// The tables (PostgreSQL migrations 0009_access and 0013_principals,
// SQLite 0007_access and 0011_principals):
//
//   - principals: one row per principal, by its unique name.
//   - api_tokens: one row per token, by id, naming its principal; the hex
//     SHA-256 of its secret is unique, and so is the name among active
//     tokens. Revoked tokens stay (with their revocation time) until
//     deleted by hand.
//   - sessions: one row per dashboard session, by the hex SHA-256 of its
//     secret, until it expires (pruned) or is deleted.
//   - audit_log: append-only, by an increasing id.
//   - operations: one row per bulk operation, by id, with its lease.
//
// PruneRuns (retention) touches none of them.
type Admin interface {
	// Principals keeps principals and sessions (principal.go).
	Principals
	// Secrets keeps the named secrets, sealed by the caller (secrets.go).
	Secrets
	// Webhooks keeps webhook subscriptions and their deliveries
	// (webhook.go).
	Webhooks

	// CreateToken stores a new token, or returns ErrTokenExists when its
	// ID or Hash is stored, or an active token has its Name. The caller
	// sets every field but LastUsedAt and RevokedAt (which must be zero).
	CreateToken(ctx context.Context, t *Token) error
	// TokenByHash returns the token with a hash (revoked ones too: look
	// at RevokedAt), or ErrTokenNotFound.
	TokenByHash(ctx context.Context, hash string) (*Token, error)
	// ListTokens returns every token, revoked ones too, by CreatedAt then
	// ID.
	ListTokens(ctx context.Context) ([]*Token, error)
	// RevokeToken marks a token revoked at a time and deletes the
	// sessions signed in with it (Session.TokenID), or returns
	// ErrTokenNotFound. Revoking it again keeps the first time.
	RevokeToken(ctx context.Context, id string, at time.Time) error
	// TouchToken records that a token was used at a time. It writes only
	// when at is more than TouchInterval after the stored LastUsedAt (or
	// none is stored), so it is cheap to call on every request. A token
	// that does not exist is not an error.
	TouchToken(ctx context.Context, id string, at time.Time) error

	// AppendAudit appends entries to the audit log, in one transaction and
	// in their order, and sets their IDs, each greater than every ID
	// assigned before. An invalid entry fails the call and appends none.
	AppendAudit(ctx context.Context, es ...*AuditEntry) error
	// ListAudit returns audit entries newest (highest ID) first, filtered.
	ListAudit(ctx context.Context, p *ListAuditParams) ([]*AuditEntry, error)

	// CreateOperation stores a new bulk operation, pending, or returns
	// ErrOperationExists. The caller sets ID, Action, Filter, Reason,
	// CreatedBy and CreatedAt (and may set Total); the store sets Status
	// (pending), clears the lease (Owner, Token, LeaseUntil) and sets
	// UpdatedAt to CreatedAt, in op too.
	CreateOperation(ctx context.Context, op *Operation) error
	// GetOperation returns an operation, or ErrOperationNotFound.
	GetOperation(ctx context.Context, id string) (*Operation, error)
	// ListOperations returns operations newest first (CreatedAt, then ID,
	// both descending), one page at a time.
	ListOperations(ctx context.Context, p *ListOperationsParams) ([]*Operation, error)
	// ClaimOperation leases an operation to p.Owner: the oldest (by
	// CreatedAt, then ID) of those pending and those running whose lease
	// ended at or before p.Now. It sets Status running, Owner, Token (one
	// more than before: tokens never repeat for an operation), LeaseUntil
	// (p.Now + p.LeaseFor) and UpdatedAt. Concurrent claims never get the
	// same operation. It returns nil and no error when there is none.
	ClaimOperation(ctx context.Context, p *ClaimOperationParams) (*Operation, error)
	// SaveOperation records the progress of a leased operation, fenced by
	// its lease: ErrLeaseLost when p.Owner and p.Token are no longer the
	// operation's (it was claimed again since; an expired lease that
	// nobody claimed still holds), ErrOperationNotFound when it is gone.
	SaveOperation(ctx context.Context, p *SaveOperationParams) error
}

// Token is a stored API token. The secret itself is never stored: Hash is
// the hex SHA-256 of it (HashToken).
type Token struct {
	ID   string
	Name string
	// Principal is the name of the principal the token belongs to (who
	// calls with it). Required; CreateToken refuses a principal that does
	// not exist (ErrPrincipalNotFound) or is disabled
	// (ErrPrincipalDisabled).
	Principal string
	// Role is the token's role ("admin", "operator", "approver",
	// "worker", "read"; opaque to the store).
	Role string
	// Options limit or widen what the token may do (opaque to the store
	// but for their encoding).
	Options TokenOptions
	// Hash is the lower-case hex SHA-256 of the secret.
	Hash      string
	CreatedAt time.Time
	// RevokedAt is when the token was revoked; zero while it is active.
	RevokedAt time.Time
	// LastUsedAt is when the token was last used (within TouchInterval);
	// zero before its first use.
	LastUsedAt time.Time
}

// HashToken returns the hash under which a token's secret is stored: its
// SHA-256, in lower-case hex.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// TouchInterval is how much later than the stored Token.LastUsedAt a use
// must be for TouchToken to write it.
const TouchInterval = time.Minute

// TokenOptions are a token's options beyond its role.
type TokenOptions struct {
	// Queues and Handlers limit a worker token's claims to these queues
	// and these handlers; empty: any.
	Queues   []string `json:"queues,omitempty"`
	Handlers []string `json:"handlers,omitempty"`
	// ActAs lets the token start runs on behalf of another user (the
	// start's on_behalf_of).
	ActAs bool `json:"act_as,omitempty"`
	// Payloads is the token's permission to read payloads on a server
	// that encrypts them: "" (its role's: every role but read), "allow"
	// or "deny" (docs/security.md).
	Payloads string `json:"payloads,omitempty"`
}

// Active reports whether the token is not revoked.
func (t *Token) Active() bool { return t.RevokedAt.IsZero() }

// Check validates a token to create (errors wrap hephtype.ErrInvalidInput).
func (t *Token) Check() error {
	switch {
	case t.ID == "":
		return fmt.Errorf("%w: token id is empty", hephtype.ErrInvalidInput)
	case len(t.ID) > maxAccessIDLength:
		return fmt.Errorf("%w: token id is %d bytes long, more than %d", hephtype.ErrInvalidInput, len(t.ID), maxAccessIDLength)
	case t.Name == "":
		return fmt.Errorf("%w: token %q: name is empty", hephtype.ErrInvalidInput, t.ID)
	case t.Principal == "":
		return fmt.Errorf("%w: token %q: principal is empty", hephtype.ErrInvalidInput, t.ID)
	case t.Role == "":
		return fmt.Errorf("%w: token %q: role is empty", hephtype.ErrInvalidInput, t.ID)
	case t.Hash == "":
		return fmt.Errorf("%w: token %q: hash is empty", hephtype.ErrInvalidInput, t.ID)
	case t.CreatedAt.IsZero():
		return fmt.Errorf("%w: token %q: CreatedAt is zero", hephtype.ErrInvalidInput, t.ID)
	case !t.RevokedAt.IsZero() || !t.LastUsedAt.IsZero():
		return fmt.Errorf("%w: token %q: a new token has no RevokedAt or LastUsedAt", hephtype.ErrInvalidInput, t.ID)
	}
	return nil
}

// AuditEntry is an entry of the audit log: one mutating API call.
type AuditEntry struct {
	// ID is assigned by AppendAudit, increasing.
	ID int64
	At time.Time
	// Actor is the name of the caller's principal ("insecure" without
	// auth), Role its role.
	Actor, Role string
	// Method and Path are the HTTP request's.
	Method, Path string
	// Action names the call ("runs.start", "runs.cancel" …); Target what
	// it acted on (a run id, a schedule id …).
	Action, Target string
	// Status is the HTTP status of the answer.
	Status int
	Detail string
}

// CheckAudit validates the entries of one AppendAudit, naming the first
// invalid one by its place.
func CheckAudit(es []*AuditEntry) error {
	for i, e := range es {
		if err := e.Check(); err != nil {
			if len(es) > 1 {
				return fmt.Errorf("entry %d of %d: %w", i+1, len(es), err)
			}
			return err
		}
	}
	return nil
}

// Check validates an entry to append (errors wrap hephtype.ErrInvalidInput).
func (e *AuditEntry) Check() error {
	switch {
	case e.At.IsZero():
		return fmt.Errorf("%w: audit entry: At is zero", hephtype.ErrInvalidInput)
	case e.Action == "":
		return fmt.Errorf("%w: audit entry: Action is empty", hephtype.ErrInvalidInput)
	}
	return nil
}

// ListAuditParams select audit entries. Zero fields do not filter.
type ListAuditParams struct {
	// Before keeps entries with an ID below it (the ID of the last entry
	// of the previous page); 0 starts from the newest.
	Before int64
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// Actor and Action keep the entries with this actor, this action.
	Actor, Action string
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *ListAuditParams) Check() error {
	switch {
	case p.Before < 0:
		return fmt.Errorf("%w: Before must not be negative, got %d", hephtype.ErrInvalidInput, p.Before)
	case p.Limit < 0:
		return fmt.Errorf("%w: Limit must not be negative, got %d", hephtype.ErrInvalidInput, p.Limit)
	}
	return nil
}

// Bulk operation actions.
const (
	OperationCancel = "cancel"
	OperationRetry  = "retry"
	OperationDelete = "delete"
	// OperationPause and OperationUnpause pause and unpause runs (the
	// Reason "cancel_running" stops their running tasks too).
	OperationPause   = "pause"
	OperationUnpause = "unpause"
	// OperationReset resets flow runs to a step: the Reason names the
	// step (empty for jobs, runs of one step).
	OperationReset = "reset"
)

// Bulk operation statuses.
const (
	OperationPending   = "pending"
	OperationRunning   = "running"
	OperationCompleted = "completed"
	OperationFailed    = "failed"
	OperationCancelled = "cancelled"
)

// MaxOperationErrors is how many errors an operation keeps: the first.
const MaxOperationErrors = 20

// maxAccessIDLength bounds the id of a token or an operation.
const maxAccessIDLength = 200

// Operation is a bulk operation: an action on every run a filter selects,
// carried out by whichever server holds its lease, with its progress.
type Operation struct {
	ID string
	// Action is OperationCancel, OperationRetry, OperationDelete,
	// OperationPause or OperationUnpause (opaque to the store).
	Action string
	// Filter selects the runs (JSON, opaque to the store).
	Filter    json.RawMessage
	Reason    string
	CreatedBy string
	// Status is one of the Operation statuses.
	Status string
	// Total is the number of runs selected, Done those acted on, Failed
	// those the action failed on.
	Total, Done, Failed int
	// Errors are the first MaxOperationErrors errors.
	Errors []string
	// Cursor is the processor's progress (opaque to the store).
	Cursor string
	// Owner, Token and LeaseUntil are the lease, set by ClaimOperation.
	Owner      string
	Token      int64
	LeaseUntil time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Check validates an operation to create (errors wrap
// hephtype.ErrInvalidInput).
func (op *Operation) Check() error {
	switch {
	case op.ID == "":
		return fmt.Errorf("%w: operation id is empty", hephtype.ErrInvalidInput)
	case len(op.ID) > maxAccessIDLength:
		return fmt.Errorf("%w: operation id is %d bytes long, more than %d", hephtype.ErrInvalidInput, len(op.ID), maxAccessIDLength)
	case op.Action == "":
		return fmt.Errorf("%w: operation %q: action is empty", hephtype.ErrInvalidInput, op.ID)
	case len(op.Filter) > 0 && !json.Valid(op.Filter):
		return fmt.Errorf("%w: operation %q: filter is not JSON", hephtype.ErrInvalidInput, op.ID)
	case op.CreatedAt.IsZero():
		return fmt.Errorf("%w: operation %q: CreatedAt is zero", hephtype.ErrInvalidInput, op.ID)
	}
	return checkProgress(op.ID, op.Total, op.Done, op.Failed)
}

func checkProgress(id string, total, done, failed int) error {
	if total < 0 || done < 0 || failed < 0 {
		return fmt.Errorf("%w: operation %q: negative progress (total %d, done %d, failed %d)", hephtype.ErrInvalidInput, id, total, done, failed)
	}
	return nil
}

// KeptErrors returns the first MaxOperationErrors of errs.
func KeptErrors(errs []string) []string {
	return errs[:min(len(errs), MaxOperationErrors)]
}

// ListOperationsParams select a page of operations.
type ListOperationsParams struct {
	// Limit defaults to 100 and is capped at 1000.
	Limit int
	// BeforeCreatedAt and BeforeID continue after an operation of the
	// previous page (its CreatedAt and ID; the last one for the next
	// page). Zero: from the newest.
	BeforeCreatedAt time.Time
	BeforeID        string
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *ListOperationsParams) Check() error {
	switch {
	case p.Limit < 0:
		return fmt.Errorf("%w: Limit must not be negative, got %d", hephtype.ErrInvalidInput, p.Limit)
	case p.BeforeCreatedAt.IsZero() && p.BeforeID != "":
		return fmt.Errorf("%w: BeforeID %q without BeforeCreatedAt", hephtype.ErrInvalidInput, p.BeforeID)
	}
	return nil
}

// ClaimOperationParams are the parameters of ClaimOperation.
type ClaimOperationParams struct {
	// Owner names the claimer. Required.
	Owner string
	// LeaseFor is how long the lease lasts. Required (more than 0).
	LeaseFor time.Duration
	// Now is the current time. Required.
	Now time.Time
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *ClaimOperationParams) Check() error {
	switch {
	case p.Owner == "":
		return fmt.Errorf("%w: Owner is empty", hephtype.ErrInvalidInput)
	case p.LeaseFor <= 0:
		return fmt.Errorf("%w: LeaseFor must be positive, got %v", hephtype.ErrInvalidInput, p.LeaseFor)
	case p.Now.IsZero():
		return fmt.Errorf("%w: Now is zero", hephtype.ErrInvalidInput)
	}
	return nil
}

// SaveOperationParams are the parameters of SaveOperation: the lease that
// fences it and the operation's new state, which replaces the stored one.
type SaveOperationParams struct {
	ID string
	// Owner and Token are the lease, as ClaimOperation returned it.
	Owner string
	Token int64
	// LeaseUntil extends the lease; zero keeps the stored end.
	LeaseUntil time.Time
	// Status is one of the Operation statuses.
	Status              string
	Total, Done, Failed int
	// Errors are stored up to MaxOperationErrors (the first).
	Errors []string
	Cursor string
	// Now is the current time (UpdatedAt). Required.
	Now time.Time
}

// Check validates p (errors wrap hephtype.ErrInvalidInput).
func (p *SaveOperationParams) Check() error {
	switch {
	case p.ID == "":
		return fmt.Errorf("%w: operation id is empty", hephtype.ErrInvalidInput)
	case p.Owner == "":
		return fmt.Errorf("%w: operation %q: Owner is empty", hephtype.ErrInvalidInput, p.ID)
	case p.Now.IsZero():
		return fmt.Errorf("%w: operation %q: Now is zero", hephtype.ErrInvalidInput, p.ID)
	}
	switch p.Status {
	case OperationPending, OperationRunning, OperationCompleted, OperationFailed, OperationCancelled:
	default:
		return fmt.Errorf("%w: operation %q: status %q is not pending, running, completed, failed or cancelled", hephtype.ErrInvalidInput, p.ID, p.Status)
	}
	return checkProgress(p.ID, p.Total, p.Done, p.Failed)
}

// AccessLimit is the effective limit of a list of tokens, entries or
// operations: n, or 100 when n is 0, capped at 1000.
func AccessLimit(n int) int {
	if n <= 0 {
		return 100
	}
	return min(n, defaultMaxLimit)
}
