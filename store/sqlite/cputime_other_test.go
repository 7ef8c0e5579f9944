//go:build !unix

package sqlite

import "time"

// cpuTime is not measured here: the cpu-ns metrics read zero.
func cpuTime() time.Duration { return 0 }
