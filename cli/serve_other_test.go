//go:build !linux

package cli

import (
	"os"
	"testing"
)

// makeUnwritable makes path read-only; modes do not stop root, so the
// test is skipped as root.
func makeUnwritable(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() == 0 || os.Geteuid() == -1 {
		t.Skip("modes do not stop this user")
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
}
