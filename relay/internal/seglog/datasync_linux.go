package seglog

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes a file's data (and only the metadata needed to read it
// back) to the disk.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
