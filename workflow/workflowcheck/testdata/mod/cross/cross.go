// Package cross is workflow code that calls helpers of another package
// of its module: those that reach non-deterministic code are reported at
// the call.
package cross

import (
	"github.com/google/uuid"
	"github.com/hephaestus-go/hephaestus/workflow"

	"example.com/app/lib"
)

// Cross calls helpers of package lib.
func Cross(ctx workflow.Context, n int) (int, error) {
	_ = lib.Stamp()    // want `call of example.com/app/lib.Stamp \(it reaches time.Now at lib.go:11\) in workflow code: use workflow.Now\(ctx\)`
	r := lib.Roll()    // want `call of example.com/app/lib.Roll \(it reaches math/rand.Int at lib.go:16\) in workflow code: use workflow.Random`
	_ = lib.Accepted() // silenced where it reads the clock
	_ = uuid.Stamped() // another module: not followed
	return lib.Double(n) + r + helper(), nil
}

func helper() int { // want helper:"reaches math/rand.Int at lib.go:16"
	return lib.Roll() // want `call of example.com/app/lib.Roll \(it reaches math/rand.Int at lib.go:16\) in workflow code \(in helper, reached from workflow function Cross\)`
}
