package sqlitearchive

import (
	"context"
	"sync"
	"sync/atomic"
)

// commitMark lets a reader wait until everything the sequencer has handled
// so far is committed.
//
// An application message is pushed to live subscribers when it is
// sequenced, before its commit. A client that subscribes and then catches
// up through /v1/sync could otherwise miss a message pushed just before its
// subscription took effect whose commit had not yet finished when the read
// ran: pushed to others, but not to it, and not yet in the archive. A read
// therefore first waits for the commit of everything sequenced before it
// started (no wait at all when the archive is idle), so every message is
// either pushed to a subscriber or served by a read that starts after the
// subscription's ok.
type commitMark struct {
	sequenced atomic.Uint64 // requests the sequencer has taken
	committed atomic.Uint64 // requests the committer has answered

	mu sync.Mutex
	ch chan struct{} // closed when committed next moves

	// waiting is told (without blocking) each time a reader starts to
	// wait, so a committer that lingers to gather more work goes on; and
	// when work piles up (wake).
	waiting chan struct{}
}

func newCommitMark() *commitMark {
	return &commitMark{ch: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

// taken counts a request the sequencer is about to handle; it runs before
// the request can be pushed to anyone.
func (m *commitMark) taken() { m.sequenced.Add(1) }

// done counts n requests the committer has committed and answered, in the
// order the sequencer took them.
func (m *commitMark) done(n int) {
	m.committed.Add(uint64(n))
	m.mu.Lock()
	close(m.ch)
	m.ch = make(chan struct{})
	m.mu.Unlock()
}

// wake tells a lingering committer to go on.
func (m *commitMark) wake() {
	select {
	case m.waiting <- struct{}{}:
	default:
	}
}

// wait returns once every request taken before the call is committed, or
// with ctx's error.
func (m *commitMark) wait(ctx context.Context) error {
	target := m.sequenced.Load()
	for {
		if m.committed.Load() >= target {
			return nil
		}
		m.mu.Lock()
		ch := m.ch
		m.mu.Unlock()
		if m.committed.Load() >= target {
			return nil
		}
		m.wake()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
