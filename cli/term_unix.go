//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// echoOff turns off the terminal's echo on f, so that typed secrets do not
// show; restore turns it back on.
func echoOff(f *os.File) (restore func(), err error) {
	fd := int(f.Fd())
	t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	old := *t
	t.Lflag &^= unix.ECHO
	t.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, t); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, ioctlSetTermios, &old) }, nil
}

// isTerminal reports whether r is a terminal, so a question can be asked.
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}
