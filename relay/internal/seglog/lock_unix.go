//go:build unix

package seglog

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockShared takes a shared lock of f, waiting for an exclusive one to go.
func lockShared(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_SH) }

// tryLockExclusive takes an exclusive lock of f if nobody holds one.
func tryLockExclusive(f *os.File) bool {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
}

// unlockFile drops the lock of f.
func unlockFile(f *os.File) { unix.Flock(int(f.Fd()), unix.LOCK_UN) }
