package relay

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/clientaddr"
)

// dialVia opens a WebSocket from the loopback address local with an
// X-Forwarded-For header, as a proxy on that address forwarding for xff
// would ("" for none).
func dialVia(t *testing.T, base, path, local, xff string) (*wsClient, *http.Response, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := http.Header{}
	if xff != "" {
		h.Set("X-Forwarded-For", xff)
	}
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+path, &websocket.DialOptions{HTTPClient: client, HTTPHeader: h})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, c: c}, resp, nil
}

// spread is the i-th of many loopback addresses, each in its own /24, so
// that neither the per-address nor the per-network caps bind.
func spread(i int) string { return fmt.Sprintf("127.%d.%d.1", 1+i/250, i%250) }

// TestIdleSocketsFromManyAccounts: authenticated sockets of many
// accounts, from many addresses, sit idle and would fill the relay; at
// MaxConns minus the login reserve each new login closes the socket idle
// longest with 1013, so an honest login still gets in, and a socket that
// published meanwhile outlives the idle ones.
func TestIdleSocketsFromManyAccounts(t *testing.T) {
	const maxConns, reserve = 40, 8
	tr := startRelay(t, Config{NoSync: true, MaxConns: maxConns, MaxUnauthConns: reserve, MaxConnsPerAccount: 3})
	bob, _, err := dialFrom(t, tr.URL, "/ws/"+chA, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	bob.auth(mint(t, "bob", ""))

	// 30 accounts, 3 sockets each, all idle: 90 logins for 32 seats.
	var idle []*wsClient
	for i := range 90 {
		c, _, err := dialFrom(t, tr.URL, "/ws", spread(i))
		if err != nil {
			t.Fatalf("login %d refused: %v", i, err)
		}
		c.auth(mint(t, fmt.Sprint("idle-", i/3), ""))
		idle = append(idle, c)
		if i%10 == 0 {
			// Bob publishes now and then: his socket is the oldest,
			// but not idle.
			bob.publishAck(chA, []byte("still here"))
		}
	}
	if n := tr.adm.authedCount(); n > maxConns-reserve {
		t.Fatalf("%d authenticated sockets, cap %d", n, maxConns-reserve)
	}
	// An honest login gets in.
	alice, _, err := dialFrom(t, tr.URL, "/ws/"+chA, "127.0.0.2")
	if err != nil {
		t.Fatalf("honest login refused: %v", err)
	}
	alice.auth(mint(t, "alice", ""))
	alice.publishAck(chA, []byte("hello"))
	bob.expect(map[string]any{"type": "message"})
	bob.publishAck(chA, []byte("bob too"))

	// The oldest idle sockets went first, told to come back later.
	for i, c := range idle[:40] {
		m, err := c.tryRecv(10 * time.Second)
		if err == nil {
			if m["code"] != "evicted" {
				t.Fatalf("idle socket %d: frame %v", i, m)
			}
			_, err = c.tryRecv(10 * time.Second)
		}
		if websocket.CloseStatus(err) != websocket.StatusTryAgainLater {
			t.Fatalf("idle socket %d ended with %v, want close 1013", i, err)
		}
	}
	// The newest are still open.
	idle[len(idle)-1].expectQuiet()
	if n := tr.counters.evictedIdle.Load(); n < 59 {
		t.Fatalf("%d idle sockets evicted, want at least 59", n)
	}
}

// TestPreAuthFillManyAddresses: silent sockets from many addresses, each
// within its caps, hold every unauthenticated slot; a new socket takes
// the slot of the one silent longest (closed with 1013), so every honest
// login gets in.
func TestPreAuthFillManyAddresses(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, MaxConns: 200, MaxUnauthConns: 20, MaxUnauthConnsPerAddr: 2})
	var silent []*wsClient
	for i := range 40 {
		for range 2 {
			c, resp, err := dialFrom(t, tr.URL, "/ws", spread(i))
			if err != nil {
				t.Fatalf("silent socket %d: %v %v", i, resp, err)
			}
			silent = append(silent, c)
		}
	}
	if n := tr.adm.unauthCount(); n > 20 {
		t.Fatalf("%d unauthenticated sockets, cap 20", n)
	}
	for i := range 20 {
		c, resp, err := dialFrom(t, tr.URL, "/ws", "127.0.0.2")
		if err != nil {
			t.Fatalf("honest login %d refused: %v %v", i, resp, err)
		}
		c.auth(mint(t, fmt.Sprint("honest-", i), ""))
	}
	silent[0].expectError("busy")
	silent[0].expectClose(websocket.StatusTryAgainLater)
}

