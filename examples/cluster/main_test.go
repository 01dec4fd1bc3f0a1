package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/pgtest"
	"github.com/skytale-oss/skytale/seat"
)

// TestCluster starts the cluster and sends a message through relay 1 to
// a subscriber on relay 3.
func TestCluster(t *testing.T) {
	c, err := start(t.TempDir(), 3, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func(path, bearer string, in, out any) {
		t.Helper()
		b, _ := json.Marshal(in)
		req, _ := http.NewRequestWithContext(ctx, "POST", c.DirURL+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
		if out != nil {
			json.NewDecoder(resp.Body).Decode(out)
		}
	}
	var acct struct {
		APIKey string `json:"api_key"`
	}
	call("/v1/accounts", "", map[string]string{"email": "ops@acme.example", "org": "acme"}, &acct)
	var tok struct {
		Token string `json:"token"`
	}
	call("/v1/tokens", acct.APIKey, map[string]any{}, &tok)
	const ch = "acme/demo/chat"
	call("/v1/channels", tok.Token, map[string]string{"name": ch}, nil)

	dial := func(base string) *websocket.Conn {
		t.Helper()
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/"+ch, nil)
		if err != nil {
			t.Fatal(err)
		}
		wsjson.Write(ctx, ws, map[string]string{"type": "auth", "token": tok.Token})
		var ok map[string]any
		if err := wsjson.Read(ctx, ws, &ok); err != nil || ok["type"] != "ok" {
			t.Fatalf("auth: %v %v", ok, err)
		}
		return ws
	}
	pub, sub := dial(c.RelayURLs[0]), dial(c.RelayURLs[2])
	defer pub.CloseNow()
	defer sub.CloseNow()
	wsjson.Write(ctx, pub, map[string]string{"type": "publish", "channel": ch, "payload": "aGVsbG8="})
	var ack, got map[string]any
	if err := wsjson.Read(ctx, pub, &ack); err != nil || ack["message"] != "published" {
		t.Fatalf("publish: %v %v", ack, err)
	}
	if err := wsjson.Read(ctx, sub, &got); err != nil || got["payload"] != "aGVsbG8=" || got["seq"] != ack["seq"] {
		t.Fatalf("relay 3 pushed %v (%v), relay 1 acked %v", got, err, ack)
	}
	var out strings.Builder
	c.print(&out)
	if n := strings.Count(out.String(), "relay "); n != 3 {
		t.Fatalf("printed %d relays:\n%s", n, out.String())
	}
}

// TestClusterSeatsOnPostgres runs the cluster with its directory on a real
// PostgreSQL and two seats on different relay nodes: a room made through
// node 1 is joined through node 3, and messages cross the nodes both ways.
func TestClusterSeatsOnPostgres(t *testing.T) {
	pg, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		if errors.Is(err, pgtest.ErrUnavailable) && os.Getenv("CI") == "" {
			t.Skipf("PostgreSQL not available: %v", err)
		}
		t.Fatal(err)
	}
	defer pg.Close()
	ctx := context.Background()
	url, err := pg.NewSchema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := start(t.TempDir(), 3, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	open := func(node int, org string) *seat.Seat {
		t.Helper()
		s, err := seat.Open(ctx, seat.Config{Home: t.TempDir(), APIURL: c.DirURL, RelayURL: c.RelayURLs[node], Cover: cover.Config{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		if _, err := s.Init(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SignIn(ctx, org+"@example.test", org); err != nil {
			t.Fatal(err)
		}
		return s
	}
	alice, bob := open(0, "acme"), open(2, "bobco")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Room(room).Join(ctx, tok, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		from, to *seat.Seat
		text     string
	}{{alice, bob, "through node 1"}, {bob, alice, "through node 3"}} {
		if _, err := m.from.Room(room).Send(ctx, m.text); err != nil {
			t.Fatal(err)
		}
		msgs, err := m.to.Room(room).Sync(ctx)
		if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Text != m.text {
			t.Fatalf("read %+v %v, want %q", msgs, err, m.text)
		}
	}
}
