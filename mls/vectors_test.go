package mls

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// vectorsDir finds the IETF vector folder: $MLS_VECTORS_DIR, else
// ../shared/mls-vectors next to the module root.
func vectorsDir(t testing.TB) string {
	if dir := os.Getenv("MLS_VECTORS_DIR"); dir != "" {
		return dir
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			v := filepath.Join(dir, "..", "shared", "mls-vectors")
			if _, err := os.Stat(v); err == nil {
				return v
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Skip("no MLS test vectors: they are the JSON files of test-vectors/ in github.com/mlswg/mls-implementations; " +
		"put them in a folder and set MLS_VECTORS_DIR to it, or put them in ../shared/mls-vectors next to go.mod")
	return ""
}

func TestVectors(t *testing.T) {
	dir := vectorsDir(t)
	for _, name := range vectorFiles() {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if errors.Is(err, os.ErrNotExist) {
				t.Skipf("%s not present in %s", name, dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			runCase := func(c string, f func() error) {
				t.Run(c, func(t *testing.T) {
					err := runVectorCase(f)
					switch {
					case errors.Is(err, errSkip):
						t.Skip(err)
					case err != nil:
						t.Fatal(err)
					}
				})
			}
			if err := vectorCheckers[name](data, &vectorRun{runCase: runCase}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
