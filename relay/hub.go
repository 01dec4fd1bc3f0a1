package relay

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// hub maps channels to their live subscribers. Fan-out takes a snapshot of a
// channel's subscriber list under a read lock and hands the same encoded
// frame to every subscriber's bounded queue; it never blocks on a
// connection.
type hub struct {
	mu    sync.RWMutex // guards the following fields
	chans map[string][]*conn
	bySub map[string]map[*conn]struct{}
	conns map[*conn]struct{}

	delivered      atomic.Uint64 // frames queued on subscribers (metrics.go)
	deliveredBytes atomic.Uint64 // their bytes, once per subscriber
}

func newHub() *hub {
	return &hub{
		chans: make(map[string][]*conn),
		bySub: make(map[string]map[*conn]struct{}),
		conns: make(map[*conn]struct{}),
	}
}

// register adds a new, not yet authenticated connection.
func (h *hub) register(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.conns[c] = struct{}{}
}

// authenticated makes c findable by its subject, unless the subject has
// limit connections already (limit <= 0: no limit).
func (h *hub) authenticated(c *conn, limit int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.bySub[c.sub]
	if limit > 0 && len(m) >= limit {
		return false
	}
	if m == nil {
		m = make(map[*conn]struct{})
		h.bySub[c.sub] = m
	}
	m[c] = struct{}{}
	return true
}

// remove drops c and all its subscriptions.
func (h *hub) remove(c *conn, channels map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range channels {
		h.unsubscribeLocked(ch, c)
	}
	delete(h.conns, c)
	if m := h.bySub[c.sub]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(h.bySub, c.sub)
		}
	}
}

// subscribeIf subscribes c to ch if allowed reports true, checked under
// the hub's lock: a membership removal, which changes the members first
// and then takes this lock to end subscriptions, either sees the new
// subscription or is seen by allowed.
func (h *hub) subscribeIf(ch string, c *conn, allowed func() bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !allowed() {
		return false
	}
	h.subscribeLocked(ch, c)
	return true
}

// subscribeLocked adds c to ch's subscribers. The slice is copied on
// write so fan-out can iterate a snapshot without holding the lock.
func (h *hub) subscribeLocked(ch string, c *conn) {
	old := h.chans[ch]
	next := make([]*conn, len(old), len(old)+1)
	copy(next, old)
	h.chans[ch] = append(next, c)
}

// unsubscribe removes c from ch's subscribers and reports whether
// it was one.
func (h *hub) unsubscribe(ch string, c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.unsubscribeLocked(ch, c)
}

func (h *hub) unsubscribeLocked(ch string, c *conn) bool {
	old := h.chans[ch]
	for i, x := range old {
		if x == c {
			if len(old) == 1 {
				delete(h.chans, ch)
				return true
			}
			next := make([]*conn, 0, len(old)-1)
			next = append(next, old[:i]...)
			h.chans[ch] = append(next, old[i+1:]...)
			return true
		}
	}
	return false
}

// Fanout queues the encoded push frame on every subscriber of ch except
// the connection from (0 for none: a publisher does not get its own
// message back). Subscribers whose queue is full are disconnected as slow
// consumers (backend.Hub).
//
// pb is the lent buffer the frame was built in (backend.LendPushPrefix),
// or nil: it goes back to its pool once every queue is done with the
// frame, and fan-out holds one reference meanwhile.
func (h *hub) Fanout(ch string, frame []byte, pb *backend.PushBuf, from uint64) {
	h.mu.RLock()
	subs := h.chans[ch]
	h.mu.RUnlock()
	n := 0
	if !pb.Holds(frame) {
		pb = nil
	}
	if pb != nil {
		pb.Share()
	}
	now := time.Now().UnixNano()
	for _, c := range subs {
		if from == 0 || c.id != from {
			if pb != nil {
				pb.Ref()
			}
			c.touch(now)
			c.pushLent(frame, pb)
			n++
		}
	}
	pb.Release()
	h.delivered.Add(uint64(n))
	h.deliveredBytes.Add(uint64(n) * uint64(len(frame)))
}

// connsOf returns the live connections of a subject.
func (h *hub) connsOf(sub string) []*conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*conn, 0, len(h.bySub[sub]))
	for c := range h.bySub[sub] {
		out = append(out, c)
	}
	return out
}

// all returns every live connection.
func (h *hub) all() []*conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		out = append(out, c)
	}
	return out
}
