package httpx

import (
	"container/list"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/skytale-oss/skytale/internal/clientaddr"
	"github.com/skytale-oss/skytale/internal/ratelimit"
)

// LimitListener caps the connections a listener holds open at once, in
// total and per remote address, so connections cannot exhaust the
// process's file descriptors and no one client can take every slot.
//
// At the total cap, a new connection takes the slot of a quiet one, which
// is closed: one that has sent nothing since it connected, or an idle
// keep-alive connection, quiet for at least quietGrace (this needs the
// HTTP server's ConnState hook set to [LimitListener.ConnState]; a client
// retries a request on an idle connection that closes). The victim is the
// connection quiet longest of the network (IPv4 /24, IPv6 /64) that holds
// the most connections, so a crowd's connections go before those of a
// network with a few, and connections that hold a slot and say nothing,
// from however many addresses, cannot keep a client out. When
// every connection is busy (a request in progress, or handed over for a
// WebSocket), Accept waits, the new connection with it, until one closes
// (the servers' read and idle timeouts end the ones that hang), so a
// burst is served late rather than refused. A connection from an address
// that already holds MaxPerAddr is
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
	// quiet holds, per network, the connections that are new (nothing
	// read yet) or idle between requests, quiet longest first: the ones a
	// newcomer at the total cap may take the slot of. Connections the caps
	// do not count are under the zero Prefix.
	quiet     map[netip.Prefix]*list.List
	active    int
	uncounted int // connections the caps do not count
}

// quietGrace is how long a connection must have been quiet before a
// newcomer at the total cap takes its slot: a client that just connected
// may not have been read yet on a busy machine, while the connections of a
// crowd that holds slots have been quiet for seconds.
const quietGrace = time.Second

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
		idle: map[netip.Addr]*list.List{}, quiet: map[netip.Prefix]*list.List{}}
	if o.Max > 0 {
		ll.sem = make(chan struct{}, o.Max)
	}
	return ll
}

// Accept waits for a connection, then for a slot for it: a free one, or
// the one of the connection quiet longest, which it closes.
func (l *LimitListener) Accept() (net.Conn, error) {
	for {
		got := l.sem == nil
		if !got {
			select {
			case l.sem <- struct{}{}:
				got = true
			default:
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			if got {
				l.release()
			}
			return nil, err
		}
		key, network, counted := l.addrKey(c.RemoteAddr())
		if !got {
			// Refused for its address, it takes no one's slot.
			if counted && l.overAddrCaps(key, network) {
				c.Close()
				continue
			}
			if !l.makeRoom() {
				c.Close()
				return nil, net.ErrClosed
			}
		}
		l.mu.Lock()
		if counted && l.overAddrCapsLocked(key, network) {
			l.mu.Unlock()
			c.Close()
			l.release()
			continue
		}
		if counted {
			l.byAddr[key]++
			l.byNet[network]++
		} else {
			l.uncounted++
		}
		l.active++
		l.mu.Unlock()
		return &limitConn{Conn: c, l: l, key: key, network: network, counted: counted}, nil
	}
}

// overAddrCaps reports whether an address or its network holds its cap.
func (l *LimitListener) overAddrCaps(key netip.Addr, network netip.Prefix) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.overAddrCapsLocked(key, network)
}

func (l *LimitListener) overAddrCapsLocked(key netip.Addr, network netip.Prefix) bool {
	return l.perAddr > 0 && l.byAddr[key] >= l.perAddr || l.perNet > 0 && l.byNet[network] >= l.perNet
}

// makeRoom takes a slot for a connection accepted at the total cap: it
// closes a connection quiet for quietGrace (the one quiet longest of the
// network holding the most connections), or waits for a slot to free. It
// reports false if the listener closed meanwhile.
func (l *LimitListener) makeRoom() bool {
	for {
		var wait <-chan time.Time
		l.mu.Lock()
		victim, d := l.victimLocked()
		if victim != nil {
			l.unquietLocked(victim)
		} else if d > 0 {
			wait = time.After(d)
		}
		l.mu.Unlock()
		if victim != nil {
			victim.Close() // gives its slot back
		}
		select {
		case l.sem <- struct{}{}:
			return true
		case <-wait:
		case <-l.done:
			return false
		}
	}
}

// victimLocked picks the connection a newcomer at the cap takes the slot
// of: the quiet longest of the network that holds the most connections
// among those with a quiet one (the oldest quiet first between equals),
// once it has been quiet for quietGrace. Until then it reports how long
// that is (0: nothing is quiet). A network with a few connections is not
// picked because its quiet one is older than a crowd's: the crowd's go
// first, however quickly it replaces them. l.mu is held.
func (l *LimitListener) victimLocked() (victim *limitConn, wait time.Duration) {
	held := -1
	var front *limitConn
	for network, q := range l.quiet {
		c := q.Front().Value.(*limitConn)
		n := l.uncounted
		if network.IsValid() {
			n = l.byNet[network]
		}
		if n > held || n == held && c.quietSince.Before(front.quietSince) {
			front, held = c, n
		}
	}
	if front == nil {
		return nil, 0
	}
	if d := quietGrace - time.Since(front.quietSince); d > 0 {
		return nil, d
	}
	return front, 0
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

// ConnState is the http.Server hook that tells the listener which
// connections are quiet (new, or idle between requests), for the total
// cap, and counts idle keep-alive connections for MaxIdlePerAddr: when one
// more of an address's connections goes idle than the cap, its oldest idle
// one is closed.
func (l *LimitListener) ConnState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*limitConn)
	if !ok {
		return
	}
	l.mu.Lock()
	if l.sem != nil {
		l.unquietLocked(c)
		if st == http.StateNew || st == http.StateIdle {
			q := l.quiet[c.network]
			if q == nil {
				q = list.New()
				l.quiet[c.network] = q
			}
			c.quietSince = time.Now()
			c.quietElem = q.PushBack(c)
		}
	}
	l.mu.Unlock()
	if !c.counted || l.idlePerAddr <= 0 {
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

// unquietLocked takes c off its network's quiet list; l.mu is held.
func (l *LimitListener) unquietLocked(c *limitConn) {
	if c.quietElem == nil {
		return
	}
	q := l.quiet[c.network]
	q.Remove(c.quietElem)
	c.quietElem = nil
	if q.Len() == 0 {
		delete(l.quiet, c.network)
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
	// quietElem is c's place in l.quiet[network] while it is new or
	// idle, since quietSince; guarded by l.mu.
	quietElem  *list.Element
	quietSince time.Time
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
		} else {
			c.l.uncounted--
		}
		c.l.unquietLocked(c)
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
