package pgtest

import (
	"os"
	"testing"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain fails the run if a server's waiter outlives the tests: every
// server a test starts must be stopped.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run, os.Stderr)) }
