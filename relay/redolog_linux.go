package relay

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync syncs a file's data (and only the metadata needed to read it
// back): a preallocated segment's size and blocks do not change, so this
// is one device flush.
func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
