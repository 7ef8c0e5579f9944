package store

import "context"

// MaxRunTasks bounds the tasks RunTasks returns.
const MaxRunTasks = 100

// RunTasks lists the tasks of one run: what the run's reader needs to
// tell what holds it up (a task due later, on a paused or limited queue,
// or that no live worker can run).
type RunTasks interface {
	// RunTasks returns the tasks (queued or leased) of the run, oldest
	// ready first (then by id), at most MaxRunTasks. A run without tasks,
	// or not stored, has none.
	RunTasks(ctx context.Context, runID string) ([]*Task, error)
}
