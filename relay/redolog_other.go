//go:build !linux

package relay

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
