package main

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, as the relay's log does.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
