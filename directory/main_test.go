package directory

import (
	"fmt"
	"os"
	"testing"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestMain fails the run if a goroutine of the module's code outlives the
// tests: every Server a test starts must be closed, and Close must wait
// for its loops. It also stops the PostgreSQL server the tests started, if
// any.
func TestMain(m *testing.M) {
	os.Exit(leakcheck.Run(func() int {
		code := m.Run()
		if err := stopPostgres(); err != nil {
			fmt.Fprintf(os.Stderr, "stop PostgreSQL: %v\n", err)
			code = 1
		}
		return code
	}, os.Stderr))
}
