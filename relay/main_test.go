package relay

import (
	"os"
	"testing"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain fails the run if a goroutine of the module's code outlives the
// tests: every relay a test starts must be closed, and Close must wait for
// the archive's pipeline, its sweeps and the pollers. (Each test's cleanup
// checks the relay's own at once, checkNoRelayGoroutines; this catches what
// a test started outside a relay.)
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m.Run, os.Stderr)) }
