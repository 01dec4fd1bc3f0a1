package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestServeOpenSignupOnlyOnLoopback: signup is open by default only when
// both planes listen on loopback.
func TestServeOpenSignupOnlyOnLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:3100": true,
		"localhost:3100": true,
		"[::1]:3100":     true,
		"127.0.0.2:0":    true,
		"0.0.0.0:3100":   false,
		":3100":          false,
		"[::]:8443":      false,
		"10.0.0.5:3100":  false,
		"example.com:80": false,
		"no port":        false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestServeSecretsCreatedOnceAndReused: a secret file is created with mode
// 0600 on first use, read back unchanged after, and a damaged one is
// refused rather than silently replaced.
func TestServeSecretsCreatedOnceAndReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwt_secret")
	first, err := loadSecret(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v, %v", fi.Mode().Perm(), err)
	}
	again, err := loadSecret(path)
	if err != nil || string(again) != string(first) || len(first) != 64 {
		t.Fatalf("reloaded %q (%v), first %q", again, err, first)
	}
	if err := os.WriteFile(path, []byte("not hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSecret(path); err == nil {
		t.Fatal("a damaged secret file was accepted")
	}
}

func TestServeUnknownPlane(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	err := serve(context.Background(), serveOptions{Data: data, Only: "archive"}, io.Discard)
	var ue *usageError
	if !errors.As(err, &ue) {
		t.Fatalf("--only archive: %v, want a usage error", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("a refused command created the data folder (%v)", err)
	}
}
