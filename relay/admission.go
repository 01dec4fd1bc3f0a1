package relay

import (
	"container/list"
	"context"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/clientaddr"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// Connection admission. Every WebSocket is counted from its upgrade to its
// end by its client address and that address's network (IPv4 /24, IPv6
// /64; internal/clientaddr, through Config.TrustedProxies behind a
// proxy), in two classes: sockets still in their login (upgraded, not yet
// authenticated) and all sockets.
//
//   - A client address or network over its share (MaxUnauthConnsPerAddr,
//     MaxUnauthConnsPerNet for logins; MaxConnsPerAddr, MaxConnsPerNet
//     for all sockets) is refused before the upgrade: 429 rate_limited.
//     No one host, and no one /24 or /64, can take the relay alone.
//   - MaxUnauthConns of the MaxConns sockets are the login reserve:
//     authenticated sockets never hold more than MaxConns minus it, so
//     however many accounts an attacker holds connections with, a new
//     socket always finds a seat to log in from.
//   - When the reserve is full, a new socket takes the seat of the socket
//     that has been silent in its login longest (closed with 1013 Try
//     Again Later and busy). An honest client sends its auth frame as
//     soon as the upgrade is answered, so only a crowd opening a whole
//     reserve of sockets within one client's round trip could push it
//     out; silent sockets cannot keep anyone out.
//   - When the authenticated sockets reach their share, the login that
//     would pass it closes the socket idle longest (no publish and no
//     delivery on its subscriptions for the longest time) with 1013 and
//     evicted; clients reconnect with backoff. A socket that publishes
//     or gets traffic is not idle, and cover traffic keeps a seat's
//     watch busy.
//
// Sockets that stop answering pings are closed (Config.PingInterval,
// PingTimeout), so a vanished peer does not hold its seat until TCP gives
// up. All of it is in memory, under one mutex taken once per upgrade,
// login and close, never on the message path.

// admission states of a conn.
const (
	admNone    = iota // not admitted
	admLogin          // holds a login seat
	admAuthed         // authenticated
	admEvicted        // closed by admission; its seat already given back
)

// admission counts the relay's sockets.
type admission struct {
	cfg *Config

	mu       sync.Mutex // guards the following fields
	login    list.List  // conns in their login, oldest first
	authed   map[*conn]struct{}
	byAddr   map[netip.Addr]*admCount
	byNet    map[netip.Prefix]*admCount
	accepted uint64 // every admitted socket (metrics.go)
}

// admCount is what one address or network holds.
type admCount struct{ all, login int }

func newAdmission(cfg *Config) *admission {
	return &admission{cfg: cfg, authed: make(map[*conn]struct{}),
		byAddr: make(map[netip.Addr]*admCount), byNet: make(map[netip.Prefix]*admCount)}
}

// admTicket is a conn's admission state, guarded by admission.mu.
type admTicket struct {
	keys  clientaddr.Keys
	state int
	elem  *list.Element // in admission.login while admLogin
}

// clientKeys are the admission keys of the client behind r.
func (s *Server) clientKeys(r *http.Request) clientaddr.Keys {
	a, _ := clientaddr.Of(r, s.cfg.TrustedProxies)
	return clientaddr.KeysOf(a)
}

// admit gives c a login seat, or names the share it is refused for ("" if
// admitted). When the login reserve is full, the conn silent in its login
// longest loses its seat to c and is returned as victim, for the caller
// to close.
func (a *admission) admit(c *conn) (victim *conn, refused string) {
	k := c.adm.keys
	a.mu.Lock()
	defer a.mu.Unlock()
	ac, nc := a.byAddr[k.Addr], a.byNet[k.Net]
	switch {
	case ac != nil && ac.login >= a.cfg.MaxUnauthConnsPerAddr:
		return nil, "address_login"
	case nc != nil && nc.login >= a.cfg.MaxUnauthConnsPerNet:
		return nil, "network_login"
	case ac != nil && ac.all >= a.cfg.MaxConnsPerAddr:
		return nil, "address"
	case nc != nil && nc.all >= a.cfg.MaxConnsPerNet:
		return nil, "network"
	}
	if a.login.Len() >= a.cfg.MaxUnauthConns {
		victim = a.login.Front().Value.(*conn)
		a.releaseLocked(victim)
		victim.adm.state = admEvicted
		// The victim may have been the last of c's address or network.
		ac, nc = a.byAddr[k.Addr], a.byNet[k.Net]
	}
	if ac == nil {
		ac = &admCount{}
		a.byAddr[k.Addr] = ac
	}
	if nc == nil {
		nc = &admCount{}
		a.byNet[k.Net] = nc
	}
	ac.all++
	ac.login++
	nc.all++
	nc.login++
	c.adm.state = admLogin
	c.adm.elem = a.login.PushBack(c)
	a.accepted++
	return victim, ""
}

// loggedIn moves c from its login seat to the authenticated sockets. At
// their share (MaxConns minus the login reserve) the socket idle longest
// is evicted and returned as victim. ok is false when c lost its seat
// meanwhile (it is being closed).
func (a *admission) loggedIn(c *conn) (victim *conn, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.adm.state != admLogin {
		return nil, false
	}
	a.login.Remove(c.adm.elem)
	c.adm.elem = nil
	a.byAddr[c.adm.keys.Addr].login--
	a.byNet[c.adm.keys.Net].login--
	if len(a.authed) >= a.cfg.MaxConns-a.cfg.MaxUnauthConns {
		var oldest int64
		for x := range a.authed {
			if t := x.active.Load(); victim == nil || t < oldest {
				victim, oldest = x, t
			}
		}
		if victim != nil {
			a.releaseLocked(victim)
			victim.adm.state = admEvicted
		}
	}
	c.adm.state = admAuthed
	c.active.Store(time.Now().UnixNano())
	a.authed[c] = struct{}{}
	return victim, true
}

// leave gives back whatever seat c holds, once.
func (a *admission) leave(c *conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(c)
	c.adm.state = admNone
}

// releaseLocked drops c from the counts; a.mu is held.
func (a *admission) releaseLocked(c *conn) {
	switch c.adm.state {
	case admLogin:
		a.login.Remove(c.adm.elem)
		c.adm.elem = nil
		a.byAddr[c.adm.keys.Addr].login--
		a.byNet[c.adm.keys.Net].login--
	case admAuthed:
		delete(a.authed, c)
	default:
		return
	}
	ac, nc := a.byAddr[c.adm.keys.Addr], a.byNet[c.adm.keys.Net]
	if ac.all--; ac.all <= 0 {
		delete(a.byAddr, c.adm.keys.Addr)
	}
	if nc.all--; nc.all <= 0 {
		delete(a.byNet, c.adm.keys.Net)
	}
}

// unauthCount is the sockets in their login; authedCount the
// authenticated ones.
func (a *admission) unauthCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.login.Len()
}

