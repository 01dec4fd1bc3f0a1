package datadir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func perm(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestPrepareAndSecure: a new folder is 0700; an existing 0755 one loses
// the permissions of others, and so do its files; nothing gains a
// permission it did not have; symbolic links and their targets are left
// alone.
func TestPrepareAndSecure(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	root := t.TempDir()
	fresh := filepath.Join(root, "a", "data")
	if err := Prepare(fresh); err != nil {
		t.Fatal(err)
	}
	if m := perm(t, fresh); m != 0o700 {
		t.Fatalf("new folder mode %v", m)
	}

	old := filepath.Join(root, "old")
	os.Mkdir(old, 0o755)
	os.Chmod(old, 0o755)
	outside := filepath.Join(root, "outside")
	os.WriteFile(outside, nil, 0o644)
	os.Chmod(outside, 0o644)
	files := map[string]os.FileMode{"relay.db": 0o644, "relay.db-wal": 0o664, "jwt_secret": 0o600, "ro.db": 0o444, "x": 0o755}
	for n, m := range files {
		p := filepath.Join(old, n)
		os.WriteFile(p, nil, m)
		os.Chmod(p, m)
	}
	os.Symlink(outside, filepath.Join(old, "link"))
	if err := Prepare(old); err != nil {
		t.Fatal(err)
	}
	if err := Secure(old); err != nil {
		t.Fatal(err)
	}
	if m := perm(t, old); m != 0o700 {
		t.Errorf("existing 0755 folder now %v, want 0700", m)
	}
	want := map[string]os.FileMode{"relay.db": 0o600, "relay.db-wal": 0o600, "jwt_secret": 0o600, "ro.db": 0o400, "x": 0o600}
	for n, w := range want {
		if m := perm(t, filepath.Join(old, n)); m != w {
			t.Errorf("%s: %v, want %v", n, m, w)
		}
	}
	if m := perm(t, outside); m != 0o644 {
		t.Errorf("the target of a symbolic link was changed to %v", m)
	}

	notDir := filepath.Join(root, "file")
	os.WriteFile(notDir, nil, 0o600)
	if err := Prepare(notDir); err == nil {
		t.Error("a file was accepted as the data folder")
	}
}

// TestLockIsExclusive: a second Lock of one file fails with ErrLocked
// until the first is released.
func TestLockIsExclusive(t *testing.T) {
	if !Supported {
		t.Skip("no file locks on this system")
	}
	p := filepath.Join(t.TempDir(), "relay.lock")
	a, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(p); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	b, err := Lock(p)
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	b.Unlock()
	if runtime.GOOS != "windows" {
		if m := perm(t, p); m&0o077 != 0 {
			t.Errorf("lock file mode %v", m)
		}
	}
}

// TestRestrictUmask: files created while it holds are owner-only, also
// when calls nest; the last restore puts the umask back.
func TestRestrictUmask(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no umask")
	}
	dir := t.TempDir()
	create := func(name string) os.FileMode {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			t.Fatal(err)
		}
		return perm(t, p)
	}
	before := create("before")
	r1 := RestrictUmask()
	r2 := RestrictUmask()
	if m := create("in1"); m != 0o600 {
		t.Errorf("under RestrictUmask: %v", m)
	}
	r1()
	r1() // a second call of one restore does nothing
	if m := create("in2"); m != 0o600 {
		t.Errorf("with one of two restores done: %v", m)
	}
	r2()
	if m := create("after"); m != before {
		t.Errorf("after the last restore: %v, before %v", m, before)
	}
}

// TestCheckWritable: a read-only database file and a read-only folder are
// reported; missing files are not an error.
func TestCheckWritable(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("modes do not stop root (see the serve tests for an immutable file)")
	}
	dir := t.TempDir()
	if err := CheckWritable(dir, "relay.db", "relay.db-wal"); err != nil {
		t.Fatalf("empty folder: %v", err)
	}
	p := filepath.Join(dir, "relay.db")
	if err := CheckDB(context.Background(), p); err != nil {
		t.Fatalf("new database: %v", err)
	}
	os.Chmod(p, 0o400)
	if err := CheckWritable(dir, "relay.db"); err == nil {
		t.Error("a read-only database file passed")
	}
	if err := CheckDB(context.Background(), p); err == nil {
		t.Error("a read-only database passed the write check")
	}
	os.Chmod(p, 0o600)
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	if err := CheckWritable(dir); err == nil {
		t.Error("a read-only folder passed")
	}
}
