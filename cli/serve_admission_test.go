package cli

import (
	"context"
	"fmt"
	"net"
	"net/http"
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
