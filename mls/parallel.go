package mls

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Spreading independent work over the available CPUs.
//
// Joining a large group, and committing to or adding members to a tree
// with many blank parents, do thousands of independent signature checks,
// hashes and HPKE encryptions. The helpers here run such work on a fixed
// pool of goroutines for the duration of one call: every goroutine they
// start has finished when they return. Errors are deterministic: when
// several items fail, the error returned is that of the lowest index, so
// the same bad input always gives the same error, whatever the schedule.

// parallelFor calls f(i) for every i in [0, n) and returns the error of the
// lowest i for which f fails, or nil. Below minParallel items it runs
// inline on the calling goroutine. f must be safe to call concurrently for
// distinct i.
func parallelFor(n, minParallel int, f func(i int) error) error {
	return parallelChunks(n, minParallel, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	})
}

// parallelChunks cuts [0, n) into contiguous chunks and calls f(lo, hi) for
// each, on up to GOMAXPROCS goroutines that take the chunks in turn, the
// calling goroutine among them; below minParallel items (or with one CPU)
// it calls f(0, n) inline. f must return the error of the lowest index of
// its chunk that fails. parallelChunks returns the error of the lowest
// chunk that failed, which is then that of the lowest failing index: once
// a chunk has failed, the chunks above it are skipped, since they cannot
// hold a lower failure, but every chunk below it runs.
//
// f must be safe to call concurrently for disjoint chunks.
func parallelChunks(n, minParallel int, f func(lo, hi int) error) error {
	workers := runtime.GOMAXPROCS(0)
	if n <= 0 {
		return nil
	}
	if n < max(minParallel, 2) || workers < 2 {
		return f(0, n)
	}
	// Several chunks per worker even out chunks of unequal cost.
	chunk := max(1, n/(workers*8))
	chunks := (n + chunk - 1) / chunk
	workers = min(workers, chunks)
	errs := make([]error, chunks)
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Int64 // lowest failed chunk so far, chunks if none
	)
	failed.Store(int64(chunks))
	run := func() {
		defer wg.Done()
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			if int64(c) > failed.Load() {
				continue
			}
			lo := c * chunk
			if err := f(lo, min(lo+chunk, n)); err != nil {
				errs[c] = err
				for {
					old := failed.Load()
					if int64(c) >= old || failed.CompareAndSwap(old, int64(c)) {
						break
					}
				}
			}
		}
	}
	wg.Add(workers)
	for range workers - 1 {
		go run()
	}
	run()
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Below these sizes work runs inline. A signature check, an HPKE
// encryption or a KEM key derivation costs tens of microseconds, against
// about one for starting a goroutine, so a handful of them are worth
// spreading; cheaper per-node work (hashes, structure checks) only pays
// for the goroutines in larger trees.
const (
	minParallelSignatures = 16
	minParallelHPKE       = 4
	minParallelKEM        = 4
	minParallelNodes      = 64
	// A scan for repeated keys reads a few bytes per node.
	minParallelKeyScan = 8192
)
