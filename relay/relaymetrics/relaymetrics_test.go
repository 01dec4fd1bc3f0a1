package relaymetrics_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/internal/metricstest"
	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/relay/relaymetrics"
)

var update = flag.Bool("update", false, "rewrite testdata/exposition.txt from the current output")

var secret = []byte("test-jwt-secret-0123456789abcdef")

// start runs a relay on loopback whose metrics go to reg until the test
// ends.
func start(t *testing.T, reg prometheus.Registerer) (*httptest.Server, *relay.Server) {
	t.Helper()
	s, err := relay.New(context.Background(), relay.Config{JWTSecret: secret, OpenChannels: true, NoSync: true, Metrics: relaymetrics.New(reg)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return ts, s
}

// session opens a WebSocket as account sub on ch, authenticated.
func session(t *testing.T, ts *httptest.Server, sub, ch string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/ws/"+ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	tok, err := jwt.Mint(secret, jwt.Claims{Subject: sub, Audience: jwt.AudienceRelay, IssuedAt: time.Now(), ExpiresAt: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	send(t, c, map[string]string{"type": "auth", "token": tok})
	expect(t, c, "authenticated")
	return c
}

func send(t *testing.T, c *websocket.Conn, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := c.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// expect reads frames until one whose message is want.
func expect(t *testing.T, c *websocket.Conn, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		if m["message"] == want {
			return
		}
	}
}

// TestExposition: the families, their help and their labels are those of
// testdata/exposition.txt, so a dashboard built on them keeps working.
func TestExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	start(t, reg)
	// Every value: the names, help, types and labels are the contract.
	got := metricstest.Exposition(t, reg, func(string) bool { return true })
	metricstest.Golden(t, filepath.Join("testdata", "exposition.txt"), got, *update)
}

// TestValues: a scrape reads the relay's counts, the commit histogram
// counts the archive's commits, no label names a channel or an account,
// and a second relay on the same registerer is refused before it serves.
func TestValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts, _ := start(t, reg)
	const ch = "acme/pay/general"
	a := session(t, ts, "alice", ch)
	session(t, ts, "bob", ch)
	send(t, a, map[string]string{"type": "publish", "channel": ch, "payload": base64.StdEncoding.EncodeToString([]byte("hello"))})
	expect(t, a, "published")

	for name, want := range map[string]float64{
		"skytale_relay_connections":               2,
		"skytale_relay_connections_authenticated": 2,
		"skytale_relay_subscriptions":             2,
		"skytale_relay_channels_live":             1,
		"skytale_relay_admissions_total":          2,
		"skytale_relay_backend_up":                1,
	} {
		if got := metricstest.Value(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := metricstest.Value(t, reg, "skytale_relay_publishes_total", "result", "ok"); got != 1 {
		t.Errorf("ok publishes %v, want 1", got)
	}
	if got := metricstest.Value(t, reg, "skytale_relay_stored_bytes"); got <= 0 {
		t.Errorf("stored bytes %v", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	commits := false
	for _, f := range families {
		if f.GetName() == "skytale_relay_archive_commit_seconds" && f.GetMetric()[0].GetHistogram().GetSampleCount() > 0 {
			commits = true
		}
	}
	if !commits {
		t.Error("no archive commit observed")
	}
	metricstest.Labels(t, reg, func(metric, label, v string) {
		if strings.Contains(v, "acme") || strings.Contains(v, "alice") || strings.Contains(v, "bob") {
			t.Errorf("%s has the label %s=%q", metric, label, v)
		}
	})

	if _, err := relay.New(context.Background(), relay.Config{JWTSecret: secret, OpenChannels: true, Metrics: relaymetrics.New(reg)}); err == nil {
		t.Error("two relays registered the same metrics")
	}
	m := relaymetrics.New(prometheus.NewRegistry())
	s2, err := relay.New(context.Background(), relay.Config{JWTSecret: secret, OpenChannels: true, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(context.Background())
	if _, err := relay.New(context.Background(), relay.Config{JWTSecret: secret, OpenChannels: true, Metrics: m}); err == nil {
		t.Error("one Metrics served two relays")
	}
}
