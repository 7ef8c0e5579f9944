package commit

// Test-only views of the committer's internals, for the tests of package
// commit_test that must know when something has happened without waiting
// for a wall-clock margin.

// Queued returns how many groups of changes wait in the committer's queue
// (a Submit queues a group of one).
func Queued(m *Committer) int { return len(m.reqs) }

// Stopping reports whether Close has begun stopping the commit loops.
func Stopping(m *Committer) bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// Waiting returns how many WaitRun callers wait for the run.
func Waiting(m *Committer, runID string) int {
	m.waitMu.Lock()
	defer m.waitMu.Unlock()
	return len(m.waiters[runID])
}
