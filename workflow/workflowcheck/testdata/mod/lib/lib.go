// Package lib holds helpers that workflow code of another package of the
// module calls.
package lib

import (
	"math/rand"
	"time"
)

// Stamp reads the clock.
func Stamp() time.Time { return time.Now() }

// Roll reaches math/rand through a helper.
func Roll() int { return roll() }

func roll() int { return rand.Int() }

// Double is deterministic.
func Double(n int) int { return 2 * n }

// Accepted reads the clock with a reason.
func Accepted() time.Time {
	return time.Now() //heph:nondeterministic-ok only logged, never decides anything
}