func (a *admission) authedCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.authed)
}

// touch records traffic on c (a publish, or a delivery on one of its
// subscriptions) at now, Unix nanoseconds. The store is skipped within a
// millisecond of the last, so fan-out to a busy socket does not keep
// writing its cache line.
func (c *conn) touch(now int64) {
	if now-c.active.Load() > int64(time.Millisecond) {
		c.active.Store(now)
	}
}

// evictLinger bounds how long an evicted socket's close handshake may
// take: its seat went to another socket at once, but its connection still
// holds a file descriptor and a slot of the listener until it is closed,
// and a peer that reads nothing would hold them for the library's 5 s.
// A client that reads answers within a round trip.
const evictLinger = time.Second

// evictLogin closes a socket whose login seat went to a newer one.
func (c *conn) evictLogin() {
	c.srv.counters.evictedLogin.Add(1)
	c.srv.log.Info("relay: login reserve full, closing the socket silent longest", "remote", c.remote)
	c.evict("relay busy", backend.ErrorFrame("busy", "the relay is full of sockets waiting to log in; reconnect shortly and authenticate at once"), true)
}

// evictIdle closes an authenticated socket idle longest to seat a login.
func (c *conn) evictIdle() {
	c.srv.counters.evictedIdle.Add(1)
	c.srv.log.Info("relay: relay full, closing the socket idle longest", "remote", c.remote, "sub", c.sub)
	c.evict("relay full: idle connection closed", backend.ErrorFrame("evicted", "the relay is full and this connection was idle longest; reconnect later"), false)
}

// evict closes c with 1013 after final, and cuts the connection if the
// close handshake has not ended within evictLinger.
func (c *conn) evict(reason string, final []byte, drop bool) {
	c.closeWith(websocket.StatusTryAgainLater, reason, final, drop)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.linger == nil {
		c.linger = time.AfterFunc(evictLinger, func() {
			// The connection itself: the library's CloseNow waits
			// for a close handshake already under way.
			c.mu.Lock()
			cc := c.cc
			c.mu.Unlock()
			if cc != nil {
				cc.Close()
			}
		})
	}
}

// stopLinger stops the timer of an evicted socket that has ended.
func (c *conn) stopLinger() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.linger != nil {
		c.linger.Stop()
	}
}

// startPings pings c every PingInterval once it has authenticated; a
// socket that does not answer within PingTimeout is closed.
func (c *conn) startPings() {
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	if !c.pingStopped {
		c.pingTimer = time.AfterFunc(c.srv.cfg.PingInterval, c.ping)
	}
}

func (c *conn) ping() {
	s := c.srv
	ctx, cancel := context.WithTimeout(s.bgCtx, s.cfg.PingTimeout)
	err := c.ws.Ping(ctx)
	cancel()
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	if c.pingStopped || s.bgCtx.Err() != nil {
		// The socket ended, or the relay is closing it with a close
		// handshake of its own.
		return
	}
	if err != nil {
		if !c.isClosing() {
			s.counters.pingTimeouts.Add(1)
			s.log.Info("relay: no pong within the ping timeout, closing", "remote", c.remote, "sub", c.sub)
		}
		c.ws.CloseNow()
		return
	}
	c.pingTimer.Reset(s.cfg.PingInterval)
}

// stopPings stops the pinger; a ping in flight ends with the socket.
func (c *conn) stopPings() {
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	c.pingStopped = true
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
}
