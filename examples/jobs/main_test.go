package main

import "testing"

// The example program itself, on a fresh SQLite file: three emails (the
// duplicate welcome email is not sent again), one thumbnail after a
// snooze, one thumbnail cancelled from inside.
func TestJobsProgram(t *testing.T) {
	sent.Store(0)
	busy.Store(0)
	if err := run(t.TempDir() + "/jobs.db"); err != nil {
		t.Fatal(err)
	}
	if n := sent.Load(); n != 3 {
		t.Fatalf("%d emails sent, want 3", n)
	}
	if n := busy.Load(); n != 2 {
		t.Fatalf("the thumbnail ran %d times, want 2 (a snooze, then the work)", n)
	}
}
