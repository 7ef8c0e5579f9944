package workflow

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hephaestus-go/hephaestus/flow"
)

// RetryPolicy says how often, and after how long, a failed activity is
// tried again (the same type as flow's: workflow code need not import
// package flow).
type RetryPolicy = flow.RetryPolicy

// DefaultRetryPolicy is what an activity gets when its options set none.
var DefaultRetryPolicy = flow.DefaultRetryPolicy

// NonRetryable marks err as permanent: the activity fails without further
// attempts. errors.Is and errors.As see through the mark.
func NonRetryable(err error) error { return flow.NonRetryable(err) }

// ApplicationError is a failure of the application's own making, with a
// type that programs branch on, a message for people, details (any JSON
// value) and a non-retryable flag. Unlike other errors, whose message
// alone is recorded, it keeps all of that on its way from an activity to
// the workflow (inside the *ActivityError, errors.As finds it) and from
// the workflow to its caller (inside the hephaestus.WorkflowError).
type ApplicationError struct {
	// Type classifies the failure ("card_declined"); may be empty.
	Type    string `json:"type,omitempty"`
	Message string `json:"message"`
	// NonRetryable: an activity that returns it is not tried again.
	NonRetryable bool `json:"non_retryable,omitempty"`
	// Details are the failure's data, as JSON.
	Details json.RawMessage `json:"details,omitempty"`
}

// NewApplicationError returns an ApplicationError; details are encoded as
// JSON (a value that does not encode is recorded as its message).
func NewApplicationError(typ, message string, details any, nonRetryable bool) *ApplicationError {
	e := &ApplicationError{Type: typ, Message: message, NonRetryable: nonRetryable}
	if details != nil {
		raw, err := json.Marshal(details)
		if err != nil {
			raw, _ = json.Marshal(fmt.Sprintf("details do not encode: %v", err))
		}
		e.Details = raw
	}
	return e
}

func (e *ApplicationError) Error() string {
	if e.Type == "" {
		return e.Message
	}
	return e.Type + ": " + e.Message
}

// DecodeDetails decodes the details into v.
// Is reports whether e is a timeout of the runtime's (type TimeoutType)
// when target is ErrTimeout.
func (e *ApplicationError) Is(target error) bool {
	return target == ErrTimeout && e.Type == TimeoutType
}

// ErrTimeout is matched (errors.Is) by the error of an activity whose
// ScheduleToCloseTimeout passed: its cause is an *ApplicationError of
// type TimeoutType.
var ErrTimeout = errors.New("timeout")

// TimeoutType is the Type of the *ApplicationError of an activity that
// timed out (ActivityOptions.ScheduleToCloseTimeout).
const TimeoutType = "timeout"

func (e *ApplicationError) DecodeDetails(v any) error {
	if len(e.Details) == 0 {
		return fmt.Errorf("application error %q has no details", e.Type)
	}
	return json.Unmarshal(e.Details, v)
}

// FailureData returns the error as the runtime records it with a failure
// (the history entry of a failed activity, a failed run's output).
func (e *ApplicationError) FailureData() json.RawMessage {
	raw, _ := json.Marshal(struct {
		App *ApplicationError `json:"application_error"`
	}{e})
	return raw
}

// ApplicationErrorOf returns the ApplicationError that err carries, or
// failure data recorded from one (FailureData), and nil when there is
// none.
func ApplicationErrorOf(err error, data json.RawMessage) *ApplicationError {
	var app *ApplicationError
	if errors.As(err, &app) {
		return app
	}
	if len(data) == 0 {
		return nil
	}
	var v struct {
		App *ApplicationError `json:"application_error"`
	}
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	return v.App
}
