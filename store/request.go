package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Requests are messages to a run that need an answer from a process that
// has the run's code (an update a validator must accept, a query a
// handler answers), sent by a process that may have none of it. A request
// is recorded with the task that carries it to such a process, in one
// transaction (CreateRequest), under an id unique within its run: sending
// it again records nothing and returns the first. The process that runs
// the task answers it with the task's lease (AnswerRequest): the answer
// and the deletion of the task are one transaction, so a request is
// answered at most once; or it completes the task by an Apply fenced by
// the same lease, when the answer is written to the run's history (an
// accepted update). The sender reads the request back by id (GetRequest).
// Requests go with their run (PruneRuns, DeleteRun).

// ErrRequestNotFound: no request of the run has that id.
var ErrRequestNotFound = errors.New("request not found")

// ErrDuplicateRequest: a request with the same id was recorded for the
// run before; CreateRequest returns that request with it.
var ErrDuplicateRequest = errors.New("request recorded already")

// RequestKind says what a request asks.
type RequestKind string

// The kinds of requests.
const (
	RequestUpdate RequestKind = "update"
	RequestQuery  RequestKind = "query"
)

// RequestStatus is where a request stands.
type RequestStatus string

// The statuses of a request.
const (
	// RequestPending: recorded, not answered yet.
	RequestPending RequestStatus = "pending"
	// RequestAccepted: an update the workflow had accepted before (under
	// an earlier request of the same id); its outcome is in the run's
	// history. (An update accepted under this request leaves it pending:
	// the history says.)
	RequestAccepted RequestStatus = "accepted"
	// RequestRejected: refused (Code and Error say why); nothing was
	// written to the run's history.
	RequestRejected RequestStatus = "rejected"
	// RequestCompleted: answered, with Result or Error.
	RequestCompleted RequestStatus = "completed"
)

// Valid reports whether s is one of the statuses.
func (s RequestStatus) Valid() bool {
	switch s {
	case RequestPending, RequestAccepted, RequestRejected, RequestCompleted:
		return true
	}
	return false
}

// Request is a stored request.
type Request struct {
	RunID string
	ID    string
	Kind  RequestKind
	Name  string
	Args  json.RawMessage
	// Seq is the run's last sequence number when the request was
	// recorded: its answer, when it goes to the history, comes after it.
	Seq    int64
	Status RequestStatus
	Result json.RawMessage
	// Code classifies a rejection or failure for programs (the runtime's
	// words); Error is the message for people.
	Code       string
	Error      string
	CreatedAt  time.Time
	AnsweredAt time.Time
}

// NewRequest is a request to record.
type NewRequest struct {
	RunID string
	// ID identifies the request within its run: letters, digits and
	// "._:-", at most MaxKeyLen bytes.
	ID   string
	Kind RequestKind
	Name string
	Args json.RawMessage
}

// CreateRequestParams records a request with its task.
type CreateRequestParams struct {
	Request NewRequest
	// Task carries the request to a worker; it is enqueued for the run
	// (its Workflow and Version are the run's).
	Task NewTask
	Now  time.Time
}

// AnswerRequestParams answer a request and complete the task that
// carried it.
type AnswerRequestParams struct {
	RunID string
	ID    string
	// Fence is the lease of the task that carried the request: the answer
	// is refused with ErrLeaseLost unless it is held, and the task is
	// deleted with it.
	Fence  Lease
	Status RequestStatus
	Result json.RawMessage
	Code   string
	Error  string
	// Request, when set, is recorded (with Seq 0) if the run has no
	// request of that id: a request that travelled in its task alone,
	// created with its run (update-with-start).
	Request *NewRequest
	Now     time.Time
}

// Requester is the part of a Store that records requests.
type Requester interface {
	// CreateRequest records a request to an existing run (ErrRunNotFound
	// otherwise) with the task that carries it, in one transaction, and
	// returns it as stored. When the run has a request with that id, it
	// writes nothing and returns that request with ErrDuplicateRequest,
	// unless that request was rejected: a rejection wrote nothing to the
	// run, so its id may be sent again, and the request is recorded anew
	// (pending, with a new task) in its place.
	CreateRequest(ctx context.Context, p *CreateRequestParams) (*Request, error)
	// AnswerRequest sets a request's status and answer and deletes the
	// task of its fence, in one transaction: ErrLeaseLost when the lease
	// is not held, ErrRequestNotFound when the run has no such request
	// and p.Request is nil (nothing is written either way).
	AnswerRequest(ctx context.Context, p *AnswerRequestParams) error
	// GetRequest returns a request of a run by id, or ErrRequestNotFound.
	GetRequest(ctx context.Context, runID, id string) (*Request, error)
	// DeleteRequest deletes a request of a run whose answer is no longer
	// needed (a query's, once read); deleting one that is not there is
	// not an error. A task that still carries it finds it gone.
	DeleteRequest(ctx context.Context, runID, id string) error
}

// Check reports what makes p unfit to record.
func (p *CreateRequestParams) Check() error {
	r := &p.Request
	switch {
	case p.Now.IsZero():
		return errors.New("Now is zero")
	case r.RunID == "":
		return errors.New("the request's RunID is empty")
	case r.Kind != RequestUpdate && r.Kind != RequestQuery:
		return fmt.Errorf("request %q: unknown kind %q", r.ID, r.Kind)
	case r.Name == "":
		return fmt.Errorf("request %q: Name is empty", r.ID)
	}
	if err := CheckRequestID(r.ID); err != nil {
		return err
	}
	if err := CheckTasks([]NewTask{p.Task}); err != nil {
		return fmt.Errorf("request %q: %w", r.ID, err)
	}
	return nil
}

// CheckRequestID reports an id a request cannot have.
func CheckRequestID(id string) error {
	if id == "" {
		return errors.New("the request's ID is empty")
	}
	if len(id) > MaxKeyLen {
		return fmt.Errorf("request id is %d bytes long; the limit is %d", len(id), MaxKeyLen)
	}
	for i, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return fmt.Errorf("request id %q: byte %d (%q) is not a letter, digit, '.', '_', ':' or '-'", id, i, c)
		}
	}
	return nil
}

// Check reports what makes p unfit to write.
func (p *AnswerRequestParams) Check() error {
	switch {
	case p.Now.IsZero():
		return errors.New("Now is zero")
	case p.Status == RequestPending || !p.Status.Valid():
		return fmt.Errorf("request %q: status %q is not an answer", p.ID, p.Status)
	case p.Request != nil && (p.Request.RunID != p.RunID || p.Request.ID != p.ID):
		return fmt.Errorf("request %q of run %s: Request names request %q of run %s", p.ID, p.RunID, p.Request.ID, p.Request.RunID)
	}
	return nil
}
