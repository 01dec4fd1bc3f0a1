package jsarchive

import (
	"os"
	"testing"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain fails the run if a goroutine of an archive outlives the tests.
// (The archive's behaviour against a NATS server is tested with the relay,
// whose contract suite runs over it.)
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run, os.Stderr)) }
