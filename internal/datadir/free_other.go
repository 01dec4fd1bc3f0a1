//go:build !unix

package datadir

// FreeSpace cannot be told here: the callers' budgets default as for a
// store in memory.
func FreeSpace(string) (int64, bool) { return 0, false }
