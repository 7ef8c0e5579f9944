//go:build unix

package sqlite

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system, all threads) the process has
// used: steadier than wall time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
