// Package filedamage damages files on disk the way a crash or a bad disk
// does, for the tests of the stores that must survive it: a cut tail,
// bytes overwritten, a flipped bit.
package filedamage

import (
	"os"
	"testing"
)

// Truncate cuts the file at path to n bytes.
func Truncate(t testing.TB, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

// WriteAt writes b over the file at path from offset off.
func WriteAt(t testing.TB, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// FlipAt flips one bit of the byte at offset off of the file at path.
func FlipAt(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
