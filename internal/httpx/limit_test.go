package httpx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

func listen(t *testing.T, o LimitOptions) *LimitListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimitListener(ln, o)
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// hold dials l n times and accepts each connection; it returns the
// accepted ends, for the test to hold open.
func hold(t *testing.T, l net.Listener, n int) []net.Conn {
	t.Helper()
	held := make([]net.Conn, 0, n)
	for range n {
		dial(t, l)
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	return held
}

type accepted struct {
	c   net.Conn
	err error
}

func acceptAsync(l net.Listener) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	return ch
}

// TestLimitListenerWaitsAtTotalCap: with Max open connections, Accept does
// not hand out another until one of them closes; the waiting connection is
// then accepted, not lost.
func TestLimitListenerWaitsAtTotalCap(t *testing.T) {
	l := listen(t, LimitOptions{Max: 2})
	held := hold(t, l, 2)
	if n := l.Active(); n != 2 {
		t.Fatalf("Active = %d, want 2", n)
	}
	third := dial(t, l)
	got := acceptAsync(l)
	select {
	case a := <-got:
		t.Fatalf("a third connection was accepted over the cap (%v)", a.err)
	case <-time.After(50 * time.Millisecond):
	}
	held[0].Close()
	held[0].Close() // a second Close must not free a second slot
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.c.Close()
	// It is the waiting client's connection: bytes flow both ways.
	if _, err := third.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(a.c, b); err != nil || b[0] != 'x' {
		t.Fatalf("read %q, %v", b, err)
	}
	if n := l.Active(); n != 2 {
		t.Fatalf("Active = %d after one close and one accept, want 2", n)
	}
	// Still at the cap after the double Close.
	dial(t, l)
	got = acceptAsync(l)
	select {
	case <-got:
		t.Fatal("a double Close freed two slots")
	case <-time.After(50 * time.Millisecond):
	}
	l.Close()
	if a := <-got; !errors.Is(a.err, net.ErrClosed) {
		t.Fatalf("Accept waiting at the cap after Close: %v, want net.ErrClosed", a.err)
	}
}

// TestLimitListenerPerAddr: connections from one address beyond MaxPerAddr
// are closed at once and do not use a slot; exempt addresses are not
// counted.
func TestLimitListenerPerAddr(t *testing.T) {
	l := listen(t, LimitOptions{Max: 10, MaxPerAddr: 2})
	held := hold(t, l, 2)
	over := dial(t, l)
	got := acceptAsync(l)
	// The server closes the connection over the per-address cap without
	// reading from it.
	over.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection over the per-address cap was served")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a connection over the per-address cap was neither served nor closed")
	}
	if n := l.Active(); n != 2 {
		t.Fatalf("Active = %d, want 2", n)
	}
	// A freed slot of that address takes a new connection.
	held[0].Close()
	dial(t, l)
	if a := <-got; a.err != nil {
		t.Fatal(a.err)
	} else {
		a.c.Close()
	}

	ex := listen(t, LimitOptions{MaxPerAddr: 1, ExemptAddr: netip.Addr.IsLoopback})
	for _, c := range hold(t, ex, 3) {
		defer c.Close()
	}
	if n := ex.Active(); n != 3 {
		t.Fatalf("exempt address: Active = %d, want 3", n)
	}
}

func TestLimitListenerAddrKey(t *testing.T) {
	l := NewLimitListener(nil, LimitOptions{MaxPerAddr: 1})
	for in, want := range map[string]string{
		"10.0.0.1:80":                "10.0.0.1",
		"[::ffff:10.0.0.1]:80":       "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::",
		"[2001:db8:1:2:ff::1]:443":   "2001:db8:1:2::",
		"[2001:db8:1:3::1]:443":      "2001:db8:1:3::",
	} {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		got, _, ok := l.addrKey(a)
		if !ok || got.String() != want {
			t.Errorf("addrKey(%s) = %v %v, want %s", in, got, ok, want)
		}
	}
}

func dialFrom(t *testing.T, l net.Listener, local string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedUnread checks that the server end closed c without serving it.
func closedUnread(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("%s was served", what)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s was neither served nor closed", what)
	}
}

