//go:build unix

package mls

import (
	"syscall"
	"time"
)

// processCPUTime returns the user and system CPU time of this process, so
// benchmarks can report CPU time per operation, which a loaded machine
// distorts less than wall time.
func processCPUTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
