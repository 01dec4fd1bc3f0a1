package httpx

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/skytale-oss/skytale/internal/clientaddr"
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
//
// MaxPerNet caps an address's network (an IPv4 /24, an IPv6 /64) the same
// way, so a host with a block of addresses is one client. MaxIdlePerAddr
// bounds the idle keep-alive connections of one address: it needs the
// HTTP server's ConnState hook set to [LimitListener.ConnState], and
// closes the address's oldest idle connection when one more goes idle.
type LimitListener struct {
	net.Listener
	max, perAddr int
	perNet       int
	idlePerAddr  int
	exempt       func(netip.Addr) bool

	sem       chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	mu     sync.Mutex
	byAddr map[netip.Addr]int
	byNet  map[netip.Prefix]int
	idle   map[netip.Addr]*list.List // of *limitConn, oldest idle first
	active int
}

// LimitOptions configure [NewLimitListener].
type LimitOptions struct {
	// Max is the cap on open connections; 0 or less means no cap.
	Max int
	// MaxPerAddr is the cap per remote address (per /64 for IPv6); 0 or
	// less means no cap.
	MaxPerAddr int
	// MaxPerNet is the cap per IPv4 /24 or IPv6 /64; 0 or less means no
	// cap.
	MaxPerNet int
	// MaxIdlePerAddr bounds the idle keep-alive connections per remote
	// address (per /64 for IPv6), with the server's ConnState hook set to
	// the listener's; 0 or less means no cap.
	MaxIdlePerAddr int
	// ExemptAddr, if set, exempts the addresses it reports true for from
	// MaxPerAddr; a TLS proxy on loopback, say, is every client at once.
	ExemptAddr func(netip.Addr) bool
}

// NewLimitListener wraps l.
func NewLimitListener(l net.Listener, o LimitOptions) *LimitListener {
	ll := &LimitListener{Listener: l, max: o.Max, perAddr: o.MaxPerAddr, perNet: o.MaxPerNet, idlePerAddr: o.MaxIdlePerAddr,
		exempt: o.ExemptAddr, done: make(chan struct{}), byAddr: map[netip.Addr]int{}, byNet: map[netip.Prefix]int{},
		idle: map[netip.Addr]*list.List{}}
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
		key, network, counted := l.addrKey(c.RemoteAddr())
		l.mu.Lock()
		if counted && (l.perAddr > 0 && l.byAddr[key] >= l.perAddr || l.perNet > 0 && l.byNet[network] >= l.perNet) {
			l.mu.Unlock()
			c.Close()
			l.release()
			continue
		}
		if counted {
			l.byAddr[key]++
			l.byNet[network]++
		}
		l.active++
		l.mu.Unlock()
		return &limitConn{Conn: c, l: l, key: key, network: network, counted: counted}, nil
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

// addrKey is the per-address and per-network bucket of a remote address,
// and whether the caps apply to it.
func (l *LimitListener) addrKey(a net.Addr) (netip.Addr, netip.Prefix, bool) {
	if l.perAddr <= 0 && l.perNet <= 0 && l.idlePerAddr <= 0 {
		return netip.Addr{}, netip.Prefix{}, false
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}, netip.Prefix{}, false
	}
	ip := ap.Addr().Unmap()
	if l.exempt != nil && l.exempt(ip) {
		return netip.Addr{}, netip.Prefix{}, false
	}
	return ratelimit.ClientAddr(ip), clientaddr.Net(ip), true
}

// ConnState is the http.Server hook that counts idle keep-alive
// connections for MaxIdlePerAddr: when one more of an address's
// connections goes idle than the cap, its oldest idle one is closed.
func (l *LimitListener) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*limitConn)
	if !ok || !c.counted || l.idlePerAddr <= 0 {
		return
	}
	var victim *limitConn
	l.mu.Lock()
	if st == http.StateIdle {
		if c.idleElem == nil {
			q := l.idle[c.key]
			if q == nil {
				q = list.New()
				l.idle[c.key] = q
			}
			c.idleElem = q.PushBack(c)
			if q.Len() > l.idlePerAddr {
				victim = q.Front().Value.(*limitConn)
				l.unidleLocked(victim)
			}
		}
	} else {
		l.unidleLocked(c)
	}
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
	}
}

// unidleLocked takes c off its address's idle list; l.mu is held.
func (l *LimitListener) unidleLocked(c *limitConn) {
	if c.idleElem == nil {
		return
	}
	q := l.idle[c.key]
	q.Remove(c.idleElem)
	c.idleElem = nil
	if q.Len() == 0 {
		delete(l.idle, c.key)
	}
}

type limitConn struct {
	net.Conn
	l        *LimitListener
	key      netip.Addr
	network  netip.Prefix
	counted  bool
	once     sync.Once
	idleElem *list.Element // in l.idle[key] while idle; guarded by l.mu
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.counted {
			if c.l.byAddr[c.key]--; c.l.byAddr[c.key] <= 0 {
				delete(c.l.byAddr, c.key)
			}
			if c.l.byNet[c.network]--; c.l.byNet[c.network] <= 0 {
				delete(c.l.byNet, c.network)
			}
			c.l.unidleLocked(c)
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
