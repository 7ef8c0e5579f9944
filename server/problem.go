package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"

	hephaestus "github.com/hephaestus-go/hephaestus"
	"github.com/hephaestus-go/hephaestus/flowdoc"
	"github.com/hephaestus-go/hephaestus/store"
)

// ProblemTypeBase prefixes the kind of a problem in its "type".
const ProblemTypeBase = "https://hephaestus.dev/problems/"

// The kinds of problems.
const (
	kindBadRequest    = "bad-request"        // 400
	kindUnauthorized  = "unauthorized"       // 401
	kindForbidden     = "forbidden"          // 403
	kindNotFound      = "not-found"          // 404
	kindMethod        = "method-not-allowed" // 405
	kindConflict      = "conflict"           // 409
	kindLeaseLost     = "lease-lost"         // 409
	kindNotServed     = "not-served"         // 409: a wait that nothing serves
	kindTooLarge      = "payload-too-large"  // 413
	kindUnprocessable = "unprocessable"      // 422
	kindInternal      = "internal"           // 500
	kindUnavailable   = "unavailable"        // 503
	kindTimeout       = "timeout"            // 504
)

// Problem is an RFC 9457 problem detail, the body of every error
// response (Content-Type application/problem+json).
type Problem struct {
	// Kind is the last segment of Type.
	Kind   string `json:"-"`
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Instance is the request's path.
	Instance string `json:"instance,omitempty"`
	// Fix says what to do about the problem, where the server knows.
	Fix string `json:"fix,omitempty"`
	// Errors are the positioned problems of an invalid document (422) or
	// the invalid fields of a request body (400).
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is one problem in a request body or a document.
type FieldError struct {
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

func (p *Problem) Error() string {
	if p.Detail == "" {
		return p.Title
	}
	return p.Title + ": " + p.Detail
}

// badRequest is a 400 problem.
func badRequest(detail string) *Problem {
	return &Problem{Status: http.StatusBadRequest, Kind: kindBadRequest, Detail: detail}
}

// kindStatus maps the error kinds of the root package (and the store's
// sentinels it passes on) to a status and a problem kind. The first
// match wins: order matters where an error wraps two kinds
// (ErrPayloadTooLarge comes with ErrInvalidInput).
var kindStatus = []struct {
	err    error
	status int
	kind   string
}{
	{hephaestus.ErrPayloadTooLarge, http.StatusRequestEntityTooLarge, kindTooLarge},
	{store.ErrLeaseLost, http.StatusConflict, kindLeaseLost},
	{hephaestus.ErrTaskLost, http.StatusConflict, kindLeaseLost},
	{hephaestus.ErrTokenRefused, http.StatusForbidden, kindForbidden},
	{hephaestus.ErrInvalidToken, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrRunNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrFlowNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrWorkflowNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrDocumentNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrScheduleNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrEventNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrTriggerNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrTriggerDeclared, http.StatusConflict, kindConflict},
	{hephaestus.ErrQueueNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrVersionRuleNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrVersionRetired, http.StatusConflict, kindConflict},
	{store.ErrRequestNotFound, http.StatusNotFound, kindNotFound},
	{store.ErrTokenNotFound, http.StatusNotFound, kindNotFound},
	{store.ErrOperationNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrSecretNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrWebhookNotFound, http.StatusNotFound, kindNotFound},
	{store.ErrPrincipalNotFound, http.StatusNotFound, kindNotFound},
	{hephaestus.ErrNotAssignee, http.StatusForbidden, kindForbidden},
	{hephaestus.ErrInvalidInput, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrUnknownEvent, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrUnknownStep, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrUnknownSignal, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrUnknownUpdate, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrUnknownQuery, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrUpdateInvalid, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrNotAGate, http.StatusBadRequest, kindBadRequest},
	{hephaestus.ErrNoDocumentRegistry, http.StatusConflict, kindConflict},
	{hephaestus.ErrSecretsUnavailable, http.StatusConflict, kindConflict},
	{hephaestus.ErrUnknownSecretKey, http.StatusConflict, kindConflict},
	{hephaestus.ErrSecretCorrupt, http.StatusConflict, kindConflict},
	{hephaestus.ErrDuplicateRun, http.StatusConflict, kindConflict},
	{hephaestus.ErrRunExists, http.StatusConflict, kindConflict},
	{hephaestus.ErrNotWaiting, http.StatusConflict, kindConflict},
	{hephaestus.ErrRunFinished, http.StatusConflict, kindConflict},
	{hephaestus.ErrScheduleExists, http.StatusConflict, kindConflict},
	{store.ErrTokenExists, http.StatusConflict, kindConflict},
	{store.ErrOperationExists, http.StatusConflict, kindConflict},
	{store.ErrPrincipalDisabled, http.StatusConflict, kindConflict},
	{store.ErrSessionExists, http.StatusConflict, kindConflict},
	{hephaestus.ErrGateStep, http.StatusConflict, kindConflict},
	{hephaestus.ErrUpdateNotAccepted, http.StatusConflict, kindConflict},
	{hephaestus.ErrNotRetryable, http.StatusConflict, kindConflict},
	{hephaestus.ErrNotResettable, http.StatusConflict, kindConflict},
	{hephaestus.ErrDecisionFailed, http.StatusConflict, kindConflict},
	{hephaestus.ErrFlowConflict, http.StatusConflict, kindConflict},
	{hephaestus.ErrBuildInUse, http.StatusConflict, kindConflict},
	{hephaestus.ErrNotStarted, http.StatusConflict, kindNotServed},

	{hephaestus.ErrClosed, http.StatusServiceUnavailable, kindUnavailable},
	{store.ErrClosed, http.StatusServiceUnavailable, kindUnavailable},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, kindTimeout},
	{context.Canceled, http.StatusGatewayTimeout, kindTimeout},
}

// problemOf is the one function that turns an error into the problem the
// API answers with: a *Problem as it is; an invalid document (flowdoc
// errors) 422 with its positioned errors; a failed update or query
// handler 422; the root package's error kinds by kindStatus; anything
// else 500, without its message (it is logged).
func problemOf(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if errs := flowdoc.Errors(err); len(errs) > 0 {
		return documentProblem(errs)
	}
	var uf *hephaestus.UpdateFailedError
	if errors.As(err, &uf) {
		return &Problem{Status: http.StatusUnprocessableEntity, Kind: kindUnprocessable, Detail: err.Error()}
	}
	var qf *hephaestus.QueryFailedError
	if errors.As(err, &qf) {
		return &Problem{Status: http.StatusUnprocessableEntity, Kind: kindUnprocessable, Detail: err.Error()}
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return &Problem{Status: http.StatusRequestEntityTooLarge, Kind: kindTooLarge, Detail: "the request body is larger than the server's limit"}
	}
	for _, k := range kindStatus {
		if errors.Is(err, k.err) {
			return &Problem{Status: k.status, Kind: k.kind, Detail: err.Error()}
		}
	}
	return &Problem{Status: http.StatusInternalServerError, Kind: kindInternal, Detail: "the server failed to handle the request"}
}

// documentProblem is the 422 of an invalid flow document.
func documentProblem(errs []*flowdoc.Error) *Problem {
	p := &Problem{Status: http.StatusUnprocessableEntity, Kind: kindUnprocessable, Detail: "the document is invalid"}
	for _, e := range errs {
		msg := e.Message
		if e.Fix != "" {
			msg += " (" + e.Fix + ")"
		}
		p.Errors = append(p.Errors, FieldError{Line: e.Line, Column: e.Column, Path: e.Path, Message: msg})
	}
	return p
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	out := *p
	if out.Kind == "" {
		out.Kind = kindInternal
	}
	out.Type = ProblemTypeBase + out.Kind
	if out.Title == "" {
		out.Title = http.StatusText(out.Status)
	}
	if out.Instance == "" && r != nil {
		out.Instance = r.URL.Path
	}
	b, err := json.Marshal(&out)
	if err != nil { // a Problem always marshals; keep the status anyway
		b = []byte(`{"type":"` + ProblemTypeBase + kindInternal + `","title":"Internal Server Error","status":500}`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(out.Status)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON writes v as JSON with a status.
func (c *call) json(status int, v any) error {
	if rv := reflect.ValueOf(v); rv.IsValid() && rv.Kind() == reflect.Struct {
		// A struct given by value: hide its payloads in a copy that can
		// be set.
		p := reflect.New(rv.Type())
		p.Elem().Set(rv)
		v = p.Interface()
	}
	c.hidePayloads(v)
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wrote = true
	c.w.Header().Set("Content-Type", "application/json")
	c.w.WriteHeader(status)
	_, _ = c.w.Write(append(b, '\n'))
	return nil
}
