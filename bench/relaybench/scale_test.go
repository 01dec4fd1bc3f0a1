package main

import (
	"os"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestScaleAgainstStack: the idle and paced cases run against a real
// directory and relay over loopback sockets (in this process, whose
// memory the idle case reads).
func TestScaleAgainstStack(t *testing.T) {
	st := skytaletest.NewStack(t)
	o := options{api: st.APIURL, relay: st.RelayURL, size: 256, rounds: 1, round: 300 * time.Millisecond, batch: true,
		idle: []int{20}, active: []int{30}, rate: 40, pids: pidsFlag{"skytale": os.Getpid()}}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	// Without the server's process the idle case cannot say anything.
	o.pids, o.active = pidsFlag{}, nil
	if err := run(o); err == nil {
		t.Fatal("an idle case without -pid ran")
	}
}

// TestRSS reads this process's resident memory.
func TestRSS(t *testing.T) {
	n, err := rss(os.Getpid())
	if err != nil || n < 1<<20 {
		t.Fatalf("rss = %d, %v", n, err)
	}
	if _, err := rss(1 << 30); err == nil {
		t.Fatal("the memory of a process that does not exist")
	}
}

// TestPidsFlag: NAME=PID, nothing else.
func TestPidsFlag(t *testing.T) {
	f := pidsFlag{}
	if err := f.Set("skytale=42"); err != nil || f["skytale"] != 42 {
		t.Fatalf("%v %v", f, err)
	}
	for _, bad := range []string{"skytale", "=4", "skytale=", "skytale=-1", "skytale=x"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
