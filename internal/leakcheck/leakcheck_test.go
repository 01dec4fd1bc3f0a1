package leakcheck

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m, 5*time.Second, Code("skytale/internal/leakcheck.")) }

// block runs until stop is closed: a goroutine of this package's code.
func block(started chan<- struct{}, stop <-chan struct{}) {
	close(started)
	<-stop
}

type fakeM struct{ code int }

func (f fakeM) Run() int { return f.code }

// TestReportsLeftGoroutine: a goroutine of the package's code that
// outlives the tests fails the run with its stack; once it ends, the run
// passes.
func TestReportsLeftGoroutine(t *testing.T) {
	stop := make(chan struct{})
	started := make(chan struct{})
	go block(started, stop)
	<-started
	var out bytes.Buffer
	if code := Run(fakeM{0}, 50*time.Millisecond, Code("skytale/internal/leakcheck."), &out); code != 1 {
		t.Fatalf("exit code %d with a goroutine left, want 1", code)
	}
	if !strings.Contains(out.String(), "leakcheck.block") {
		t.Fatalf("the report does not show the goroutine:\n%s", out.String())
	}
	close(stop)
	out.Reset()
	if code := Run(fakeM{0}, 5*time.Second, Code("skytale/internal/leakcheck."), &out); code != 0 {
		t.Fatalf("exit code %d once the goroutine ended, want 0:\n%s", code, out.String())
	}
	if code := Run(fakeM{3}, time.Millisecond, Code("skytale/internal/leakcheck."), &out); code != 3 {
		t.Fatalf("exit code %d for failed tests, want theirs (3)", code)
	}
}
