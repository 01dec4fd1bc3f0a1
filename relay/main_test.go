package relay

import (
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain fails the run if a goroutine of the relay's code outlives the
// tests: every relay a test starts must be closed, and Close must wait
// for the archive's pipeline, its sweeps and the pollers. (Each test's
// cleanup checks the same at once, checkNoRelayGoroutines; this catches
// what a test started outside a relay.)
func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second, leakcheck.Code("skytale/relay.")) }
