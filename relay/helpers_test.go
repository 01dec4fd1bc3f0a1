package relay

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

var testSecret = []byte("relay-test-secret-0123456789abcdef")

type testRelay struct {
	*Server
	URL string
	hs  *httptest.Server
	// inCluster: other relays of the process are still running when this
	// one stops, so the goroutine check waits for the last of them.
	inCluster bool
}

// startRelay runs a relay on a loopback httptest server; the cleanup closes
// both and fails the test if a relay goroutine is left behind.
func startRelay(t testing.TB, cfg Config) *testRelay {
	t.Helper()
	if cfg.JWTSecret == nil {
		cfg.JWTSecret = testSecret
	}
	if cfg.Members == nil {
		// Tests that are not about membership use open channels; the
		// membership tests pass a MemberSet.
		cfg.OpenChannels = true
	}
	if _, ok := t.(*testing.B); ok && cfg.MaxConnsPerAccount == 0 {
		// The benchmarks open many sockets as one account.
		cfg.MaxConnsPerAccount = 1 << 20
		// ... from one address.
		setDefault(&cfg.MaxConns, 1<<20)
		setDefault(&cfg.MaxConnsPerAddr, 1<<20)
		setDefault(&cfg.MaxConnsPerNet, 1<<20)
		setDefault(&cfg.MaxUnauthConnsPerNet, 1<<20)
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	tr := &testRelay{Server: s, URL: hs.URL, hs: hs}
	t.Cleanup(func() { tr.stop(t) })
	return tr
}

func (tr *testRelay) stop(t testing.TB) {
	if tr.hs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	tr.hs.Close()
	tr.hs = nil
	if !tr.inCluster {
		checkNoRelayGoroutines(t)
	}
}

// checkNoRelayGoroutines fails if a goroutine running relay code (other
// than the test itself) is still alive a moment after Close.
func checkNoRelayGoroutines(t testing.TB) {
	t.Helper()
	err := waitfor.Poll(2*time.Second, func() error {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var stacks string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if (strings.Contains(g, "skytale/relay.") || strings.Contains(g, "skytale/relay/jsarchive.") || strings.Contains(g, "skytale/relay/internal/")) && !strings.Contains(g, "_test.go") {
				stacks += g + "\n\n"
			}
		}
		if stacks != "" {
			return fmt.Errorf("relay goroutines left after Close:\n%s", stacks)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func mint(t testing.TB, sub, ch string) string {
	t.Helper()
	return mintAt(t, sub, ch, time.Now())
}

func mintAt(t testing.TB, sub, ch string, at time.Time) string {
	t.Helper()
	tok, err := jwt.Mint(testSecret, jwt.Claims{Subject: sub, Audience: jwt.AudienceRelay, Channel: ch,
		IssuedAt: at, ExpiresAt: at.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type wsClient struct {
	t testing.TB
	c *websocket.Conn
	// wait is how long recv waits for a frame; 0 for 5 s.
	wait time.Duration
}

func dialWS(t testing.TB, base, path string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(4 << 20)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, c: c}
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		w.t.Fatal(err)
	}
	w.sendRaw(websocket.MessageText, b)
}

func (w *wsClient) sendRaw(typ websocket.MessageType, b []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(w.wait, 5*time.Second))
	defer cancel()
	if err := w.c.Write(ctx, typ, b); err != nil {
		w.t.Fatal(err)
	}
}

// recv reads one frame as a generic JSON object.
func (w *wsClient) recv() map[string]any {
	w.t.Helper()
	m, err := w.tryRecv(cmp.Or(w.wait, 5*time.Second))
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

// expectQuiet checks that nothing is queued for the client: a probe frame's
// error reply must be the next frame. (A read with a deadline cannot be
// used: the WebSocket library closes the connection when it expires.)
func (w *wsClient) expectQuiet() {
	w.t.Helper()
	w.send(map[string]string{"type": "probe"})
	w.expectError("unknown_type")
}

func (w *wsClient) tryRecv(d time.Duration) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, b, err := w.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		w.t.Fatalf("relay sent non-JSON frame %q", b)
	}
	return m, nil
}

// expect reads a frame and checks the given fields.
func (w *wsClient) expect(want map[string]any) map[string]any {
	w.t.Helper()
	m := w.recv()
	for k, v := range want {
		if got, ok := m[k]; !ok || !jsonEqual(got, v) {
			w.t.Fatalf("frame %v: %s = %v, want %v", m, k, got, v)
		}
	}
	return m
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func (w *wsClient) expectError(code string) map[string]any {
	w.t.Helper()
	m := w.expect(map[string]any{"type": "error", "code": code})
	if s, _ := m["message"].(string); s == "" {
		w.t.Fatalf("error frame %v has no message", m)
	}
	return m
}

// expectClose reads until the connection ends and checks the close code.
func (w *wsClient) expectClose(code websocket.StatusCode) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		_, _, err := w.c.Read(ctx)
		if err != nil {
			if got := websocket.CloseStatus(err); got != code {
				w.t.Fatalf("connection ended with %v (status %d), want close %d", err, got, code)
			}
			return
		}
	}
}

func (w *wsClient) auth(tok string) {
	w.t.Helper()
	w.send(map[string]string{"type": "auth", "token": tok})
	w.expect(map[string]any{"type": "ok", "message": "authenticated"})
}

func (w *wsClient) subscribe(ch string) {
	w.t.Helper()
	w.send(map[string]string{"type": "subscribe", "channel": ch})
	w.expect(map[string]any{"type": "ok", "message": "subscribed to " + ch})
}

func (w *wsClient) publish(ch string, payload []byte) {
	w.t.Helper()
	w.send(map[string]string{"type": "publish", "channel": ch, "payload": base64.StdEncoding.EncodeToString(payload)})
}

// publishAck publishes and returns the acknowledged seq.
func (w *wsClient) publishAck(ch string, payload []byte) uint64 {
	w.t.Helper()
	w.publish(ch, payload)
	m := w.expect(map[string]any{"type": "ok", "message": "published"})
	seq, ok := m["seq"].(float64)
	if !ok {
		w.t.Fatalf("ack %v has no seq", m)
	}
	return uint64(seq)
}

func httpGet(t testing.TB, url, tok string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("GET %s: body is not JSON: %v", url, err)
	}
	return resp.StatusCode, m
}

// MLS headers built by hand (RFC 9420 §6).

func vlen(n int) []byte {
	switch {
	case n < 1<<6:
		return []byte{byte(n)}
	case n < 1<<14:
		return []byte{0x40 | byte(n>>8), byte(n)}
	default:
		return []byte{0x80 | byte(n>>24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[7-i] = byte(v >> (8 * i))
	}
	return b
}

// publicMessage returns a PublicMessage header with a member sender.
func publicMessage(groupID []byte, epoch uint64, contentType byte) []byte {
	b := []byte{0, 1, 0, 1}
	b = append(b, vlen(len(groupID))...)
	b = append(b, groupID...)
	b = append(b, u64(epoch)...)
	b = append(b, 1, 0, 0, 0, 3) // sender: member, leaf 3
	b = append(b, 0)             // authenticated_data: empty
	b = append(b, contentType)
	return append(b, "body"...)
}

func privateMessage(groupID []byte, epoch uint64, contentType byte) []byte {
	b := []byte{0, 1, 0, 2}
	b = append(b, vlen(len(groupID))...)
	b = append(b, groupID...)
	b = append(b, u64(epoch)...)
	b = append(b, contentType)
	return append(b, "ciphertext"...)
}

func welcome() []byte { return append([]byte{0, 1, 0, 3}, "welcome-body"...) }

// settled returns tr's archive once everything pushed or acknowledged so
// far is in its index: a file-backed archive acknowledges an entry once
// it is in the log, and indexes it after.
func settled(t testing.TB, tr *testRelay) backend.Archiver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.arch.WaitVisible(ctx); err != nil {
		t.Fatal(err)
	}
	return tr.arch
}
