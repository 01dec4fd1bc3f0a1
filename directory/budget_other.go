//go:build !unix

package directory

// freeSpace is unknown here: the server budget defaults as for a
// directory in memory.
func freeSpace(string) (int64, bool) { return 0, false }
