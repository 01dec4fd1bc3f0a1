// Package waitfor lets a test wait for something another goroutine or
// process makes happen, instead of sleeping for a guessed time: it polls a
// condition, first often and then less, until the condition holds or a
// timeout passes, and fails the test with a message on timeout.
//
// Use it where the test has no signal to wait on (a channel, a callback);
// where it has one, wait on that. It never measures how long the wait took.
package waitfor

import (
	"errors"
	"time"
)

// First and most interval between two polls: the first polls come soon,
// so a fast event costs little, and then the interval doubles up to the
// most, so a slow one does not keep a core busy.
const (
	firstInterval = 100 * time.Microsecond
	maxInterval   = 50 * time.Millisecond
)

// True waits until cond returns true, polling it on the calling goroutine
// (so cond may call t.Fatal). After timeout it fails t with the message
// made from format and args.
func True(t T, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if poll(timeout, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) != nil {
		t.Fatalf(format, args...)
	}
}

// Nil waits until check returns nil, polling it on the calling goroutine
// (so check may call t.Fatal). After timeout it fails t with the last
// error check returned, so the message tells the state at the end of the
// wait: check says what it still waits for in that error.
func Nil(t T, timeout time.Duration, check func() error) {
	t.Helper()
	if err := poll(timeout, check); err != nil {
		t.Fatal(err)
	}
}

// T is the part of testing.TB these helpers use (the package does not
// import testing: library code of this module never does).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var errNotYet = errors.New("not yet")

// Poll is [Nil] for a caller that is not a [testing.TB] (a testscript
// command) or must not fail the test itself (another goroutine): it
// returns nil once check does, or check's last error after timeout.
func Poll(timeout time.Duration, check func() error) error { return poll(timeout, check) }

// poll calls check until it returns nil, and returns nil then; once
// timeout has passed since the start it returns check's last error.
func poll(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	interval := firstInterval
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
		interval = min(2*interval, maxInterval)
	}
}
