package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRunNoFiles(t *testing.T) {
	if err := run(t.TempDir()); err == nil {
		t.Error("a folder without vector files passed")
	}
}

func TestRun(t *testing.T) {
	src := os.Getenv("MLS_VECTORS_DIR")
	if src == "" {
		src = filepath.Join("..", "..", "..", "..", "..", "shared", "mls-vectors")
	}
	dir := t.TempDir()
	for _, name := range []string{"crypto-basics.json", "deserialization.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Skipf("no MLS test vectors: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(dir); err != nil {
		t.Fatal(err)
	}

	// A wrong expected value makes the run fail.
	if err := os.WriteFile(filepath.Join(dir, "deserialization.json"), []byte(`[{"vlbytes_header":"00","length":1}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir); err == nil {
		t.Error("a failing vector passed")
	}
}