// TestLimitListenerPerNet: the addresses of one /24 share MaxPerNet.
func TestLimitListenerPerNet(t *testing.T) {
	l := listen(t, LimitOptions{MaxPerAddr: 10, MaxPerNet: 3})
	for _, ip := range []string{"127.0.5.1", "127.0.5.2", "127.0.5.3"} {
		dialFrom(t, l, ip)
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	over := dialFrom(t, l, "127.0.5.4")
	got := acceptAsync(l)
	closedUnread(t, over, "a connection over the per-network cap")
	dialFrom(t, l, "127.0.6.1") // another /24
	if a := <-got; a.err != nil {
		t.Fatal(a.err)
	} else {
		a.c.Close()
	}
}

// TestLimitListenerIdlePerAddr: past MaxIdlePerAddr idle keep-alive
// connections of one address, its oldest idle one is closed; a busy one
// and other addresses' are not.
func TestLimitListenerIdlePerAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimitListener(ln, LimitOptions{MaxIdlePerAddr: 2})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}), ConnState: l.ConnState}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	get := func(local string) net.Conn {
		t.Helper()
		c := dialFrom(t, l, local)
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		// The server marks the connection idle after the client has its
		// answer: wait for that, so the idle list's order is the test's.
		waitfor.True(t, 10*time.Second, func() bool { return idleNow(l, c) }, "the server never marked the connection idle")
		return c
	}
	first := get("127.0.7.1")
	other := get("127.0.7.2")
	// Both are kept referenced until the end: a connection the test
	// dropped could be closed by its finalizer, and then it is not idle.
	second := get("127.0.7.1")
	third := get("127.0.7.1") // a third idle one: the first goes
	closedUnread(t, first, "the oldest idle connection past the cap")
	defer second.Close()
	defer third.Close()
	// The other address's idle connection is still served.
	fmt.Fprintf(other, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(other), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("another address's idle connection: %v", err)
	}
}

// TestLimitListenerClosesQuietestAtTotalCap: a listener at its total cap
// with connections that hold a slot and say nothing (never sent a
// request, or idle between requests) closes the one quiet longest for a
// new connection, so silent and idle connections from a crowd of
// addresses cannot keep a client out; a connection with a request in
// progress is never closed for it.
func TestLimitListenerClosesQuietestAtTotalCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimitListener(ln, LimitOptions{Max: 3})
	busy, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			close(busy)
			<-release
		}
		io.WriteString(w, "ok")
	}), ConnState: l.ConnState}
	go srv.Serve(l)
	t.Cleanup(func() { close(release); srv.Close() })

	// One connection busy in a request, one silent since it connected,
	// one idle after a request: the listener is full.
	active := dialFrom(t, l, "127.0.8.1")
	fmt.Fprintf(active, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	<-busy
	silent := dialFrom(t, l, "127.0.8.2")
	idle := dialFrom(t, l, "127.0.8.3")
	fmt.Fprintf(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the idle connection's request: %v", err)
	}
	waitfor.True(t, 10*time.Second, func() bool { return l.Active() == 3 }, "the listener never held the 3 connections")

	// Two newcomers are served in turn: the silent connection goes first
	// (quiet longest), then the idle one.
	for i, quiet := range []net.Conn{silent, idle} {
		c := dialFrom(t, l, fmt.Sprintf("127.0.9.%d", i+1))
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("newcomer %d at the cap: %v", i+1, err)
		}
		closedUnread(t, quiet, fmt.Sprintf("the quiet connection %d", i+1))
	}
	// The busy connection was not closed for them: its answer comes once
	// the handler returns.
	release <- struct{}{}
	active.SetDeadline(time.Now().Add(20 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(active), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the busy connection's answer: %v", err)
	}
}

// TestLimitListenerClosesFromTheBusiestNetwork: at the total cap the
// newcomer takes the slot of a quiet connection of the network holding
// the most connections, not of a network with one, even when that one
// has been quiet longer.
func TestLimitListenerClosesFromTheBusiestNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimitListener(ln, LimitOptions{Max: 4, MaxPerNet: 10})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}), ConnState: l.ConnState}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	get := func(c net.Conn, what string) {
		t.Helper()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v", what, err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	// The lone network's connection is quiet first (idle after a
	// request), then the crowd's three say nothing.
	lone := dialFrom(t, l, "127.0.11.1")
	get(lone, "the lone network's request")
	crowd := []net.Conn{dialFrom(t, l, "127.0.10.1"), dialFrom(t, l, "127.0.10.2"), dialFrom(t, l, "127.0.10.3")}
	waitfor.True(t, 10*time.Second, func() bool { return l.Active() == 4 }, "the listener never held the 4 connections")
	get(dialFrom(t, l, "127.0.12.1"), "the newcomer at the cap")
	closedUnread(t, crowd[0], "the crowd's quiet longest")
	get(lone, "the lone network's connection after the newcomer")
}

// idleNow reports whether the server end of the client connection c is on
// l's idle list.
func idleNow(l *LimitListener, c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.idle {
		for e := q.Front(); e != nil; e = e.Next() {
			if e.Value.(*limitConn).RemoteAddr().String() == c.LocalAddr().String() {
				return true
			}
		}
	}
	return false
}
