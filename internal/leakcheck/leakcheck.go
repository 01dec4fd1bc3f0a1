// Package leakcheck fails a test binary whose goroutines outlive its
// tests: after the last test, every goroutine that runs this module's code
// (a frame of a package of github.com/skytale-oss/skytale, or one started
// by such a frame) must end within a grace period. A server that was not
// closed, or whose Close returns before its loops stop, shows up here.
package leakcheck

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

const module = "github.com/skytale-oss/skytale/"

// Grace is how long the goroutines of the last tests get to end.
const Grace = 5 * time.Second

// Run runs the tests (m.Run of a TestMain) and returns the exit code: run's
// own, or 1 when it passed but goroutines of this module's code are still
// running after Grace; they are written to w.
func Run(run func() int, w io.Writer) int {
	code := run()
	if code != 0 {
		return code
	}
	if leaked := Wait(Grace); len(leaked) > 0 {
		fmt.Fprintf(w, "leakcheck: %d goroutines outlived the tests:\n\n%s\n", len(leaked), strings.Join(leaked, "\n\n"))
		return 1
	}
	return 0
}

// Wait waits up to wait for this module's goroutines, other than the
// caller's, to end, and returns the stacks of those still running.
func Wait(wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		leaked := Running()
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Running returns the stacks of the goroutines, other than the caller's,
// that run this module's code or were started by it.
func Running() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	gs := strings.Split(string(buf), "\n\n")
	var leaked []string
	for _, g := range gs[1:] { // the first is the caller's
		if ours(g) {
			leaked = append(leaked, g)
		}
	}
	return leaked
}

// ours reports whether a goroutine's stack runs this module's code, leaving
// out the frames of the leak check itself.
func ours(stack string) bool {
	for _, line := range strings.Split(stack, "\n") {
		fn := strings.TrimPrefix(strings.TrimSpace(line), "created by ")
		if strings.HasPrefix(fn, module) && !strings.HasPrefix(fn, module+"internal/leakcheck.") {
			return true
		}
	}
	return false
}
