// What a run measures, and the histograms it measures with.

package main

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// result is one measurement.
type result struct {
	rate         float64 // delivered/s, or acks/s
	unit         string
	p50, p99     time.Duration
	p999         time.Duration
	batchMean    float64 // frames per message; 0 when not measured
	batchP50     int
	batchP99     int
	batchMax     int
	messages     int64
	framesPerMsg bool
	clientCPU    float64 // this process's CPU over the measurement, in cores; 0 when not shown
	perFlush     float64 // durable: acks per flush of the archive (-metrics); 0 when not measured
	conns        int     // idle: the connections held
	grown        int64   // idle: what the server's resident memory grew by, in bytes
}

func (r result) String() string {
	if r.conns > 0 {
		return fmt.Sprintf("%10.0f %-12s (%d connections, +%.1f MiB resident)", r.rate, r.unit, r.conns, float64(r.grown)/(1<<20))
	}
	s := fmt.Sprintf("%10.0f %-12s p50 %8s  p99 %8s  p99.9 %8s", r.rate, r.unit, round(r.p50), round(r.p99), round(r.p999))
	if r.framesPerMsg {
		s += fmt.Sprintf("  frames/message mean %.1f p50 %d p99 %d max %d", r.batchMean, r.batchP50, r.batchP99, r.batchMax)
	}
	if r.perFlush > 0 {
		s += fmt.Sprintf("  %.1f acks/flush", r.perFlush)
	}
	if r.clientCPU > 0 {
		s += fmt.Sprintf("  client %.2f cores", r.clientCPU)
	}
	return s
}

func round(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
	return fmt.Sprintf("%.2fms", float64(d)/1e6)
}

// median takes each figure's median over the rounds.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := rs[0]
	out.rate = pick(func(r result) float64 { return r.rate })
	out.p50 = time.Duration(pick(func(r result) float64 { return float64(r.p50) }))
	out.p99 = time.Duration(pick(func(r result) float64 { return float64(r.p99) }))
	out.p999 = time.Duration(pick(func(r result) float64 { return float64(r.p999) }))
	out.batchMean = pick(func(r result) float64 { return r.batchMean })
	out.batchP50 = int(pick(func(r result) float64 { return float64(r.batchP50) }))
	out.batchP99 = int(pick(func(r result) float64 { return float64(r.batchP99) }))
	out.batchMax = int(pick(func(r result) float64 { return float64(r.batchMax) }))
	out.clientCPU = pick(func(r result) float64 { return r.clientCPU })
	out.perFlush = pick(func(r result) float64 { return r.perFlush })
	return out
}

// hist is a log-linear histogram of durations in nanoseconds: 32 linear
// steps per power of two, so a percentile is within about 3 %.
type hist struct{ b [64 * 32]int64 }

func bucketOf(v int64) int {
	if v < 32 {
		return int(max(v, 0))
	}
	e := 63 - bits.LeadingZeros64(uint64(v)) // v in [2^e, 2^(e+1))
	return (e-4)*32 + int(v>>(e-5)) - 32
}

func lowOf(b int) int64 {
	if b < 32 {
		return int64(b)
	}
	e := b/32 + 4
	return int64(b%32+32) << (e - 5)
}

func (h *hist) add(v int64) { h.b[bucketOf(v)]++ }
func (h *hist) merge(o *hist) {
	for i, n := range o.b {
		h.b[i] += n
	}
}

func (h *hist) count() int64 {
	var n int64
	for _, c := range h.b {
		n += c
	}
	return n
}

func (h *hist) quantile(q float64) int64 {
	total := h.count()
	if total == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(total)))
	var n int64
	for i, c := range h.b {
		n += c
		if n >= want {
			return lowOf(i)
		}
	}
	return lowOf(len(h.b) - 1)
}
