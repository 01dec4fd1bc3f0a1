//go:build windows

package datadir

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// Lock takes an exclusive, non-blocking LockFileEx lock on path, creating
// it. It fails at once, with an error wrapping [ErrLocked], if another
// handle holds it. The lock is released by Unlock or when the process
// exits.
func Lock(path string) (*Locked, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	ol := new(windows.Overlapped)
	err = windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	return &Locked{f: f}, nil
}

// Locked is a held lock.
type Locked struct{ f *os.File }

// Unlock releases the lock.
func (l *Locked) Unlock() error {
	windows.UnlockFileEx(windows.Handle(l.f.Fd()), 0, 1, 0, new(windows.Overlapped))
	return l.f.Close()
}

// Supported reports whether Lock excludes other processes on this system.
const Supported = true
