package ratelimit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestKeyedBucket(t *testing.T) {
	k := NewKeyed(10*time.Second, 3, 100)
	for i := range 3 {
		if ok, _ := k.Allow("a", t0); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, retry := k.Allow("a", t0)
	if ok || retry <= 0 || retry > 10*time.Second {
		t.Fatalf("past the burst: ok %v retry %v", ok, retry)
	}
	// Other keys have their own buckets.
	if ok, _ := k.Allow("b", t0); !ok {
		t.Fatal("another key was refused")
	}
	// A refused request takes nothing: one token is back after 10 s.
	if ok, _ := k.Allow("a", t0.Add(10*time.Second)); !ok {
		t.Fatal("no token after the refill interval")
	}
	if ok, _ := k.Allow("a", t0.Add(10*time.Second)); ok {
		t.Fatal("two tokens after one refill interval")
	}
	var nilK *Keyed
	if ok, _ := nilK.Allow("a", t0); !ok || nilK.Len() != 0 {
		t.Fatal("a nil Keyed refused")
	}
}

// TestKeyedBoundedMemory: a flood of distinct keys never tracks more than
// maxKeys, and idle (full) buckets are forgotten.
func TestKeyedBoundedMemory(t *testing.T) {
	k := NewKeyed(time.Second, 5, 100)
	for i := range 100_000 {
		k.Allow(fmt.Sprint("addr-", i), t0)
		if n := k.Len(); n > 100 {
			t.Fatalf("%d keys tracked after %d distinct ones", n, i+1)
		}
	}
	// Five seconds later every bucket is full again: all are forgotten at
	// the next request.
	k.Allow("late", t0.Add(5*time.Second))
	if n := k.Len(); n != 1 {
		t.Fatalf("%d keys tracked once the others are idle", n)
	}
}

// TestKeyedKeepsBusyBuckets: a drained bucket is not forgotten while other
// keys come and go below the cap, so waiting out the refill is the only
// way to get tokens back.
func TestKeyedKeepsBusyBuckets(t *testing.T) {
	k := NewKeyed(time.Minute, 2, 100)
	k.Allow("hog", t0)
	k.Allow("hog", t0)
	for i := range 99 {
		k.Allow(fmt.Sprint("other-", i), t0.Add(time.Second))
	}
	if ok, _ := k.Allow("hog", t0.Add(2*time.Second)); ok {
		t.Fatal("a drained bucket was refilled by other keys' traffic")
	}
	// Idle for the refill time of the whole burst: forgotten, full again.
	if ok, _ := k.Allow("hog", t0.Add(2*time.Second+2*time.Minute)); !ok {
		t.Fatal("no token after the bucket refilled")
	}
}

func TestKeyedConcurrent(t *testing.T) {
	k := NewKeyed(time.Hour, 50, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if ok, _ := k.Allow("one", t0); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 50 {
		t.Fatalf("%d allowed from a burst of 50", allowed)
	}
}

func TestAddrKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:4431":                       "192.0.2.7",
		"192.0.2.7":                            "192.0.2.7",
		"[::ffff:192.0.2.7]:80":                "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443":           "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff:ffff:ffff:ffff]:1": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:1":                     "fe80::/64",
		"[::1]:5000":                           "::/64",
		"not an address":                       "not an address",
	} {
		if got := AddrKey(in); got != want {
			t.Errorf("AddrKey(%q) = %q, want %q", in, got, want)
		}
	}
}
