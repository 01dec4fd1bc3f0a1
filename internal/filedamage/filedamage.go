// Package filedamage damages files on disk the way a crash or a bad disk
// does, for the tests of the stores that must survive it: a cut tail,
// bytes overwritten, a flipped bit.
package filedamage

import "os"

// T is the part of testing.TB these helpers use (the package does not
// import testing: library code of this module never does).
type T interface {
	Helper()
	Fatal(args ...any)
}

// Truncate cuts the file at path to n bytes.
func Truncate(t T, path string, n int64) {
	t.Helper()
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
}

// WriteAt writes b over the file at path from offset off.
func WriteAt(t T, path string, b []byte, off int64) {
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
func FlipAt(t T, path string, off int64) {
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
