package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/relay/internal/backend"

	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/internal/waitfor"
)

// dialFrom opens a WebSocket from the loopback address local (any
// 127.0.0.0/8 address works on Linux), so tests can be several remote
// addresses. It returns the HTTP status of a refused upgrade.
func dialFrom(t *testing.T, base, path, local string) (*wsClient, *http.Response, error) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+path, &websocket.DialOptions{HTTPClient: client})
	if err != nil {
		return nil, resp, err
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, c: c}, resp, nil
}

// expectRefused checks a 429 rate_limited answer before the upgrade.
func expectRefused(t *testing.T, resp *http.Response, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("upgrade accepted over the cap")
	}
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("refused upgrade: %v %v", resp, err)
	}
	var body map[string]string
	// The library keeps a prefix of the body for its error.
	if !strings.Contains(err.Error(), `"rate_limited"`) {
		json.NewDecoder(resp.Body).Decode(&body)
		if body["error"] != "rate_limited" {
			t.Fatalf("refusal body: %v (%v)", body, err)
		}
	}
}

// TestPreAuthReadLimit: before authenticating a socket may send only a
// small frame; a larger one (here declared at 1.4 MB and sent in part)
// closes it with 1009. After authentication the 1 MiB payload limit holds.
func TestPreAuthReadLimit(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, PreAuthReadLimit: 1024})
	c := dialWS(t, tr.URL, "/ws")
	w, err := c.c.Writer(context.Background(), websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	// A fragmented frame: the relay counts what arrives, whatever the
	// peer declares.
	w.Write([]byte(`{"type":"auth","token":"` + strings.Repeat("x", 64<<10)))
	c.expectClose(websocket.StatusMessageTooBig)

	// A raw frame header declaring 1.4 MB, followed by a little of it.
	addr := strings.TrimPrefix(tr.URL, "http://")
	raw := rawUpgradeFrom(t, addr, "/ws", nil)
	t.Cleanup(func() { raw.Close() })
	hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0x15, 0x5c, 0xc0, 0, 0, 0, 0} // 1,400,000 bytes, zero mask
	raw.Write(append(hdr, bytes.Repeat([]byte{'x'}, 4096)...))
	if code := readCloseCode(t, raw); code != websocket.StatusMessageTooBig {
		t.Fatalf("declared 1.4 MB first frame: close %d, want 1009", code)
	}

	// An auth frame within the limit works, and then a 512 KiB publish.
	a := dialWS(t, tr.URL, "/ws/"+chA)
	a.auth(mint(t, "alice", ""))
	a.publishAck(chA, bytes.Repeat([]byte{1}, 512<<10))
}

