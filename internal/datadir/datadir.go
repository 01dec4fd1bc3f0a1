// Package datadir keeps a server's data folder safe to run from: one
// process per plane (an exclusive lock file), owner-only modes on the
// folder and everything in it, and a check that the databases can be
// written before anything is served.
package datadir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrLocked is wrapped by the error of [Lock] when another process holds
// the lock.
var ErrLocked = errors.New("datadir: locked by another process")

// Modes of the data folder and of every regular file in it: the most they
// may allow. Bits beyond them are taken away; none are added, so a file
// the operator made read-only stays so and [CheckWritable] reports it.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// Prepare creates dir with mode 0700 if it is missing, and otherwise takes
// away every permission of group and others (0755 becomes 0700). It
// refuses a path that exists and is not a folder.
func Prepare(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("data folder %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data folder %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data folder %s is not a folder", dir)
	}
	if m := fi.Mode().Perm(); m&^DirMode != 0 {
		if err := os.Chmod(dir, m&DirMode); err != nil {
			return fmt.Errorf("data folder %s: cannot take away the permissions of others: %w", dir, err)
		}
	}
	return nil
}

// Secure takes away every permission beyond 0600 from every regular file
// in dir (the databases with their -wal and -shm files, the secrets, the
// lock files): 0644 becomes 0600, 0400 stays; and every permission beyond
// 0700 from each folder in it (the relay archive's log), whose files it
// secures the same way. Symbolic links are left alone: changing the mode
// of their target could touch files outside the folder.
func Secure(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data folder %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := Prepare(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
			if err := Secure(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return fmt.Errorf("data folder %s: %w", dir, err)
		}
		m := fi.Mode().Perm()
		if m&^FileMode == 0 {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Chmod(p, m&FileMode); err != nil {
			return fmt.Errorf("cannot take away the permissions of others from %s: %w", p, err)
		}
	}
	return nil
}
