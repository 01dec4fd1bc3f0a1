//go:build unix

package cli

import "golang.org/x/sys/unix"

// openFileLimit returns the process's limit on open files (the Go runtime
// has already raised the soft limit to the hard one), or 0 if unknown.
func openFileLimit() int {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil || r.Cur > 1<<30 {
		return 0
	}
	return int(r.Cur)
}