// TestPreAuthFillOneNetwork: one IPv6 host, forwarded by a trusted proxy
// from many addresses of its /64, gets MaxUnauthConnsPerNet
// unauthenticated sockets and no more, whatever each address's count;
// another network is not affected.
func TestPreAuthFillOneNetwork(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, MaxUnauthConnsPerAddr: 2, MaxUnauthConnsPerNet: 5,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	held := 0
	for i := range 20 {
		_, resp, err := dialVia(t, tr.URL, "/ws", "127.0.0.1", fmt.Sprintf("2001:db8:0:1::%x", i+1))
		if err == nil {
			held++
			continue
		}
		expectRefused(t, resp, err)
	}
	if held != 5 {
		t.Fatalf("one /64 holds %d unauthenticated sockets, cap 5", held)
	}
	for i := range 5 {
		c, _, err := dialVia(t, tr.URL, "/ws", "127.0.0.1", fmt.Sprintf("2001:db8:0:2::%x", i+1))
		if err != nil {
			t.Fatalf("another /64 refused: %v", err)
		}
		c.auth(mint(t, fmt.Sprint("other-", i), ""))
	}
	// Also IPv4: one /24.
	held = 0
	for i := range 10 {
		if _, _, err := dialVia(t, tr.URL, "/ws", "127.0.0.1", fmt.Sprintf("198.51.100.%d", i+1)); err == nil {
			held++
		}
	}
	if held != 5 {
		t.Fatalf("one /24 holds %d unauthenticated sockets, cap 5", held)
	}
}

// TestSocketsPerAddress: every socket of a client address counts against
// MaxConnsPerAddr, and of its network against MaxConnsPerNet, whether it
// has authenticated or not.
func TestSocketsPerAddress(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, MaxConnsPerAddr: 3, MaxConnsPerNet: 5, MaxConnsPerAccount: 100})
	for i := range 3 {
		c, _, err := dialFrom(t, tr.URL, "/ws", "127.0.9.1")
		if err != nil {
			t.Fatal(err)
		}
		c.auth(mint(t, fmt.Sprint("a", i), ""))
	}
	_, resp, err := dialFrom(t, tr.URL, "/ws", "127.0.9.1")
	expectRefused(t, resp, err)
	for range 2 {
		if _, _, err := dialFrom(t, tr.URL, "/ws", "127.0.9.2"); err != nil {
			t.Fatal(err)
		}
	}
	_, resp, err = dialFrom(t, tr.URL, "/ws", "127.0.9.3") // the /24 is full
	expectRefused(t, resp, err)
	if _, _, err := dialFrom(t, tr.URL, "/ws", "127.0.10.1"); err != nil {
		t.Fatalf("another /24: %v", err)
	}
}

// TestSharedProxyAddress: behind a proxy on loopback, one client filling
// its share of sockets locks out every other client unless the proxy is
// trusted; with TrustedProxies each forwarded client has its own share.
func TestSharedProxyAddress(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		t.Run(fmt.Sprint("trusted=", trusted), func(t *testing.T) {
			cfg := Config{NoSync: true, MaxUnauthConnsPerAddr: 4}
			if trusted {
				cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			}
			tr := startRelay(t, cfg)
			for range 4 {
				if _, _, err := dialVia(t, tr.URL, "/ws", "127.0.0.1", "203.0.113.66"); err != nil {
					t.Fatal(err)
				}
			}
			_, resp, err := dialVia(t, tr.URL, "/ws", "127.0.0.1", "203.0.113.66")
			expectRefused(t, resp, err)
			// A client that writes its own X-Forwarded-For gains nothing.
			_, resp, err = dialVia(t, tr.URL, "/ws", "127.0.0.1", "192.0.2.1, 203.0.113.66")
			expectRefused(t, resp, err)

			c, resp, err := dialVia(t, tr.URL, "/ws", "127.0.0.1", "203.0.113.7")
			if !trusted {
				// Without the setting the proxy is one client.
				expectRefused(t, resp, err)
				return
			}
			if err != nil {
				t.Fatalf("another client behind the proxy refused: %v", err)
			}
			c.auth(mint(t, "alice", ""))
		})
	}
}

// TestPingTimeout: an authenticated socket that does not answer pings is
// closed; one that answers stays.
func TestPingTimeout(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, PingInterval: 100 * time.Millisecond, PingTimeout: 200 * time.Millisecond})
	addr := strings.TrimPrefix(tr.URL, "http://")
	raw := rawUpgradeFrom(t, addr, "/ws", nil)
	t.Cleanup(func() { raw.Close() })
	writeMasked(raw, []byte(`{"type":"auth","token":"`+mint(t, "mute", "")+`"}`))
	raw.SetReadDeadline(time.Now().Add(15 * time.Second))
	var pinged bool
	rawReaderT(raw, func(op byte, _ []byte) {
		if op == 9 {
			pinged = true
		}
	})
	if !pinged {
		t.Fatal("no ping before the socket ended")
	}
	var ne net.Error
	if _, err := raw.Read(make([]byte, 1)); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a socket that never answers pings is still open: %v", err)
	}
	if tr.counters.pingTimeouts.Load() == 0 {
		t.Fatal("ping timeout not counted")
	}

	// A client that reads answers pings and stays connected.
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, _, err := c.c.Read(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a responsive client: %v", err)
	}
}

// writeMasked writes one final text frame with a zero mask, as a client
// must.
func writeMasked(c net.Conn, p []byte) {
	hdr := []byte{0x81}
	switch n := len(p); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	default:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	}
	c.Write(append(append(hdr, 0, 0, 0, 0), p...))
}

