//go:build !linux

package relay

import "os"

// lowerPriority does nothing where a thread's priority cannot be set on
// its own (elsewhere setpriority applies to the whole process).
func lowerPriority(int) int { return 0 }

// datasync flushes a file to the disk.
func datasync(f *os.File) error { return f.Sync() }
