package directory

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

// badChannelNames is every invalid channel-name shape.
var badChannelNames = map[string]string{
	"two parts":       "acme/pay",
	"four parts":      "acme/pay/agent/x",
	"one part":        "acme",
	"empty":           "",
	"empty middle":    "acme//agent",
	"empty first":     "/pay/agent",
	"empty last":      "acme/pay/",
	"257 bytes":       "acme/pay/" + strings.Repeat("x", 248),
	"space":           "acme/pay/age nt",
	"bang":            "acme/pay/agent!",
	"non-ascii":       "acme/pay/agënt",
	"nul":             "acme/pay/agent\x00",
	"question mark":   "acme/pay/a?b",
	"percent":         "acme/pay/a%2Fb",
	"backslash":       `acme/pay\x/agent`,
	"dot part":        "acme/./agent",
	"dotdot part":     "acme/../agent",
	"trailing dot":    "acme/pay/.",
	"trailing dotdot": "acme/pay/..",
	"leading dot":     "./pay/agent",
}

func TestChannelName256BytesIsAccepted(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.account("acme")
	name := "acme/pay/" + strings.Repeat("x", 247)
	if len(name) != 256 {
		t.Fatal(len(name))
	}
	e.channel(key, name)
}

// TestHostileInputs sends every kind of bad request and checks the exact
// answer, and that the store is byte-for-byte unchanged afterwards.
func TestHostileInputs(t *testing.T) {
	e := newEnv(t, nil)
	ownerID, owner := e.account("acme")
	_, joiner := e.account("globex")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	inv := e.invite(owner, ch, 5)
	reqID := e.join(joiner, ch, inv, "did:web:a", []byte("kp")).str("request_id")
	kp := base64.StdEncoding.EncodeToString([]byte("key package"))

	type tc struct {
		name, method, path, auth string
		body                     any
		status                   int
		code                     string
	}
	var cases []tc
	add := func(name, method, path, auth string, body any, status int, code string) {
		cases = append(cases, tc{name, method, path, auth, body, status, code})
	}

	// Malformed JSON, wrong types, unknown fields, trailing data, oversized bodies.
	bodies := []struct {
		name, path string
		good       map[string]any
		cap        int
		method     string // "" for POST
	}{
		{"register", "/v1/channels", map[string]any{"name": "acme/pay/new"}, smallBody, ""},
		{"invite", "/v1/channels/invites", map[string]any{"channel": ch}, smallBody, ""},
		{"join", "/v1/channels/join", map[string]any{"channel": ch, "token": inv, "key_package": kp, "identity": "did:web:b"}, joinBody, ""},
		{"welcome", "/v1/channels/welcome", map[string]any{"request_id": reqID, "welcome": kp}, welcomeBody, ""},
		{"federation", "/v1/federation/invites", map[string]any{"channel": ch, "org": "globex"}, smallBody, ""},
		{"seat", "/v1/seats", map[string]any{"identity": "did:key:z6Mk", "channel": ch}, smallBody, ""},
		{"approve", "/v1/device/grants/approve", map[string]any{"user_code": "BCDF-GHJK"}, approveBody, ""},
		{"revoke", "/v1/revocations", map[string]any{"did": "did:skytale:" + ownerID}, smallBody, ""},
		{"tokens", "/v1/tokens", map[string]any{"ttl_seconds": 60}, smallBody, ""},
		{"keypackages", "/v1/keypackages", map[string]any{"device": "did:key:z", "key_packages": []string{kp}, "last_resort": kp}, stockBody, ""},
		{"claim", "/v1/keypackages/claim", map[string]any{"account_id": ownerID, "channel": ch}, smallBody, ""},
		{"inbox", "/v1/inbox", map[string]any{"claim_id": "x", "welcome": kp}, welcomeBody, ""},
		{"groupinfo", "/v1/channels/groupinfo", map[string]any{"channel": ch, "epoch": 1, "group_info": kp}, groupInfoBody, "PUT"},
		{"auto invite", "/v1/channels/invites", map[string]any{"channel": ch, "auto": true}, smallBody, ""},
	}
	for _, b := range bodies {
		method := b.method
		if method == "" {
			method = "POST"
		}
		for _, bad := range []struct{ name, body string }{
			{"truncated", `{"a":`},
			{"not json", `hello`},
			{"array", `[]`},
			{"string", `"x"`},
			{"trailing data", `{}{}`},
			{"trailing garbage", `{} x`},
		} {
			add(b.name+"/"+bad.name, method, b.path, owner, bad.body, 400, "invalid_json")
		}
		if b.name != "tokens" { // an empty body means "all defaults" there
			add(b.name+"/empty body", method, b.path, owner, "", 400, "invalid_json")
		}
		for field := range b.good {
			wrong := map[string]any{}
			for k, v := range b.good {
				wrong[k] = v
			}
			wrong[field] = []int{1}
			add(b.name+"/wrong type "+field, method, b.path, owner, wrong, 400, "invalid_json")
		}
		extra := map[string]any{"unexpected": true}
		for k, v := range b.good {
			extra[k] = v
		}
		add(b.name+"/unknown field", method, b.path, owner, extra, 400, "invalid_json")
		add(b.name+"/oversized", method, b.path, owner, `{"x":"`+strings.Repeat("a", b.cap)+`"}`, 413, "body_too_large")
	}
	add("accounts/oversized", "POST", "/v1/accounts", "", `{"email":"`+strings.Repeat("a", smallBody)+`"}`, 413, "body_too_large")
	add("accounts/unknown field", "POST", "/v1/accounts", "", `{"email":"a@b.c","org":"x","role":"admin"}`, 400, "invalid_json")
	add("grant/oversized", "POST", "/v1/device/grants", "", `{"label":"`+strings.Repeat("a", smallBody)+`"}`, 413, "body_too_large")
	add("grant/malformed", "POST", "/v1/device/grants", "", `{"device_key":`, 400, "invalid_json")
	add("max_uses float", "POST", "/v1/channels/invites", owner, `{"channel":"acme/pay/agent","max_uses":1.5}`, 400, "invalid_json")
	add("max_uses string", "POST", "/v1/channels/invites", owner, `{"channel":"acme/pay/agent","max_uses":"5"}`, 400, "invalid_json")
	add("max_uses zero", "POST", "/v1/channels/invites", owner, `{"channel":"acme/pay/agent","max_uses":0}`, 400, "invalid_request")
	add("ttl null is absent", "POST", "/v1/channels/invites", joiner, `{"channel":"acme/pay/agent","ttl_seconds":null}`, 403, "not_owner")
	add("null body", "POST", "/v1/channels", owner, `null`, 400, "invalid_channel")

	// Every invalid channel-name shape, on every endpoint that takes a name.
	for shape, name := range badChannelNames {
		add("register/"+shape, "POST", "/v1/channels", owner, map[string]any{"name": name}, 400, "invalid_channel")
		add("invite/"+shape, "POST", "/v1/channels/invites", owner, map[string]any{"channel": name}, 400, "invalid_channel")
		add("join/"+shape, "POST", "/v1/channels/join", joiner, map[string]any{"channel": name, "token": inv, "key_package": kp, "identity": "did:web:b"}, 400, "invalid_channel")
		add("pending/"+shape, "GET", "/v1/channels/pending?channel="+url.QueryEscape(name), owner, nil, 400, "invalid_channel")
		add("federation/"+shape, "POST", "/v1/federation/invites", owner, map[string]any{"channel": name, "org": "globex"}, 400, "invalid_channel")
		add("seat/"+shape, "POST", "/v1/seats", owner, map[string]any{"identity": "did:key:z6Mk", "channel": name}, 400, "invalid_channel")
		add("claim/"+shape, "POST", "/v1/keypackages/claim", owner, map[string]any{"account_id": ownerID, "channel": name}, 400, "invalid_channel")
		add("groupinfo put/"+shape, "PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": name, "epoch": 1, "group_info": kp}, 400, "invalid_channel")
		add("groupinfo get/"+shape, "GET", "/v1/channels/groupinfo?channel="+url.QueryEscape(name), owner, nil, 400, "invalid_channel")
	}
	add("pending/no channel", "GET", "/v1/channels/pending", owner, nil, 400, "invalid_channel")

	// Bad base64.
	for shape, b64 := range map[string]string{
		"garbage":       "not base64!",
		"unpadded":      "YQ",
		"short padding": "YQ=",
		"url alphabet":  "-_8A",
		"noncanonical":  "YR==",
		"inner padding": "YQ==YQ==",
	} {
		add("join/base64 "+shape, "POST", "/v1/channels/join", joiner, map[string]any{"channel": ch, "token": inv, "key_package": b64, "identity": "did:web:b"}, 400, "invalid_base64")
		add("welcome/base64 "+shape, "POST", "/v1/channels/welcome", owner, map[string]any{"request_id": reqID, "welcome": b64}, 400, "invalid_base64")
		add("keypackages/base64 "+shape, "POST", "/v1/keypackages", owner, map[string]any{"device": "d", "key_packages": []string{b64}}, 400, "invalid_base64")
		add("last resort/base64 "+shape, "POST", "/v1/keypackages", owner, map[string]any{"device": "d", "last_resort": b64}, 400, "invalid_base64")
		add("inbox/base64 "+shape, "POST", "/v1/inbox", owner, map[string]any{"claim_id": "x", "welcome": b64}, 400, "invalid_base64")
		add("groupinfo/base64 "+shape, "PUT", "/v1/channels/groupinfo", owner, map[string]any{"channel": ch, "epoch": 1, "group_info": b64}, 400, "invalid_base64")
	}
	add("join/empty key package", "POST", "/v1/channels/join", joiner, map[string]any{"channel": ch, "token": inv, "key_package": "", "identity": "did:web:b"}, 400, "invalid_request")
	add("join/key package too big", "POST", "/v1/channels/join", joiner, map[string]any{"channel": ch, "token": inv, "key_package": base64.StdEncoding.EncodeToString(make([]byte, MaxKeyPackage+1)), "identity": "did:web:b"}, 413, "payload_too_large")
	add("join/identity too long", "POST", "/v1/channels/join", joiner, map[string]any{"channel": ch, "token": inv, "key_package": kp, "identity": strings.Repeat("x", 257)}, 400, "invalid_request")
	add("join/no token", "POST", "/v1/channels/join", joiner, map[string]any{"channel": ch, "key_package": kp, "identity": "did:web:b"}, 400, "invalid_request")
	add("join/bad token", "POST", "/v1/channels/join", joiner, map[string]any{"channel": ch, "token": "skt_inv_x", "key_package": kp, "identity": "did:web:b"}, 403, "invalid_invite")
	add("join/bad federation token", "POST", "/v1/channels/join", joiner, map[string]any{"channel": ch, "token": inv, "federation_token": "skt_fed_x", "key_package": kp, "identity": "did:web:b"}, 403, "invalid_federation_token")
	add("welcome/unknown request", "POST", "/v1/channels/welcome", owner, map[string]any{"request_id": "nope", "welcome": kp}, 404, "not_found")
	add("welcome/not owner", "POST", "/v1/channels/welcome", joiner, map[string]any{"request_id": reqID, "welcome": kp}, 404, "not_found")
	add("poll/not mine", "GET", "/v1/channels/welcome/"+reqID, owner, nil, 404, "not_found")
	add("ack/not mine", "POST", "/v1/channels/welcome/"+reqID+"/ack", owner, nil, 200, "")
	add("ack/pending", "POST", "/v1/channels/welcome/"+reqID+"/ack", joiner, nil, 200, "")
	add("revoke/other", "POST", "/v1/revocations", joiner, map[string]any{"did": "did:skytale:" + ownerID}, 403, "forbidden")
	add("revoke/not a did", "POST", "/v1/revocations", owner, map[string]any{"did": ownerID}, 400, "invalid_request")
	add("internal/no secret", "GET", "/v1/internal/revocations", owner, nil, 401, "unauthorized")

	// Credentials.
	now := e.clock.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": "skytale-api", "aud": "skytale-api", "sub": ownerID, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	hs256 := map[string]any{"alg": "HS256", "typ": "JWT"}
	good := craftJWT(hs256, claims(nil), testJWTSecret)
	parts := strings.Split(good, ".")
	otherSub, _ := json.Marshal(claims(func(c map[string]any) { c["sub"] = "someone-else" }))
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(otherSub) + "." + parts[2]
	creds := map[string]string{
		"alg none":          craftJWT(map[string]any{"alg": "none", "typ": "JWT"}, claims(nil), nil),
		"alg none signed":   craftJWT(map[string]any{"alg": "none", "typ": "JWT"}, claims(nil), testJWTSecret),
		"alg HS512":         craftJWT(map[string]any{"alg": "HS512", "typ": "JWT"}, claims(nil), testJWTSecret),
		"wrong key":         craftJWT(hs256, claims(nil), []byte("another secret entirely")),
		"expired":           craftJWT(hs256, claims(func(c map[string]any) { c["exp"] = now.Add(-time.Second).Unix() }), testJWTSecret),
		"no exp":            craftJWT(hs256, claims(func(c map[string]any) { delete(c, "exp") }), testJWTSecret),
		"no iat":            craftJWT(hs256, claims(func(c map[string]any) { delete(c, "iat") }), testJWTSecret),
		"ten-year lifetime": craftJWT(hs256, claims(func(c map[string]any) { c["exp"] = now.AddDate(10, 0, 0).Unix() }), testJWTSecret),
		"301 s lifetime":    craftJWT(hs256, claims(func(c map[string]any) { c["exp"] = now.Add(301 * time.Second).Unix() }), testJWTSecret),
		"future iat": craftJWT(hs256, claims(func(c map[string]any) {
			c["iat"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(time.Hour+time.Minute).Unix()
		}), testJWTSecret),
		"wrong iss":           craftJWT(hs256, claims(func(c map[string]any) { c["iss"] = "evil" }), testJWTSecret),
		"no iss":              craftJWT(hs256, claims(func(c map[string]any) { delete(c, "iss") }), testJWTSecret),
		"wrong aud":           craftJWT(hs256, claims(func(c map[string]any) { c["aud"] = "evil" }), testJWTSecret),
		"relay aud":           craftJWT(hs256, claims(func(c map[string]any) { c["aud"] = "skytale-relay" }), testJWTSecret),
		"unknown sub":         craftJWT(hs256, claims(func(c map[string]any) { c["sub"] = "no-such-account" }), testJWTSecret),
		"tampered":            tampered,
		"truncated signature": good[:len(good)-4],
		"garbage":             "abc.def.ghi",
		"unknown api key":     "sk_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"unknown chan key":    "sk_chan_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"internal secret":     testInternalSecret,
	}
	for name, cred := range creds {
		add("auth/"+name, "POST", "/v1/channels", cred, map[string]any{"name": "acme/pay/new"}, 401, "unauthorized")
		add("auth/"+name+"/pending", "GET", "/v1/channels/pending?channel="+ch, cred, nil, 401, "unauthorized")
	}
	add("auth/none", "POST", "/v1/channels", "", map[string]any{"name": "acme/pay/new"}, 401, "unauthorized")

	// The control: the hand-built token is accepted, so the refusals above
	// are about what each one changes.
	want(t, e.do("GET", "/v1/channels/pending?channel="+ch, good, nil), 200, "")

	before := e.snapshot()
	for _, c := range cases {
		r := e.do(c.method, c.path, c.auth, c.body)
		if r.status != c.status || r.code() != c.code {
			t.Errorf("%s: got %s, want %d %q", c.name, r, c.status, c.code)
		}
		if c.status >= 400 && r.str("message") == "" {
			t.Errorf("%s: no message", c.name)
		}
		if after := e.snapshot(); after != before {
			t.Errorf("%s: the store changed", c.name)
		}
		for _, secret := range []string{inv, owner, joiner, testInternalSecret, string(testJWTSecret)} {
			if strings.Contains(string(r.raw), secret) {
				t.Errorf("%s: the answer echoes a secret", c.name)
			}
		}
	}
	t.Logf("%d hostile requests", len(cases))

	// The snapshot does see changes: an accepted join alters it.
	want(t, e.join(joiner, ch, inv, "did:web:c", []byte("kp")), 201, "")
	if e.snapshot() == before {
		t.Fatal("snapshot is blind to an accepted join")
	}
}
