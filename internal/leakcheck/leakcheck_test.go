package leakcheck_test

import (
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/leakcheck"
)

// TestFindsAndForgets: a goroutine running the module's code is reported
// while it runs and not once it has ended; Run fails a passing run that
// leaves one behind and keeps a failing run's own code.
func TestFindsAndForgets(t *testing.T) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go blocked(stop, done)
	if got := leakcheck.Wait(50 * time.Millisecond); len(got) != 1 || !strings.Contains(got[0], "leakcheck_test.blocked") {
		t.Fatalf("a running goroutine: got %d stacks %q", len(got), got)
	}
	var out strings.Builder
	if code := leakcheck.Run(func() int { return 0 }, &out); code != 1 || !strings.Contains(out.String(), "leakcheck_test.blocked") {
		t.Fatalf("Run with a goroutine left: code %d, output %q", code, out.String())
	}
	if code := leakcheck.Run(func() int { return 3 }, &out); code != 3 {
		t.Fatalf("Run of a failing run: code %d, want its own 3", code)
	}
	close(stop)
	<-done
	if got := leakcheck.Wait(time.Second); len(got) != 0 {
		t.Fatalf("after the goroutine ended: %q", got)
	}
}

func blocked(stop, done chan struct{}) {
	<-stop
	close(done)
}
