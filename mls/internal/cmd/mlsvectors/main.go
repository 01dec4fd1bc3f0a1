// Command mlsvectors runs the IETF MLS test vectors found in a folder
// against package mls (through mls/internal/vectors) and prints one
// summary line per file.
//
// Usage:
//
//	mlsvectors -dir DIR
//
// Without -dir it reads $MLS_VECTORS_DIR, or else the current folder.
//
// It exits with status 1 when any case fails or when DIR holds no vector
// file that mls knows how to check.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/skytale-oss/skytale/mls" // registers the checkers
	"github.com/skytale-oss/skytale/mls/internal/vectors"
)

func main() {
	def := os.Getenv("MLS_VECTORS_DIR")
	if def == "" {
		def = "."
	}
	dir := flag.String("dir", def, "folder holding the vector JSON files (default $MLS_VECTORS_DIR, else the current folder)")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "mlsvectors:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	found, failed := 0, false
	for _, name := range vectors.Files() {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		found++
		rep, err := vectors.Check(name, data)
		if err != nil {
			fmt.Printf("%s: error: %v\n", name, err)
			failed = true
			continue
		}
		line := fmt.Sprintf("%s: %d passed, %d failed, %d skipped", name, rep.Passed, rep.Failed, rep.Skipped)
		if len(rep.SkipReasons) > 0 {
			line += " (" + strings.Join(rep.SkipReasons, "; ") + ")"
		}
		fmt.Println(line)
		for _, f := range rep.Failures {
			fmt.Println("  FAIL", f)
		}
		if rep.Failed > 0 {
			failed = true
		}
	}
	switch {
	case found == 0:
		return fmt.Errorf("no known vector files in %s: they are the JSON files of test-vectors/ in "+
			"github.com/mlswg/mls-implementations (%s); put them in a folder and pass -dir, or set MLS_VECTORS_DIR",
			dir, strings.Join(vectors.Files(), ", "))
	case failed:
		return errors.New("some vectors failed")
	}
	return nil
}
