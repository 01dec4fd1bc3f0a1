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

// TestConnCapsShareTheOpenFileLimit: the listeners' caps together stay
// below the open-file limit; the relay takes three parts to the
// directory's one, a plane whose --max-conns fits leaves the rest to the
// other, and with no known limit every plane gets --max-conns.
func TestConnCapsShareTheOpenFileLimit(t *testing.T) {
	both := []plane{{name: "directory"}, {name: "relay"}}
	cases := []struct {
		name      string
		o         serveOptions
		planes    []plane
		openFiles int
		dir, rel  int
	}{
		{"no limit known", serveOptions{MaxConns: 4096}, both, 0, 4096, 4096},
		{"room for both", serveOptions{MaxConns: 4096}, both, 1 << 20, 4096, 4096},
		// 20000 less the reserve and the metrics: 19616, the relay's three
		// quarters 14712, and the directory's quarter 4904 fits 4096, so
		// the relay takes the rest.
		{"the directory fits its share", serveOptions{MaxConns: 16384, MetricsAddr: "127.0.0.1:0"}, both, 20000, 4904, 14712},
		{"the directory's want fits", serveOptions{MaxConns: 4096, MetricsAddr: "127.0.0.1:0"}, both, 20000, 4096, 4096},
		{"the relay's want fits, the directory takes the rest", serveOptions{MaxConns: 9000}, both, 20000, 9000, 9000},
		{"neither fits", serveOptions{MaxConns: 100000, admissionOptions: admissionOptions{HealthAddr: "127.0.0.1:0"}}, both, 20000, 4952, 14856},
		{"the relay alone", serveOptions{MaxConns: 100000}, []plane{{name: "relay"}}, 20000, 0, 19872},
		{"a tiny limit", serveOptions{MaxConns: 4096}, both, 130, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			caps := tc.o.connCaps(tc.planes, tc.openFiles)
			if caps["directory"] != tc.dir || caps["relay"] != tc.rel {
				t.Fatalf("directory %d, relay %d; want %d, %d", caps["directory"], caps["relay"], tc.dir, tc.rel)
			}
			if tc.openFiles > 0 {
				sum := fdReserve
				for _, p := range tc.planes {
					sum += caps[p.name]
				}
				if tc.o.MetricsAddr != "" {
					sum += caps["metrics"]
				}
				if tc.o.HealthAddr != "" {
					sum += caps["health"]
				}
				if sum > tc.openFiles && tc.openFiles > fdReserve+2 {
					t.Fatalf("the caps and the reserve hold %d files, over the limit %d", sum, tc.openFiles)
				}
			}
		})
	}
}
