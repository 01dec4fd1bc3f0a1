package relay

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"hash"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// craftJWT builds a token by hand: the header and claims as given, signed
// with HMAC over key (SHA-512 when the header says HS512), or unsigned when
// key is nil.
func craftJWT(t *testing.T, header, claims map[string]any, key []byte) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(header) + "." + enc(claims)
	if key == nil {
		return signing + "."
	}
	h := sha256.New
	if header["alg"] == "HS512" {
		h = func() hash.Hash { return sha512.New() }
	}
	m := hmac.New(h, key)
	m.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestHostileTokens presents every kind of bad JWT to each relay endpoint
// that takes one, and checks the exact answer and that the archive is
// unchanged.
func TestHostileTokens(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	good := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(good)
	c.publishAck(chA, []byte("before"))

	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		m := map[string]any{"iss": "skytale-api", "aud": "skytale-relay", "sub": "mallory",
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		if mod != nil {
			mod(m)
		}
		return m
	}
	hs256 := map[string]any{"alg": "HS256", "typ": "JWT"}
	control := craftJWT(t, hs256, claims(nil), testSecret)
	parts := strings.Split(control, ".")
	otherSub, _ := json.Marshal(claims(func(m map[string]any) { m["sub"] = "alice" }))
	tokens := map[string]string{
		"alg none":            craftJWT(t, map[string]any{"alg": "none", "typ": "JWT"}, claims(nil), nil),
		"alg none signed":     craftJWT(t, map[string]any{"alg": "none", "typ": "JWT"}, claims(nil), testSecret),
		"alg HS512":           craftJWT(t, map[string]any{"alg": "HS512", "typ": "JWT"}, claims(nil), testSecret),
		"wrong key":           craftJWT(t, hs256, claims(nil), []byte("another secret entirely")),
		"expired":             craftJWT(t, hs256, claims(func(m map[string]any) { m["exp"] = now.Add(-time.Second).Unix() }), testSecret),
		"no exp":              craftJWT(t, hs256, claims(func(m map[string]any) { delete(m, "exp") }), testSecret),
		"wrong iss":           craftJWT(t, hs256, claims(func(m map[string]any) { m["iss"] = "evil" }), testSecret),
		"no iss":              craftJWT(t, hs256, claims(func(m map[string]any) { delete(m, "iss") }), testSecret),
		"wrong aud":           craftJWT(t, hs256, claims(func(m map[string]any) { m["aud"] = "evil" }), testSecret),
		"no aud":              craftJWT(t, hs256, claims(func(m map[string]any) { delete(m, "aud") }), testSecret),
		"no sub":              craftJWT(t, hs256, claims(func(m map[string]any) { delete(m, "sub") }), testSecret),
		"tampered":            parts[0] + "." + base64.RawURLEncoding.EncodeToString(otherSub) + "." + parts[2],
		"truncated signature": control[:len(control)-4],
		"garbage":             "abc.def.ghi",
		"empty":               "",
	}

	// The control: the hand-built token is accepted, so each refusal below
	// is about what its token changes.
	if code, _ := httpGet(t, tr.URL+"/v1/sync?channel="+chA, control); code != 200 {
		t.Fatalf("control token refused: %d", code)
	}
	archive := func() string {
		var rows, chans int
		tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows)
		tr.db.QueryRow(`SELECT count(*) FROM channels`).Scan(&chans)
		return strings.Repeat("m", rows) + strings.Repeat("c", chans)
	}
	before := archive()

	for name, tok := range tokens {
		for _, path := range []string{"/v1/messages", "/v1/sync"} {
			code, m := httpGet(t, tr.URL+path+"?channel="+chA, tok)
			if code != 401 || m["error"] != "unauthorized" || m["message"] == "" {
				t.Errorf("%s on %s: %d %v, want 401 unauthorized", name, path, code, m)
			}
		}
		for _, path := range []string{"/ws", "/ws/" + chA} {
			w := dialWS(t, tr.URL, path)
			w.send(map[string]string{"type": "auth", "token": tok})
			w.expectError("unauthorized")
			w.expectClose(websocket.StatusPolicyViolation)
		}
	}
	if after := archive(); after != before {
		t.Fatalf("the archive changed: %d rows/channels before, %d after", len(before), len(after))
	}
	// The good connection was not disturbed.
	if seq := c.publishAck(chA, []byte("after")); seq != 2 {
		t.Fatalf("seq after the hostile tokens %d, want 2", seq)
	}
}

// TestHostileChannelNames sends every invalid channel-name shape to each
// relay surface that takes a name, and checks that a 256-byte name is
// accepted.
func TestHostileChannelNames(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws")
	c.auth(tok)
	bad := map[string]string{
		"two parts":     "acme/pay",
		"four parts":    "acme/pay/agent/x",
		"empty":         "",
		"empty first":   "/pay/agent",
		"empty middle":  "acme//agent",
		"empty last":    "acme/pay/",
		"257 bytes":     "acme/pay/" + strings.Repeat("x", 248),
		"space":         "acme/pay/age nt",
		"bang":          "acme/pay/agent!",
		"non-ascii":     "acme/pay/agënt",
		"nul":           "acme/pay/agent\x00",
		"backslash":     `acme/pay\x/agent`,
		"dot part":      "acme/./agent",
		"dotdot part":   "acme/../agent",
		"leading dot":   "./pay/agent",
		"trailing dots": "acme/pay/..",
	}
	for shape, name := range bad {
		for _, path := range []string{"/v1/messages", "/v1/sync"} {
			code, m := httpGet(t, tr.URL+path+"?channel="+url.QueryEscape(name), tok)
			if code != 400 || m["error"] != "invalid_channel" || m["message"] == "" {
				t.Errorf("%s on %s: %d %v, want 400 invalid_channel", shape, path, code, m)
			}
		}
		c.send(map[string]string{"type": "subscribe", "channel": name})
		c.expectError("invalid_channel")
		c.send(map[string]string{"type": "publish", "channel": name, "payload": "YQ=="})
		c.expectError("invalid_channel")
	}
	var rows int
	tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows)
	if rows != 0 {
		t.Fatalf("%d rows archived after hostile names", rows)
	}

	longest := "acme/pay/" + strings.Repeat("x", 247)
	if len(longest) != 256 {
		t.Fatal(len(longest))
	}
	c.subscribe(longest)
	c.publishAck(longest, []byte("x"))
	if code, m := httpGet(t, tr.URL+"/v1/sync?channel="+url.QueryEscape(longest), tok); code != 200 || len(m["entries"].([]any)) != 1 {
		t.Fatalf("256-byte name: %d %v", code, m)
	}
}

// TestFrameOverReadLimit: a frame larger than any valid publish (base64 of
// 1 MiB plus the JSON around it) ends the connection with 1009, and
// nothing is archived.
func TestFrameOverReadLimit(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	big := base64.StdEncoding.EncodeToString(make([]byte, 2*MaxPayload))
	frame := `{"type":"publish","channel":"` + chA + `","payload":"` + big + `"}`
	// The relay may close before the whole frame is written; the close
	// code is what matters.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.c.Write(ctx, websocket.MessageText, []byte(frame))
	c.expectClose(websocket.StatusMessageTooBig)
	var rows int
	tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows)
	if rows != 0 {
		t.Fatalf("%d rows archived after an oversized frame", rows)
	}
}
