//go:build unix

package datadir

import (
	"sync"

	"golang.org/x/sys/unix"
)

var umask struct {
	sync.Mutex
	refs  int
	saved int
}

// RestrictUmask sets the process umask to 0077, so every file created
// while it holds (SQLite's -wal and -shm files among them) is readable by
// its owner only, and returns the function that puts the previous umask
// back. The umask is process-wide: calls nest, and the last restore puts
// back the umask the first call found.
func RestrictUmask() (restore func()) {
	umask.Lock()
	defer umask.Unlock()
	if umask.refs == 0 {
		umask.saved = unix.Umask(0o077)
	}
	umask.refs++
	var once sync.Once
	return func() {
		once.Do(func() {
			umask.Lock()
			defer umask.Unlock()
			umask.refs--
			if umask.refs == 0 {
				unix.Umask(umask.saved)
			}
		})
	}
}
