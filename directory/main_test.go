package directory

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run if a Server's goroutine outlives the tests: every
// Server a test starts must be closed, and Close must wait for its sweep.
// It also stops the PostgreSQL server the tests started, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopPostgres(); err != nil {
		fmt.Fprintf(os.Stderr, "stop PostgreSQL: %v\n", err)
		code = 1
	}
	if code == 0 {
		if leaked := waitForLeaks(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

func waitForLeaks(wait time.Duration) string {
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "directory.(*Server).sweepLoop") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
