package httpx

import "sync"

// Gate admits requests until it is closed, and lets the closer wait for
// the ones in flight. The zero value is an open gate.
type Gate struct {
	mu     sync.Mutex // guards closed and adding to active
	closed bool
	active sync.WaitGroup
}

// Enter admits a request and reports true, or reports false once the gate
// is closed. Every admitted request must call Leave.
func (g *Gate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.active.Add(1)
	return true
}

// Leave ends a request that Enter admitted.
func (g *Gate) Leave() { g.active.Done() }

// Close closes the gate. It reports false if the gate was already closed.
func (g *Gate) Close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	return true
}

// Closed reports whether Close was called.
func (g *Gate) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Drained returns a channel that is closed once every admitted request has
// left. Call it after Close.
func (g *Gate) Drained() <-chan struct{} {
	done := make(chan struct{})
	go func() { g.active.Wait(); close(done) }()
	return done
}
