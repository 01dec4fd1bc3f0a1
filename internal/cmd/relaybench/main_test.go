package main

import (
	"testing"
	"time"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestHistQuantiles: the histogram's percentiles are within its 3 % steps.
func TestHistQuantiles(t *testing.T) {
	var h hist
	for v := int64(1); v <= 100000; v++ {
		h.add(v * 1000)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := q * 1e8
		got := float64(h.quantile(q))
		if got < want*0.96 || got > want*1.01 {
			t.Errorf("p%v = %v, want about %v", q*100, got, want)
		}
	}
	for v := range int64(5000) {
		if lowOf(bucketOf(v)) > v || bucketOf(lowOf(bucketOf(v))) != bucketOf(v) {
			t.Fatalf("bucket of %d starts at %d", v, lowOf(bucketOf(v)))
		}
	}
}

// TestRunAgainstStack: every scenario runs against a real directory and
// relay over loopback sockets, with accounts from open signup.
func TestRunAgainstStack(t *testing.T) {
	st := skytaletest.NewStack(t)
	o := options{api: st.APIURL, relay: st.RelayURL, subs: []int{1, 3}, outstanding: 8, size: 1024,
		rounds: 1, round: 200 * time.Millisecond, batch: true, durable: []durableCase{{2, 4}, {1, 1}}, latency: true}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
}
