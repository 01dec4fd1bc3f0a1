//go:build !unix && !windows

package datadir

import (
	"fmt"
	"os"
)

// Lock creates path but cannot lock it: this system has neither flock nor
// LockFileEx. [Supported] is false, so a caller can say so.
func Lock(path string) (*Locked, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("lock file %s: %w", path, err)
	}
	return &Locked{f: f}, nil
}

// Locked is a held lock.
type Locked struct{ f *os.File }

// Unlock releases the lock.
func (l *Locked) Unlock() error { return l.f.Close() }

// Supported reports whether Lock excludes other processes on this system.
const Supported = false
