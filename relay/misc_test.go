package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

func TestHTTPRevocations(t *testing.T) {
	const secret = "internal-secret"
	var mu sync.Mutex
	revoked := []string{}
	dir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/internal/revocations" || r.Header.Get("Authorization") != "Bearer "+secret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		after, err := strconv.Atoi(r.URL.Query().Get("after"))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		subs := []string{}
		if after < len(revoked) {
			subs = revoked[after:]
		}
		json.NewEncoder(w).Encode(map[string]any{"subs": subs, "next": len(revoked)})
	}))
	defer dir.Close()

	src := NewHTTPRevocations(dir.URL+"/", secret, nil)
	subs, next, err := src.RevokedSince(context.Background(), 0)
	if err != nil || len(subs) != 0 || next != 0 {
		t.Fatalf("empty: %v %d %v", subs, next, err)
	}
	if _, _, err := NewHTTPRevocations(dir.URL, "wrong", nil).RevokedSince(context.Background(), 0); err == nil {
		t.Fatal("wrong secret accepted")
	}

	tr := startRelay(t, Config{NoSync: true, Revocations: src, RevocationPoll: 20 * time.Millisecond})
	tok := mint(t, "eve", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	mu.Lock()
	revoked = append(revoked, "someone-else", "eve")
	mu.Unlock()
	c.expectError("forbidden")
	if code, _ := httpGet(t, tr.URL+"/v1/sync?channel="+chA, tok); code != 403 {
		t.Fatalf("revoked read: %d", code)
	}
}

func TestMethodsAndUnknownPaths(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"POST", "/v1/messages", 405},
		{"DELETE", "/v1/sync", 405},
		{"POST", "/health", 405},
		{"GET", "/nope", 404},
		{"GET", "/ws", 426}, // not an upgrade request
		{"GET", "/ws/acme/pay/agent", 426},
	} {
		req, _ := http.NewRequest(tc.method, tr.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		jerr := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.code)
		}
		if jerr != nil || body["error"] == nil || body["message"] == nil || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: answer is not a JSON error (%v): %v", tc.method, tc.path, jerr, body)
		}
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogsHoldNoSecrets(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tr := startRelay(t, Config{NoSync: true, Logger: log})
	tok := mint(t, "alice", "")
	payload := []byte("very secret ciphertext bytes")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	c.publishAck(chA, payload)
	bad := dialWS(t, tr.URL, "/ws")
	bad.send(map[string]string{"type": "auth", "token": tok + "x"})
	bad.expectError("unauthorized")
	bad.expectClose(websocket.StatusPolicyViolation)
	httpGet(t, tr.URL+"/v1/sync?channel="+chA, tok)
	httpGet(t, tr.URL+"/v1/sync?channel="+chA, "not-a-token")
	// A client that puts its token in the path does not get it logged.
	httpGet(t, tr.URL+"/v1/messages/"+tok, "")
	short := dialWS(t, tr.URL, "/ws/acme/"+tok[:40]+"/y")
	short.c.CloseNow()
	c.c.CloseNow()
	tr.stop(t)

	out := buf.String()
	for _, secret := range []string{tok, tok[:40], tok[strings.LastIndexByte(tok, '.')+1:], string(testSecret),
		base64.StdEncoding.EncodeToString(payload), string(payload), "not-a-token"} {
		if strings.Contains(out, secret) {
			t.Fatalf("log contains a secret %q:\n%s", secret, out)
		}
	}
	for _, want := range []string{"connection opened", "authenticated", "authentication failed", "request", "closed"} {
		if !strings.Contains(out, want) {
			t.Errorf("log has no %q line:\n%s", want, out)
		}
	}
}
