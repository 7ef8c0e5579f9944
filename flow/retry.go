package flow

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// RetryPolicy says how often and how fast a failed step is tried again.
// The zero value of each field means "inherit": from the flow's defaults,
// then from DefaultRetryPolicy.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts, the first included: 1 means no
	// retry. Defaults to 3.
	MaxAttempts int
	// InitialBackoff is the delay before the second attempt. Defaults to 1
	// second.
	InitialBackoff time.Duration
	// MaxBackoff caps the delay. Defaults to 5 minutes.
	MaxBackoff time.Duration
	// Multiplier grows the delay after each attempt. Defaults to 2.
	Multiplier float64
	// Jitter spreads each delay uniformly over ±Jitter of itself, so that
	// steps failing together do not retry together. From 0 to 1; defaults
	// to 0.2. Use a negative value for no jitter.
	Jitter float64
	// NonRetryable, when set, marks further errors as permanent: the step
	// fails at once. Errors wrapped with NonRetryable are always permanent.
	NonRetryable func(error) bool
}

// DefaultRetryPolicy is what a step gets when neither it nor its flow says
// otherwise.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:    3,
	InitialBackoff: time.Second,
	MaxBackoff:     5 * time.Minute,
	Multiplier:     2,
	Jitter:         0.2,
}

// merge fills p's unset fields from d.
func (p RetryPolicy) merge(d RetryPolicy) RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = d.InitialBackoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = d.MaxBackoff
	}
	if p.Multiplier == 0 {
		p.Multiplier = d.Multiplier
	}
	if p.Jitter == 0 {
		p.Jitter = d.Jitter
	}
	if p.NonRetryable == nil {
		p.NonRetryable = d.NonRetryable
	}
	return p
}

func (p RetryPolicy) validate() error {
	var errs []error
	if p.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("MaxAttempts is %d; it must be at least 1 (or 0 to inherit)", p.MaxAttempts))
	}
	if p.InitialBackoff < 0 {
		errs = append(errs, fmt.Errorf("InitialBackoff is %s; it must not be negative", p.InitialBackoff))
	}
	if p.MaxBackoff < 0 {
		errs = append(errs, fmt.Errorf("MaxBackoff is %s; it must not be negative", p.MaxBackoff))
	}
	if p.InitialBackoff > 0 && p.MaxBackoff > 0 && p.MaxBackoff < p.InitialBackoff {
		errs = append(errs, fmt.Errorf("MaxBackoff %s is below InitialBackoff %s", p.MaxBackoff, p.InitialBackoff))
	}
	if p.Multiplier != 0 && (p.Multiplier < 1 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0)) {
		errs = append(errs, fmt.Errorf("Multiplier is %v; it must be at least 1 (or 0 to inherit)", p.Multiplier))
	}
	if p.Jitter > 1 || math.IsNaN(p.Jitter) {
		errs = append(errs, fmt.Errorf("Jitter is %v; it must be at most 1 (negative for none)", p.Jitter))
	}
	return errors.Join(errs...)
}

// Backoff returns the delay before attempt (2 for the first retry), given a
// uniform random number r in [0, 1) for the jitter.
func (p RetryPolicy) Backoff(attempt int, r float64) time.Duration {
	p = p.merge(DefaultRetryPolicy)
	if attempt < 2 {
		return 0
	}
	d := float64(p.InitialBackoff) * math.Pow(p.Multiplier, float64(attempt-2))
	if p.Jitter > 0 {
		d *= 1 + p.Jitter*(2*r-1)
	}
	if d > float64(p.MaxBackoff) || math.IsInf(d, 0) || math.IsNaN(d) {
		d = float64(p.MaxBackoff)
	}
	return time.Duration(d)
}

// Retryable reports whether err may be retried under p.
func (p RetryPolicy) Retryable(err error) bool {
	var nr *nonRetryableError
	if errors.As(err, &nr) {
		return false
	}
	return p.NonRetryable == nil || !p.NonRetryable(err)
}

// NonRetryable marks err as permanent: the step fails without further
// attempts. errors.Is and errors.As see through the mark.
func NonRetryable(err error) error {
	if err == nil {
		return nil
	}
	return &nonRetryableError{err}
}

type nonRetryableError struct{ err error }

func (e *nonRetryableError) Error() string { return e.err.Error() }
func (e *nonRetryableError) Unwrap() error { return e.err }
