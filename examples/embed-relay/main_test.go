package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
)

func TestEmbeddedRelay(t *testing.T) {
	h, closeRelay, err := newServer([]byte("an example secret of at least 32 bytes!"), "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer func() { srv.CloseClientConnections(); closeRelay(); srv.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := get("/"); !strings.Contains(got, "hello from the app") {
		t.Fatalf("app route: %q", got)
	}
	if got := get("/relay/health"); !strings.Contains(got, `"status":"ok"`) {
		t.Fatalf("relay health: %q", got)
	}

	token := func(ctx context.Context) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/token", nil)
		req.Header.Set("X-Demo-User", "3f1c9a4e-0000-4000-8000-000000000001")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var out struct{ Token string }
		return out.Token, json.NewDecoder(resp.Body).Decode(&out)
	}
	rc := &seat.RelayClient{BaseURL: srv.URL + "/relay", Token: token}
	sub, err := rc.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub, err := rc.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	const ch = "acme/app/events"
	for _, c := range []*seat.Conn{sub, pub} {
		if err := c.Subscribe(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pub.Publish(ctx, ch, []byte("opaque ciphertext")); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-sub.Pushes():
		if string(p.Payload) != "opaque ciphertext" || p.Seq != 1 {
			t.Fatalf("push %+v", p)
		}
	case <-ctx.Done():
		t.Fatal("no push")
	}
	msgs, _, err := rc.Messages(ctx, ch, 0, 10)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("backfill: %v, %v", msgs, err)
	}
}