// rawUpgradeFrom opens a WebSocket by hand, from the local address local
// when it is not nil, and leaves the socket to the caller.
func rawUpgradeFrom(t testing.TB, addr, path string, local *net.TCPAddr) net.Conn {
	t.Helper()
	var d net.Dialer
	if local != nil {
		d.LocalAddr = local
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", path, addr)
	var resp []byte
	one := make([]byte, 1)
	for !bytes.HasSuffix(resp, []byte("\r\n\r\n")) {
		if _, err := c.Read(one); err != nil {
			c.Close()
			t.Fatal(err)
		}
		resp = append(resp, one[0])
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101")) {
		c.Close()
		t.Fatalf("upgrade: %s", resp)
	}
	return c
}

// readCloseCode reads server frames from a raw socket until a close frame.
func readCloseCode(t *testing.T, c net.Conn) websocket.StatusCode {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var code websocket.StatusCode = -1
	rawReaderT(c, func(op byte, payload []byte) {
		if op == 8 && len(payload) >= 2 {
			code = websocket.StatusCode(int(payload[0])<<8 | int(payload[1]))
		}
	})
	return code
}

// rawReaderT reads unmasked server frames until the connection ends.
func rawReaderT(c net.Conn, f func(op byte, payload []byte)) {
	var hdr [8]byte
	read := func(b []byte) bool {
		for n := 0; n < len(b); {
			m, err := c.Read(b[n:])
			if err != nil {
				return false
			}
			n += m
		}
		return true
	}
	for {
		if !read(hdr[:2]) {
			return
		}
		op, n := hdr[0]&0x0f, int(hdr[1]&0x7f)
		switch n {
		case 126:
			if !read(hdr[:2]) {
				return
			}
			n = int(hdr[0])<<8 | int(hdr[1])
		case 127:
			if !read(hdr[:8]) {
				return
			}
			n = 0
			for _, b := range hdr {
				n = n<<8 | int(b)
			}
		}
		p := make([]byte, n)
		if !read(p) {
			return
		}
		f(op, p)
		if op == 8 {
			return
		}
	}
}

// TestUnauthenticatedSocketCaps: sockets that have not authenticated are
// capped per remote address, refused before the upgrade with 429
// rate_limited and Retry-After; authenticating or going away frees the
// slot. At the total cap (the login reserve) a new socket is not refused:
// the one silent longest makes room (busy, 1013).
func TestUnauthenticatedSocketCaps(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, MaxUnauthConns: 5, MaxUnauthConnsPerAddr: 3})
	var held []*wsClient
	for range 3 {
		c, _, err := dialFrom(t, tr.URL, "/ws", "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	_, resp, err := dialFrom(t, tr.URL, "/ws", "127.0.0.1")
	expectRefused(t, resp, err)

	// Another address has its own share of the total.
	for range 2 {
		if _, _, err := dialFrom(t, tr.URL, "/ws", "127.0.0.2"); err != nil {
			t.Fatal(err)
		}
	}
	// The total is full: the oldest silent socket goes.
	c, _, err := dialFrom(t, tr.URL, "/ws", "127.0.0.3")
	if err != nil {
		t.Fatalf("a socket at the full reserve: %v", err)
	}
	held[0].expectError("busy")
	held[0].expectClose(websocket.StatusTryAgainLater)
	c.auth(mint(t, "bob", ""))

	// One of the first address's sockets authenticates: that address
	// has room for one more (held[0]'s and held[1]'s slots are free).
	held[1].auth(mint(t, "alice", ""))
	for range 2 {
		if _, _, err := dialFrom(t, tr.URL, "/ws", "127.0.0.1"); err != nil {
			t.Fatalf("slot not freed: %v", err)
		}
	}
	_, resp, err = dialFrom(t, tr.URL, "/ws", "127.0.0.1")
	expectRefused(t, resp, err)

	// A socket that goes away unauthenticated frees its slot too.
	held[2].c.CloseNow()
	waitfor.True(t, 10*time.Second, func() bool {
		c, resp, err := dialFrom(t, tr.URL, "/ws", "127.0.0.1")
		if err == nil {
			c.auth(mint(t, "carol", ""))
			return true
		}
		expectRefused(t, resp, err) // the relay has not seen the close yet
		return false
	}, "the closed unauthenticated socket's slot is still held after 10s")
}

// TestConnsPerAccount: one account's authenticated sockets are capped; the
// socket over the cap gets too_many_connections and is closed with 1013,
// and others' sockets are not affected.
func TestConnsPerAccount(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, MaxConnsPerAccount: 2})
	tok := mint(t, "alice", "")
	a1 := dialWS(t, tr.URL, "/ws/"+chA)
	a1.auth(tok)
	a2 := dialWS(t, tr.URL, "/ws")
	a2.auth(tok)
	a3 := dialWS(t, tr.URL, "/ws")
	a3.send(map[string]string{"type": "auth", "token": tok})
	a3.expectError("too_many_connections")
	a3.expectClose(websocket.StatusTryAgainLater)
	b := dialWS(t, tr.URL, "/ws/"+chA)
	b.auth(mint(t, "bob", ""))
	a1.publishAck(chA, []byte("x"))
	b.expect(map[string]any{"type": "message", "seq": 1})

	a2.c.Close(websocket.StatusNormalClosure, "")
	waitfor.True(t, 10*time.Second, func() bool {
		a4 := dialWS(t, tr.URL, "/ws")
		a4.send(map[string]string{"type": "auth", "token": tok})
		m := a4.recv()
		if m["type"] != "ok" && m["code"] != "too_many_connections" { // too many: the relay has not seen the close yet
			t.Fatalf("auth after a close: %v", m)
		}
		return m["type"] == "ok"
	}, "the closed socket's slot is still held after 10s")
}

// TestQueueBytesCap: Config.MaxQueueBytes bounds the bytes queued for one
// socket; a reader that falls behind by more is dropped with 1013.
func TestQueueBytesCap(t *testing.T) {
	testSlowConsumer(t, Config{NoSync: true, MaxQueueBytes: 256 << 10}, 32<<10)
}

// TestTokenExpiryClosesSocket: a socket whose token expires without a
// fresh auth frame gets token_expired and is closed (1008, "token
// expired"), by its timer when idle and at its next frame otherwise.
func TestTokenExpiryClosesSocket(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		tr := startRelay(t, Config{NoSync: true})
		c := dialWS(t, tr.URL, "/ws/"+chA)
		// exp has whole seconds: two seconds from now is more than one.
		c.auth(mintTTL(t, "alice", "", time.Now(), 2*time.Second))
		c.expectError("token_expired")
		expectCloseReason(t, c, websocket.StatusPolicyViolation, "token expired")
	})
	t.Run("clock", func(t *testing.T) {
		clk := newTestClock()
		tr := startRelay(t, Config{NoSync: true, Now: clk.now})
		c := dialWS(t, tr.URL, "/ws/"+chA)
		c.auth(mintTTL(t, "alice", "", clk.now(), time.Minute))
		c.publishAck(chA, []byte("fresh"))
		clk.advance(61 * time.Second)
		c.publish(chA, []byte("stale"))
		c.expectError("token_expired")
		expectCloseReason(t, c, websocket.StatusPolicyViolation, "token expired")
		var n int
		tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&n)
		if n != 1 {
			t.Fatalf("%d entries archived, want only the one before expiry", n)
		}
	})
}

