package cli

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/skytale-oss/skytale/internal/jwt"
)

// TestServeIdleSocketsCannotFillRelay reproduces "65 accounts holding 64
// idle WebSockets each took all 4096 connections; the relay's /health
// then timed out" at a small scale: 30 accounts open 120 idle,
// authenticated sockets from many addresses against a listener cap of
// 64. The relay keeps its sockets an eighth below the listener's cap and
// closes the idle longest for each new login, so the public /health still
// answers and an honest login still gets in.
func TestServeIdleSocketsCannotFillRelay(t *testing.T) {
	data := t.TempDir()
	p := serveInProcess(t, serveOptions{Data: data, MaxConns: 64})
	secret, err := os.ReadFile(filepath.Join(data, "jwt_secret"))
	if err != nil {
		t.Fatal(err)
	}
	token := func(sub string) string {
		tok, err := jwt.Mint([]byte(strings.TrimSpace(string(secret))), jwt.Claims{Subject: sub, Audience: jwt.AudienceRelay,
			IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	login := func(local, sub string) (*websocket.Conn, error) {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.relURL, "http")+"/ws", &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.CloseNow() })
		if err := wsjson.Write(ctx, c, frame{Type: "auth", Token: token(sub)}); err != nil {
			return nil, err
		}
		var f frame
		if err := wsjson.Read(ctx, c, &f); err != nil || f.Type != "ok" {
			return nil, fmt.Errorf("auth: %+v %v", f, err)
		}
		return c, nil
	}
	for i := range 120 {
		if _, err := login(fmt.Sprintf("127.%d.%d.1", 1+i/250, i%250), fmt.Sprint("idle-", i/4)); err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(p.relURL + "/health")
	if err != nil {
		t.Fatalf("the relay's /health under idle sockets: %v", err)
	}
	resp.Body.Close()
	if _, err := login("127.0.0.2", "alice"); err != nil {
		t.Fatalf("an honest login: %v", err)
	}
}

// TestServeCrowdOfNetworksCannotFillListener: four /24s, each within its
// share of a plane's connections, hold all of them with idle keep-alive
// connections (each used once, then left open). A client from elsewhere
// still gets in, on both planes: at the cap the listener closes the
// connection quiet longest for it instead of leaving it in the kernel's
// queue until an idle timeout.
func TestServeCrowdOfNetworksCannotFillListener(t *testing.T) {
	p := serveInProcess(t, serveOptions{Data: t.TempDir(), MaxConns: 64, admissionOptions: admissionOptions{
		// Loopback stands for the public: only an address nobody uses is
		// a trusted proxy (which the caps exempt).
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.255.255.254/32")},
		MaxConnsPerNet: 16,
	}})
	for _, base := range []string{p.apiURL, p.relURL} {
		host := strings.TrimPrefix(base, "http://")
		for i := range 64 {
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.40.%d.%d", i/16, 1+i%16/4))}}
			c, err := d.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(20 * time.Second))
			fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("crowd connection %d: %v", i, err)
			}
			resp.Body.Close()
		}
		resp, err := (&http.Client{Timeout: 20 * time.Second}).Get(base + "/health")
		if err != nil {
			t.Fatalf("%s/health with the listener full of idle connections: %v", base, err)
		}
		resp.Body.Close()
	}
}
