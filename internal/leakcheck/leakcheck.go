// Package leakcheck finds the goroutines a package's tests leave running:
// a TestMain runs the tests, then waits a moment for goroutines of the
// package's own code to end, and fails the run with their stacks if any
// is left.
package leakcheck

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// M is what a TestMain is given (*testing.M), without importing testing
// into library code.
type M interface{ Run() int }

// Main runs the tests of m and exits: with their code, or 1 when they
// passed but a goroutine whose stack matches ours is still running after
// wait. It is a package's TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m, 5*time.Second, leakcheck.Code("skytale/relay.")) }
func Main(m M, wait time.Duration, ours func(stack string) bool) {
	os.Exit(Run(m, wait, ours, os.Stderr))
}

// Run is Main without the exit: it returns the exit code and writes the
// leaked stacks to w.
func Run(m M, wait time.Duration, ours func(stack string) bool, w io.Writer) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	if leaked := Wait(wait, ours); leaked != "" {
		fmt.Fprintf(w, "goroutines left running after the tests:\n%s\n", leaked)
		return 1
	}
	return 0
}

// Wait returns, once none is left or wait has passed, the stacks of the
// running goroutines that ours matches, "" for none.
func Wait(wait time.Duration, ours func(stack string) bool) string {
	deadline := time.Now().Add(wait)
	for {
		leaked := Running(ours)
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Running returns the stacks of the running goroutines that ours
// matches, but the caller's and the tests' own (the test binary's main
// goroutine and those running a test).
func Running(ours func(stack string) bool) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n")[1:] { // the first is the caller's
		if strings.Contains(g, "testing.(*M).Run(") || strings.Contains(g, "testing.tRunner(") {
			continue
		}
		if ours(g) {
			out = append(out, g)
		}
	}
	return out
}

// Code matches a stack that runs a function of a package whose path
// contains pkg (for example "skytale/relay."), outside its test files.
func Code(pkg string) func(stack string) bool {
	return func(stack string) bool {
		for _, line := range strings.Split(stack, "\n") {
			if strings.Contains(line, pkg) && !strings.Contains(line, "_test.go") && !strings.Contains(line, ".Test") {
				return true
			}
		}
		return false
	}
}
