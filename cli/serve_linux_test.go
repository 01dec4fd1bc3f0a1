//go:build linux

package cli

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// makeUnwritable makes path unwritable for this process: mode 0400, or,
// as root (whom modes do not stop), the immutable attribute.
func makeUnwritable(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o400); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("this file system has no file attributes: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsImmutableFL)); err != nil {
		t.Skipf("cannot make a file immutable here: %v", err)
	}
	t.Cleanup(func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
	})
}

// fsImmutableFL is FS_IMMUTABLE_FL of <linux/fs.h>.
const fsImmutableFL = 0x10
