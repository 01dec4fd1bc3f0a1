package httpx

import (
	"net"
	"net/netip"
	"sync"

	"github.com/skytale-oss/skytale/internal/ratelimit"
)

// LimitListener caps the connections a listener holds open at once, in
// total and per remote address, so connections cannot exhaust the
// process's file descriptors and no one client can take every slot.
//
// At the total cap, Accept waits: a new connection stays in the kernel's
// accept queue until an open one closes (the servers' read and idle
// timeouts end the ones that hang), so a burst is served late rather than
// refused. A connection from an address that already holds MaxPerAddr is
// closed at once, before any byte is read: waiting would let that one
// address hold up everyone queued behind it.
//
// A connection keeps its slot until it is closed, also after an HTTP
// server hands it over (hijacks it) for a WebSocket.
type LimitListener struct {
	net.Listener
	max, perAddr int
	exempt       func(netip.Addr) bool

	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu     sync.Mutex
	byAddr map[netip.Addr]int
	active int
}

// LimitOptions configure [NewLimitListener].
type LimitOptions struct {
	// Max is the cap on open connections; 0 or less means no cap.
	Max int
	// MaxPerAddr is the cap per remote address (per /64 for IPv6); 0 or
	// less means no cap.
	MaxPerAddr int
	// ExemptAddr, if set, exempts the addresses it reports true for from
	// MaxPerAddr; a TLS proxy on loopback, say, is every client at once.
	ExemptAddr func(netip.Addr) bool
}

// NewLimitListener wraps l.
func NewLimitListener(l net.Listener, o LimitOptions) *LimitListener {
	ll := &LimitListener{Listener: l, max: o.Max, perAddr: o.MaxPerAddr, exempt: o.ExemptAddr,
		done: make(chan struct{}), byAddr: map[netip.Addr]int{}}
	if o.Max > 0 {
		ll.sem = make(chan struct{}, o.Max)
	}
	return ll
}

// Accept waits for a free slot, then for a connection.
func (l *LimitListener) Accept() (net.Conn, error) {
	for {
		if l.sem != nil {
			select {
			case l.sem <- struct{}{}:
			case <-l.done:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.release()
			return nil, err
		}
		key, counted := l.addrKey(c.RemoteAddr())
		l.mu.Lock()
		if counted && l.byAddr[key] >= l.perAddr {
			l.mu.Unlock()
			c.Close()
			l.release()
			continue
		}
		if counted {
			l.byAddr[key]++
		}
		l.active++
		l.mu.Unlock()
		return &limitConn{Conn: c, l: l, key: key, counted: counted}, nil
	}
}

// Close closes the listener and ends a waiting Accept.
func (l *LimitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Active returns how many accepted connections are open.
func (l *LimitListener) Active() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.active
}

func (l *LimitListener) release() {
	if l.sem != nil {
		<-l.sem
	}
}

// addrKey is the per-address bucket of a remote address, and whether the
// per-address cap applies to it.
func (l *LimitListener) addrKey(a net.Addr) (netip.Addr, bool) {
	if l.perAddr <= 0 {
		return netip.Addr{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, false
	}
	ip := ap.Addr().Unmap()
	if l.exempt != nil && l.exempt(ip) {
		return netip.Addr{}, false
	}
	return ratelimit.ClientAddr(ip), true
}

type limitConn struct {
	net.Conn
	l       *LimitListener
	key     netip.Addr
	counted bool
	once    sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.counted {
			if c.l.byAddr[c.key]--; c.l.byAddr[c.key] <= 0 {
				delete(c.l.byAddr, c.key)
			}
		}
		c.l.active--
		c.l.mu.Unlock()
		c.l.release()
	})
	return err
}

// CloseWrite half-closes a TCP connection, as the HTTP server does before
// closing one it answered with an error.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
