package workflow

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Sleep waits for d on a durable timer: the run holds no goroutine and no
// memory meanwhile, and survives restarts. A duration of zero or less
// returns at once.
func Sleep(ctx Context, d time.Duration) error {
	return unitOf(ctx).Sleep(d)
}

// SleepUntil waits on a durable timer until the time t (see Sleep). The
// wait is t less the workflow's time (Now), both recorded in the history,
// so a replay waits alike whenever it runs. A t that is not after Now
// returns at once and starts no timer, on every replay as the first time.
func SleepUntil(ctx Context, t time.Time) error {
	u := unitOf(ctx)
	return u.Sleep(t.Sub(u.Now()))
}

// WaitSignal waits for a signal named name and returns its payload. Signals
// are buffered by name, oldest first, from the moment the run starts:
// one sent before the wait, or while the workflow runs an activity, is
// waiting here. Inside a phase, the phase's own signals go to its
// handlers instead.
func WaitSignal[T any](ctx Context, name string) (T, error) {
	raw, err := unitOf(ctx).WaitSignal(name)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := decode[T](raw)
	if err != nil {
		return v, fmt.Errorf("signal %q: payload does not decode: %w", name, err)
	}
	return v, nil
}

// Publish replaces the state queries read. It is the only state queries
// see: not the phase state, not local variables. It panics if state does
// not encode as JSON.
func Publish(ctx Context, state any) {
	raw, err := json.Marshal(state)
	if err != nil {
		panic(fmt.Errorf("workflow.Publish: state does not encode as JSON: %w", err))
	}
	unitOf(ctx).Publish(raw)
}

// Now returns the workflow's time: the time of the activation that is
// running, the same on every replay. Use it instead of time.Now.
func Now(ctx Context) time.Time { return unitOf(ctx).Now() }

// Random returns a number in [0, 1) from the run's deterministic random
// source (seeded in its history). Use it instead of math/rand.
func Random(ctx Context) float64 { return unitOf(ctx).Random() }

// UUID returns a random (version 4) UUID from the run's deterministic
// random source. Use it instead of uuid.New.
func UUID(ctx Context) uuid.UUID {
	u := unitOf(ctx)
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[:8], u.RandomUint64())
	binary.BigEndian.PutUint64(id[8:], u.RandomUint64())
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

// Patched reports whether the run takes the new code path of a change:
//
//	if workflow.Patched(ctx, "use-new-pricing") {
//		price, err = pricingV2.Execute(ctx, item)
//	} else {
//		price, err = pricingV1.Execute(ctx, item)
//	}
//
// It is true on runs that reach this point with the new code (the
// history records a marker) and false on runs that passed it before the
// change, so both replay. Once no run of the old code is left, replace
// the call by DeprecatePatch and the old branch by nothing.
func Patched(ctx Context, id string) bool { return unitOf(ctx).Patched(id) }

// DeprecatePatch stands where Patched(ctx, id) was, once every run that
// could take the old path has ended: runs whose history has the patch's
// marker replay, and so do runs without it. Remove it, later, like any
// other code.
func DeprecatePatch(ctx Context, id string) { unitOf(ctx).DeprecatePatch(id) }
