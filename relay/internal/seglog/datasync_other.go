//go:build !linux

package seglog

import "os"

// datasync flushes a file to the disk.
func datasync(f *os.File) error { return f.Sync() }
