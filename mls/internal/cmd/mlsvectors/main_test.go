package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunNoFiles(t *testing.T) {
	err := run(t.TempDir())
	if err == nil {
		t.Fatal("a folder without vector files passed")
	}
	// It says where the vectors come from.
	for _, want := range []string{"github.com/mlswg/mls-implementations", "test-vectors", "MLS_VECTORS_DIR", "crypto-basics.json"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not mention %q", err, want)
		}
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

// TestRunOneFile checks that a folder holding a single vector file is
// enough, and that changing one expected value in a real vector makes the
// run fail.
func TestRunOneFile(t *testing.T) {
	src := os.Getenv("MLS_VECTORS_DIR")
	if src == "" {
		src = filepath.Join("..", "..", "..", "..", "..", "shared", "mls-vectors")
	}
	data, err := os.ReadFile(filepath.Join(src, "tree-math.json"))
	if err != nil {
		t.Skipf("no MLS test vectors: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tree-math.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	// The first case gives "n_nodes": 1 for one leaf; claim 2.
	bad := bytes.Replace(data, []byte(`"n_nodes": 1,`), []byte(`"n_nodes": 2,`), 1)
	if bytes.Equal(bad, data) {
		t.Fatal("tree-math.json has an unexpected layout")
	}
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir); err == nil {
		t.Error("a wrong expected value passed")
	}
}
