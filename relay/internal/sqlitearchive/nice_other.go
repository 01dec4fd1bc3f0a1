//go:build !linux

package sqlitearchive

// lowerPriority does nothing where a thread's priority cannot be set on
// its own (elsewhere setpriority applies to the whole process).
func lowerPriority(int) int { return 0 }
