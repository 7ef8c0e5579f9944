package main

import "testing"

// The example program itself, on a fresh SQLite file: three emails (the
// duplicate welcome email is not sent again), the cat's thumbnail after a
// snooze, one thumbnail cancelled from inside, never two thumbnails of a
// tenant at once, and a digest inserted by the schedule.
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
		t.Fatalf("the cat's thumbnail ran %d times, want 2 (a snooze, then the work)", n)
	}
	if perTenant.max != 1 {
		t.Fatalf("at most %d thumbnails of a tenant ran at once, want 1", perTenant.max)
	}
	if digests.Load() == 0 {
		t.Fatal("the schedule inserted no digest")
	}
}
