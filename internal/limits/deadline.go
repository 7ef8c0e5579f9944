package limits

import (
	"fmt"
	"time"
)

// MaxExecutionTimeout bounds an execution timeout: about a hundred years.
const MaxExecutionTimeout = 100 * 365 * 24 * time.Hour

// Deadline returns when a run started at now (due at runAt, when that is
// later) times out, given the timeout of its start (0: none given) and
// its definition's default (0: none); the zero time for no timeout.
func Deadline(now, runAt time.Time, timeout, def time.Duration) (time.Time, error) {
	if timeout < 0 || timeout > MaxExecutionTimeout {
		return time.Time{}, fmt.Errorf("%w: the execution timeout %v is not between 0 and %v", ErrInvalidInput, timeout, MaxExecutionTimeout)
	}
	if timeout == 0 {
		timeout = def
	}
	if timeout <= 0 {
		return time.Time{}, nil
	}
	from := now
	if runAt.After(now) {
		from = runAt
	}
	return from.Add(timeout), nil
}
