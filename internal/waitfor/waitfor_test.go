package waitfor

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestPollReturnsOnceTheConditionHolds: the poll ends at the first check
// that passes, soon after the event, and does not wait the timeout out.
func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		event := start.Add(3 * time.Second)
		checks := 0
		err := poll(time.Minute, func() error {
			checks++
			if time.Now().Before(event) {
				return errNotYet
			}
			return nil
		})
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if late := time.Since(event); late < 0 || late > maxInterval {
			t.Fatalf("the poll saw the event %v after it, want within %v", late, maxInterval)
		}
		// The interval grows: three seconds take far fewer checks than
		// polling at the first interval would.
		if most := int(3*time.Second/maxInterval) + 20; checks > most {
			t.Fatalf("%d checks in 3s, want at most %d", checks, most)
		}
	})
}

// TestPollTimesOutWithTheLastError: after the timeout the poll gives up
// with the error of its last check, which tells the state at the end.
func TestPollTimesOutWithTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		n := 0
		err := poll(10*time.Second, func() error {
			n++
			return fmt.Errorf("check %d", n)
		})
		if want := fmt.Sprintf("check %d", n); err == nil || err.Error() != want {
			t.Fatalf("poll: %v, want %q", err, want)
		}
		if d := time.Since(start); d < 10*time.Second || d > 10*time.Second+maxInterval {
			t.Fatalf("the poll gave up after %v, want the timeout of 10s", d)
		}
	})
}

// TestPollChecksFirst: a condition that holds already costs no sleep.
func TestPollChecksFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := poll(time.Second, func() error { return nil }); err != nil || time.Since(start) != 0 {
			t.Fatalf("poll: %v after %v", err, time.Since(start))
		}
	})
}

func TestTrueAndNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		True(t, time.Second, func() bool { n++; return n == 3 }, "never three")
		Nil(t, time.Second, func() error {
			if n++; n < 6 {
				return errors.New("not six")
			}
			return nil
		})
	})
}