// TestReauthentication: a fresh auth frame before exp keeps the socket
// open past the first token's exp; it must carry the same subject and
// channel scope, or the socket is closed.
func TestReauthentication(t *testing.T) {
	clk := newTestClock()
	tr := startRelay(t, Config{NoSync: true, Now: clk.now})
	start := clk.now()
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mintTTL(t, "alice", "", start, time.Minute))
	clk.advance(50 * time.Second)
	c.send(map[string]string{"type": "auth", "token": mintTTL(t, "alice", "", clk.now(), time.Minute)})
	c.expect(map[string]any{"type": "ok", "message": "reauthenticated"})
	clk.advance(30 * time.Second) // past the first token's exp
	c.publishAck(chA, []byte("still open"))
	// A bad fresh token is refused; the one in force stays.
	c.send(map[string]string{"type": "auth", "token": "abc.def.ghi"})
	c.expectError("unauthorized")
	c.publishAck(chA, []byte("still open"))

	for name, tok := range map[string]string{
		"another subject": mintTTL(t, "mallory", "", clk.now(), time.Minute),
		"another scope":   mintTTL(t, "alice", chA, clk.now(), time.Minute),
	} {
		t.Run(name, func(t *testing.T) {
			d := dialWS(t, tr.URL, "/ws/"+chA)
			d.auth(mintTTL(t, "alice", "", clk.now(), time.Minute))
			d.send(map[string]string{"type": "auth", "token": tok})
			d.expectError("forbidden")
			d.expectClose(websocket.StatusPolicyViolation)
		})
	}
	// A scoped socket renews with a token of the same scope.
	s := dialWS(t, tr.URL, "/ws/"+chA)
	s.auth(mintTTL(t, "seat", chA, clk.now(), time.Minute))
	s.send(map[string]string{"type": "auth", "token": mintTTL(t, "seat", chA, clk.now(), time.Minute)})
	s.expect(map[string]any{"type": "ok", "message": "reauthenticated"})
}

// TestReauthenticationMovesTimer: on the real clock, a socket renewed
// before exp outlives the first token.
func TestReauthenticationMovesTimer(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	first := time.Now()
	c.auth(mintTTL(t, "alice", "", first, 2*time.Second)) // exp within (first+1s, first+2s]
	c.send(map[string]string{"type": "auth", "token": mint(t, "alice", "")})
	c.expect(map[string]any{"type": "ok", "message": "reauthenticated"})
	time.Sleep(time.Until(first.Add(2500 * time.Millisecond))) // time passes: past the first token's exp
	c.publishAck(chA, []byte("after the first exp"))
}

func expectCloseReason(t *testing.T, c *wsClient, code websocket.StatusCode, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		_, _, err := c.c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != code || ce.Reason != reason {
			t.Fatalf("connection ended with %v, want close %d %q", err, code, reason)
		}
		return
	}
}

func mintTTL(t testing.TB, sub, ch string, at time.Time, ttl time.Duration) string {
	t.Helper()
	tok, err := jwt.Mint(testSecret, jwt.Claims{Subject: sub, Audience: jwt.AudienceRelay, Channel: ch,
		IssuedAt: at, ExpiresAt: at.Add(ttl)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now()} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestNoWriterBeforeTheUpgrade: a socket evicted (or told to close) while
// its upgrade still runs has no connection to write to yet, so closing it
// starts no writer and a frame queued then is dropped; handleWS starts the
// writer that sends the close once the upgrade gives the socket.
func TestNoWriterBeforeTheUpgrade(t *testing.T) {
	c := &conn{wrote: make(chan struct{}), slots: make(chan struct{}, 1)}
	started := make(chan struct{}, 4)
	c.writer = func() { started <- struct{}{} }
	c.closeWith(websocket.StatusTryAgainLater, "relay full", backend.ErrorFrame("evicted", "the relay is full"), true)
	c.enqueue([]byte(`{"type":"push"}`), false, nil)
	c.mu.Lock()
	writing, queued := c.writing, len(c.q)
	c.mu.Unlock()
	if writing || queued != 0 {
		t.Fatalf("before the upgrade: a writer marked running %v, %d frames queued", writing, queued)
	}
	select {
	case <-started:
		t.Fatal("a writer started before the upgrade gave the socket")
	default:
	}
}
