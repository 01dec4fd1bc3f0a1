package seglog

import (
	"os"
	"testing"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain fails the run if a segment's preparation outlives the tests.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run, os.Stderr)) }
