package hephtype

import "errors"

// The conditions callers branch on that the runtime's packages detect.
// They are defined here, where every package can reach them, and
// re-exported by package hephaestus under the same names; compare with
// errors.Is through either.
var (
	// ErrFlowNotFound: no flow of that name (or version) is registered.
	ErrFlowNotFound = errors.New("flow not found")
	// ErrFlowConflict: a flow was registered twice with the same name and
	// version but a different shape.
	ErrFlowConflict = errors.New("flow registered twice with a different shape")
	// ErrInvalidInput: input a caller passed does not fit.
	ErrInvalidInput = errors.New("invalid input")
	// ErrBusinessValueRequired: a start of a flow with a business key
	// gave no business value. It comes with ErrInvalidInput.
	ErrBusinessValueRequired = errors.New("business value required")
	// ErrPayloadTooLarge: a payload is larger than the configured limit.
	ErrPayloadTooLarge = errors.New("payload too large")
	// ErrNotWaiting: the run, or the named step, is not waiting.
	ErrNotWaiting = errors.New("step is not waiting")
	// ErrUnknownEvent: the step does not declare the event.
	ErrUnknownEvent = errors.New("event not declared by the step")
	// ErrUnknownStep: the flow has no step of that name.
	ErrUnknownStep = errors.New("unknown step")
	// ErrRunFinished: the run is completed, failed or cancelled.
	ErrRunFinished = errors.New("run is finished")
	// ErrNotRetryable: the run cannot be retried in place: it is not
	// failed, or it is a code-first workflow run.
	ErrNotRetryable = errors.New("run cannot be retried")
	// ErrNotResettable: the run cannot be reset to the step: it is
	// cancelled, it is a code-first workflow run, or the step has not
	// run yet.
	ErrNotResettable = errors.New("run cannot be reset to the step")
	// ErrClosed: the client was stopped.
	ErrClosed = errors.New("client stopped")
	// ErrWorkflowNotFound: no workflow of that name is registered.
	ErrWorkflowNotFound = errors.New("workflow not found")
	// ErrUpdateNotAccepted: no phase of the workflow accepts the update
	// now. Nothing was written.
	ErrUpdateNotAccepted = errors.New("workflow is not accepting this update now")
	// ErrSecretsUnavailable: secrets are used without a key ring, or
	// outside a step of a started client.
	ErrSecretsUnavailable = errors.New("secrets are not configured: no key ring")
	// ErrUnknownSecretKey: a secret is sealed with a key the key ring
	// does not hold.
	ErrUnknownSecretKey = errors.New("unknown secret key")
	// ErrSecretCorrupt: a sealed secret does not authenticate: altered,
	// or sealed for another name.
	ErrSecretCorrupt = errors.New("the sealed secret does not authenticate")
)
