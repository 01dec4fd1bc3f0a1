// The fan-out case: one publisher, n subscribers on one channel, either
// k messages outstanding per subscriber (throughput) or paced at a rate
// (latency at scale).

package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// fanout runs one publisher to n subscribers with at most k messages
// outstanding per subscriber, or, with rate, at rate messages a second.
func fanout(ctx context.Context, t target, o options, n, k int, rate float64) (result, error) {
	subs, err := t.subscribers(ctx, n)
	if err != nil {
		return result{}, err
	}
	defer func() {
		for _, s := range subs {
			s.close()
		}
	}()
	pub, err := t.publisher(ctx)
	if err != nil {
		return result{}, err
	}
	defer pub.close()

	var measuring atomic.Bool
	received := make([]atomic.Int64, n)
	hists := make([]*hist, n)
	batches := make([]*hist, n)
	var wg sync.WaitGroup
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	for i, s := range subs {
		hists[i], batches[i] = new(hist), new(hist)
		wg.Go(func() {
			h, bh := hists[i], batches[i]
			for {
				var mh *hist
				if measuring.Load() {
					mh = h
				}
				frames, err := s.receive(rctx, mh)
				if err != nil {
					return
				}
				if frames == 0 {
					continue
				}
				if measuring.Load() {
					bh.add(int64(frames))
				}
				received[i].Add(int64(frames))
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		})
	}
	minRecv := func() int64 {
		m := int64(math.MaxInt64)
		for i := range received {
			m = min(m, received[i].Load())
		}
		return m
	}
	var sent int64
	stall := time.NewTimer(time.Hour)
	defer stall.Stop()
	publish := func(until time.Time) error {
		for time.Now().Before(until) {
			room := int64(k) - (sent - minRecv())
			if room <= 0 {
				stall.Reset(time.Second)
				select {
				case <-wake:
				case <-stall.C:
					if f, ok := pub.(interface{ failure() error }); ok && f.failure() != nil {
						return f.failure()
					}
					return fmt.Errorf("no delivery for a second (%d sent, %d received by the slowest subscriber)", sent, minRecv())
				}
				continue
			}
			for range room {
				if err := pub.publish(ctx); err != nil {
					return err
				}
				sent++
			}
		}
		return nil
	}
	if rate > 0 {
		publish = pacedPublisher(pub, rate, &sent, minRecv)
	}
	// Warm up, then measure.
	if err := publish(time.Now().Add(time.Second)); err != nil {
		return result{}, err
	}
	base := make([]int64, n)
	for i := range received {
		base[i] = received[i].Load()
	}
	measuring.Store(true)
	cpu0 := cpuTime()
	t0 := time.Now()
	if err := publish(t0.Add(o.round)); err != nil {
		return result{}, err
	}
	elapsed := time.Since(t0)
	cpu := cpuTime() - cpu0
	measuring.Store(false)
	var delivered int64
	for i := range received {
		delivered += received[i].Load() - base[i]
	}
	cancel()
	for _, s := range subs {
		s.close()
	}
	pub.close()
	wg.Wait()
	var h, bh hist
	for i := range hists {
		h.merge(hists[i])
		bh.merge(batches[i])
	}
	r := result{
		rate: float64(delivered) / elapsed.Seconds(), unit: "delivered/s",
		p50: time.Duration(h.quantile(0.5)), p99: time.Duration(h.quantile(0.99)), p999: time.Duration(h.quantile(0.999)),
		framesPerMsg: t.wireMessages(), batchP50: int(bh.quantile(0.5)), batchP99: int(bh.quantile(0.99)), batchMax: int(bh.quantile(1)),
	}
	if o.clientCPU {
		r.clientCPU = cpu.Seconds() / elapsed.Seconds()
	}
	if m := bh.count(); m > 0 {
		var frames float64
		for i, c := range bh.b {
			frames += float64(c) * float64(lowOf(i))
		}
		r.batchMean, r.messages = frames/float64(m), m
	}
	return r, nil
}
