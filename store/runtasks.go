package store

import "context"

// RunTasks lists the open tasks of a run: those queued, leased or due
// later. A task leaves the list when its outcome commits, so the list is
// what a run is doing now (a running step's attempt, with its worker and
// heartbeat details, is only here until it ends).
type RunTasks interface {
	// TasksOfRun returns the run's tasks by id (oldest first), each with
	// its lease as stored (Owner, Token, LeaseUntil) and its heartbeat
	// details. A run without tasks, or one not stored, has none.
	TasksOfRun(ctx context.Context, runID string) ([]*Task, error)
}