// TestAdmissionStats: admissions, refusals by share, evictions by reason
// and the sockets in each class are counted.
func TestAdmissionStats(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, MaxConns: 4, MaxUnauthConns: 1, MaxUnauthConnsPerAddr: 1})
	a, _, err := dialFrom(t, tr.URL, "/ws", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	_, resp, err := dialFrom(t, tr.URL, "/ws", "127.0.0.1") // over the address's login share
	expectRefused(t, resp, err)
	b, _, err := dialFrom(t, tr.URL, "/ws", "127.0.0.2") // takes a's login seat
	if err != nil {
		t.Fatal(err)
	}
	a.expectClose(websocket.StatusTryAgainLater)
	b.auth(mint(t, "b", ""))
	for i := range 3 { // the third login evicts b, idle longest
		c, _, err := dialFrom(t, tr.URL, "/ws", fmt.Sprintf("127.0.0.%d", 3+i))
		if err != nil {
			t.Fatal(err)
		}
		c.auth(mint(t, fmt.Sprint("c", i), ""))
	}
	b.expectError("evicted")
	st := tr.Stats()
	if st.AdmissionsTotal != 5 || st.ConnectionsAuthenticated != 3 || st.ConnectionsLogin != 0 {
		t.Errorf("admissions %d, authenticated %d, in login %d; want 5, 3, 0", st.AdmissionsTotal, st.ConnectionsAuthenticated, st.ConnectionsLogin)
	}
	for share, want := range map[string]uint64{"address_login": 1, "network": 0} {
		if got := count(t, st.AdmissionRefusals, share); got != want {
			t.Errorf("refusals %s = %v, want %v", share, got, want)
		}
	}
	for reason, want := range map[string]uint64{"login": 1, "idle": 1} {
		if got := count(t, st.Evictions, reason); got != want {
			t.Errorf("evictions %s = %v, want %v", reason, got, want)
		}
	}
}

// TestAdmissionCounts: over random admissions, logins and ends from a few
// addresses and networks, the counts always equal those of the sockets
// still seated, the shares hold, and no socket is seated twice.
func TestAdmissionCounts(t *testing.T) {
	cfg := &Config{MaxConns: 12, MaxUnauthConns: 4, MaxUnauthConnsPerAddr: 3, MaxUnauthConnsPerNet: 4,
		MaxConnsPerAddr: 5, MaxConnsPerNet: 8}
	a := newAdmission(cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := []string{"192.0.2.1", "192.0.2.2", "198.51.100.1", "2001:db8::1", "2001:db8::2", "2001:db8:1::1"}
	var live []*conn
	for step := range 20000 {
		switch op := rng.IntN(3); {
		case op == 0 || len(live) == 0:
			c := &conn{}
			c.adm.keys = clientaddr.KeysOf(netip.MustParseAddr(addrs[rng.IntN(len(addrs))]))
			if _, refused := a.admit(c); refused == "" {
				live = append(live, c)
			}
		case op == 1:
			a.loggedIn(live[rng.IntN(len(live))])
		default:
			i := rng.IntN(len(live))
			a.leave(live[i])
			live = append(live[:i], live[i+1:]...)
		}
		byAddr, byNet := map[netip.Addr]admCount{}, map[netip.Prefix]admCount{}
		logins, authed := 0, 0
		for _, c := range live {
			st := c.adm.state
			if st != admLogin && st != admAuthed {
				continue
			}
			ac, nc := byAddr[c.adm.keys.Addr], byNet[c.adm.keys.Net]
			ac.all++
			nc.all++
			if st == admLogin {
				ac.login++
				nc.login++
				logins++
			} else {
				authed++
			}
			byAddr[c.adm.keys.Addr], byNet[c.adm.keys.Net] = ac, nc
		}
		if a.login.Len() != logins || len(a.authed) != authed || len(a.byAddr) != len(byAddr) || len(a.byNet) != len(byNet) {
			t.Fatalf("step %d: %d logins, %d authed, %d addrs, %d nets; want %d, %d, %d, %d", step,
				a.login.Len(), len(a.authed), len(a.byAddr), len(a.byNet), logins, authed, len(byAddr), len(byNet))
		}
		for k, want := range byAddr {
			if got := a.byAddr[k]; got == nil || *got != want || got.login > cfg.MaxUnauthConnsPerAddr || got.all > cfg.MaxConnsPerAddr {
				t.Fatalf("step %d: %v holds %v, want %v", step, k, got, want)
			}
		}
		for k, want := range byNet {
			if got := a.byNet[k]; got == nil || *got != want || got.login > cfg.MaxUnauthConnsPerNet || got.all > cfg.MaxConnsPerNet {
				t.Fatalf("step %d: %v holds %v, want %v", step, k, got, want)
			}
		}
		if logins > cfg.MaxUnauthConns || authed > cfg.MaxConns-cfg.MaxUnauthConns {
			t.Fatalf("step %d: %d logins, %d authenticated", step, logins, authed)
		}
	}
}
