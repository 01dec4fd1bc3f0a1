//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive, non-blocking flock(2) on path, creating it with
// mode 0600. It fails at once, with an error wrapping [ErrLocked], if
// another open file (in this or another process) holds it. The lock is
// released by Unlock, or by the kernel when the process exits however it
// exits.
func Lock(path string) (*Locked, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
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
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	return l.f.Close()
}

// Supported reports whether Lock excludes other processes on this system.
const Supported = true
