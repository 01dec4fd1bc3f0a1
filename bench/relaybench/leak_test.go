package main

import (
	"os"
	"testing"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain fails the run if a goroutine of the module's code outlives the
// tests.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run, os.Stderr)) }
