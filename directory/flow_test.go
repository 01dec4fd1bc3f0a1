package directory

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/jwt"
)

func TestHealth(t *testing.T) {
	e := newEnv(t, nil)
	e.clock.Advance(42 * time.Second)
	r := e.do("GET", "/health", "", nil)
	want(t, r, 200, "")
	if r.str("status") != "ok" || r.body["uptime"] != float64(42) {
		t.Fatalf("health = %s", r)
	}
}

func TestUnknownRoutesAnswerJSON(t *testing.T) {
	e := newEnv(t, nil)
	want(t, e.do("GET", "/v1/nope", "", nil), 404, "not_found")
	r := e.do("DELETE", "/v1/accounts", "", nil)
	want(t, r, 405, "method_not_allowed")
}

func TestAccountsAndKeys(t *testing.T) {
	e := newEnv(t, nil)
	id, key := e.account("acme")
	if !strings.HasPrefix(key, "sk_live_") || len(id) != 36 {
		t.Fatalf("account %q key %q", id, key)
	}
	// The raw key is stored nowhere; its hash is.
	snap := e.snapshot()
	if strings.Contains(snap, key) || strings.Contains(snap, strings.TrimPrefix(key, "sk_live_")) {
		t.Fatal("raw API key found in the database")
	}
	if !strings.Contains(snap, base64.StdEncoding.EncodeToString(hashSecret(key))) {
		t.Fatal("API key hash not stored")
	}

	bad := []struct {
		body string
		code string
	}{
		{`{"email":"x","org":"acme"}`, "invalid_request"},
		{`{"email":"a@b.c","org":""}`, "invalid_request"},
		{`{"email":"a@b.c","org":"a/b"}`, "invalid_request"},
		{`{"email":"a@b.c","org":".."}`, "invalid_request"},
		{`{"email":"a@b.c","org":"acme","admin":true}`, "invalid_json"},
	}
	for _, b := range bad {
		before := e.snapshot()
		want(t, e.do("POST", "/v1/accounts", "", b.body), 400, b.code)
		if e.snapshot() != before {
			t.Fatalf("%s changed the store", b.body)
		}
	}
}

func TestCreateAccountInProcess(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OpenSignup = false })
	id, key, err := e.s.CreateAccount(t.Context(), "ops@acme.example", "acme")
	if err != nil {
		t.Fatal(err)
	}
	tok := e.jwt(key, nil)
	c, err := jwt.Verify(testJWTSecret, tok, e.clock.Now(), jwt.AudienceAPI)
	if err != nil || c.Subject != id {
		t.Fatalf("claims %+v, %v", c, err)
	}
	if _, _, err := e.s.CreateAccount(t.Context(), "ops@acme.example", "a/b"); err == nil {
		t.Fatal("bad org accepted")
	}
	if _, _, err := e.s.CreateAccount(t.Context(), "nope", "acme"); err == nil {
		t.Fatal("bad email accepted")
	}
}

func TestClosedSignup(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OpenSignup = false })
	body := map[string]string{"email": "a@example.com", "org": "acme"}
	want(t, e.do("POST", "/v1/accounts", "", body), 401, "unauthorized")
	want(t, e.do("POST", "/v1/accounts", "wrong-secret", body), 401, "unauthorized")
	r := e.do("POST", "/v1/accounts", testInternalSecret, body)
	want(t, r, 201, "")
	if r.str("org") != "acme" || !strings.HasPrefix(r.str("api_key"), "sk_live_") {
		t.Fatalf("account = %s", r)
	}
}

func TestTokens(t *testing.T) {
	e := newEnv(t, nil)
	id, key := e.account("acme")

	r := e.do("POST", "/v1/tokens", key, nil)
	want(t, r, 201, "")
	c, err := jwt.Verify(testJWTSecret, r.str("token"), e.clock.Now(), jwt.AudienceAPI)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != id || c.Channel != "" || c.ExpiresAt.Sub(e.clock.Now()) != 300*time.Second {
		t.Fatalf("claims %+v", c)
	}
	if exp, _ := time.Parse(time.RFC3339, r.str("expires_at")); !exp.Equal(c.ExpiresAt) {
		t.Fatalf("expires_at %q, exp %v", r.str("expires_at"), c.ExpiresAt)
	}

	r = e.do("POST", "/v1/tokens", key, map[string]any{"ttl_seconds": 1, "audience": "skytale-relay"})
	want(t, r, 201, "")
	c, err = jwt.Verify(testJWTSecret, r.str("token"), e.clock.Now(), jwt.AudienceRelay)
	if err != nil || c.ExpiresAt.Sub(e.clock.Now()) != time.Second {
		t.Fatalf("claims %+v, %v", c, err)
	}
	want(t, e.do("POST", "/v1/tokens", key, map[string]any{"ttl_seconds": 300}), 201, "")
	want(t, e.do("POST", "/v1/tokens", key, `{}`), 201, "")

	for _, body := range []string{`{"ttl_seconds":0}`, `{"ttl_seconds":301}`, `{"ttl_seconds":-5}`, `{"audience":"other"}`, `{"audience":""}`} {
		want(t, e.do("POST", "/v1/tokens", key, body), 400, "invalid_request")
	}
	want(t, e.do("POST", "/v1/tokens", key, `{"ttl_seconds":"60"}`), 400, "invalid_json")
	want(t, e.do("POST", "/v1/tokens", key, `{"ttl_seconds":1.5}`), 400, "invalid_json")
	want(t, e.do("POST", "/v1/tokens", key, `{"sub":"x"}`), 400, "invalid_json")

	// A JWT cannot mint JWTs; nothing but a valid API key can.
	tok := e.jwt(key, nil)
	want(t, e.do("POST", "/v1/tokens", tok, nil), 401, "unauthorized")
	want(t, e.do("POST", "/v1/tokens", "", nil), 401, "unauthorized")
	want(t, e.do("POST", "/v1/tokens", "sk_live_nope", nil), 401, "unauthorized")

	// Both credentials are accepted on directory endpoints.
	want(t, e.do("POST", "/v1/channels", tok, map[string]string{"name": "acme/a/b"}), 201, "")
	// A relay-audience token is not a directory credential.
	relayTok := e.jwt(key, map[string]any{"audience": "skytale-relay"})
	want(t, e.do("POST", "/v1/channels", relayTok, map[string]string{"name": "acme/a/b"}), 401, "unauthorized")
	// Tokens die with their expiry.
	e.clock.Advance(301 * time.Second)
	want(t, e.do("POST", "/v1/channels", tok, map[string]string{"name": "acme/a/b"}), 401, "unauthorized")
}

func TestChannelRegistration(t *testing.T) {
	e := newEnv(t, nil)
	_, a := e.account("acme")
	_, b := e.account("acme")
	_, other := e.account("globex")

	id := e.channel(a, "acme/payments/agent-v1")
	if again := e.channel(a, "acme/payments/agent-v1"); again != id {
		t.Fatalf("re-registering changed the id: %s then %s", id, again)
	}
	r := e.do("POST", "/v1/channels", a, map[string]string{"name": "acme/payments/agent-v1"})
	if r.str("name") != "acme/payments/agent-v1" {
		t.Fatalf("register = %s", r)
	}
	want(t, e.do("POST", "/v1/channels", b, map[string]string{"name": "acme/payments/agent-v1"}), 409, "channel_taken")
	want(t, e.do("POST", "/v1/channels", other, map[string]string{"name": "acme/payments/x"}), 403, "wrong_org")
	want(t, e.do("POST", "/v1/channels", other, map[string]string{"name": "globex/payments/agent-v1"}), 201, "")
}

func TestInvites(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	_, stranger := e.account("acme")
	e.channel(owner, "acme/pay/agent")

	r := e.do("POST", "/v1/channels/invites", owner, map[string]string{"channel": "acme/pay/agent"})
	want(t, r, 201, "")
	if !strings.HasPrefix(r.str("token"), "skt_inv_") {
		t.Fatalf("token %q", r.str("token"))
	}
	if exp, _ := time.Parse(time.RFC3339, r.str("expires_at")); !exp.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("default expiry %q", r.str("expires_at"))
	}
	if strings.Contains(e.snapshot(), r.str("token")) {
		t.Fatal("raw invite token stored")
	}
	for _, ok := range []map[string]any{
		{"max_uses": 1, "ttl_seconds": 60},
		{"max_uses": 100, "ttl_seconds": 604800},
	} {
		ok["channel"] = "acme/pay/agent"
		want(t, e.do("POST", "/v1/channels/invites", owner, ok), 201, "")
	}
	for _, bad := range []map[string]any{
		{"max_uses": 0}, {"max_uses": 101}, {"max_uses": -1},
		{"ttl_seconds": 59}, {"ttl_seconds": 604801}, {"ttl_seconds": 0},
	} {
		bad["channel"] = "acme/pay/agent"
		before := e.snapshot()
		want(t, e.do("POST", "/v1/channels/invites", owner, bad), 400, "invalid_request")
		if e.snapshot() != before {
			t.Fatalf("%v changed the store", bad)
		}
	}
	want(t, e.do("POST", "/v1/channels/invites", stranger, map[string]string{"channel": "acme/pay/agent"}), 403, "not_owner")
	want(t, e.do("POST", "/v1/channels/invites", owner, map[string]string{"channel": "acme/pay/none"}), 404, "channel_not_found")
}

// TestOwnerAndJoinerFlows runs the owner's add-loop (pending requests,
// one Welcome each) and the joiner's flow (join, poll, ack) with opaque
// bytes standing in for key packages and Welcomes.
func TestOwnerAndJoinerFlows(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	joinerID, joiner := e.account("globex")
	_, bystander := e.account("acme")
	const ch = "acme/payments/agent-v1"
	e.channel(owner, ch)
	inv := e.invite(owner, ch, 3)

	// Empty queue is an object with an empty array.
	r := e.do("GET", "/v1/channels/pending?channel=acme%2Fpayments%2Fagent-v1", owner, nil)
	want(t, r, 200, "")
	if string(bytes.TrimSpace(r.raw)) != `{"requests":[],"has_more":false}` {
		t.Fatalf("empty queue = %s", r.raw)
	}

	// Three joiners (one account may hold several requests) publish key packages.
	var ids []string
	for i := range 3 {
		kp := []byte(fmt.Sprintf("\x00\x01opaque key package %d\xff", i))
		r := e.join(joiner, ch, inv, fmt.Sprintf("did:web:agent%d.example.com", i), kp)
		want(t, r, 201, "")
		ids = append(ids, r.str("request_id"))
		e.clock.Advance(time.Second)
	}
	// The invite is used up.
	want(t, e.join(joiner, ch, inv, "did:web:late", []byte("kp")), 403, "invalid_invite")

	// Joiner polls: pending, no welcome field.
	r = e.do("GET", "/v1/channels/welcome/"+ids[0], joiner, nil)
	want(t, r, 200, "")
	if string(bytes.TrimSpace(r.raw)) != `{"status":"pending"}` {
		t.Fatalf("poll = %s", r.raw)
	}
	// Not the joiner's request, not the owner's either.
	want(t, e.do("GET", "/v1/channels/welcome/"+ids[0], owner, nil), 404, "not_found")
	want(t, e.do("GET", "/v1/channels/welcome/no-such-id", joiner, nil), 404, "not_found")

	// Owner-only queue, oldest first.
	want(t, e.do("GET", "/v1/channels/pending?channel="+ch, bystander, nil), 403, "not_owner")
	want(t, e.do("GET", "/v1/channels/pending?channel="+ch, joiner, nil), 403, "not_owner")
	want(t, e.do("GET", "/v1/channels/pending?channel=acme/payments/none", owner, nil), 404, "channel_not_found")

	// The add-loop: one request per cycle.
	for cycle := range 3 {
		r := e.do("GET", "/v1/channels/pending?channel="+ch, owner, nil)
		want(t, r, 200, "")
		reqs := r.body["requests"].([]any)
		if len(reqs) != 3-cycle {
			t.Fatalf("cycle %d: %d pending", cycle, len(reqs))
		}
		first := reqs[0].(map[string]any)
		if first["id"] != ids[cycle] || first["identity"] != fmt.Sprintf("did:web:agent%d.example.com", cycle) || first["account_id"] != joinerID {
			t.Fatalf("cycle %d: head of queue %v", cycle, first)
		}
		kp, _ := base64.StdEncoding.DecodeString(first["key_package"].(string))
		if string(kp) != fmt.Sprintf("\x00\x01opaque key package %d\xff", cycle) {
			t.Fatalf("key package %q", kp)
		}
		created, err := time.Parse(time.RFC3339, first["created_at"].(string))
		if err != nil || !created.Equal(newClock().Now().Add(time.Duration(cycle)*time.Second)) {
			t.Fatalf("created_at %v (%v)", first["created_at"], err)
		}
		welcome := append([]byte("opaque welcome for "), kp...)
		body := map[string]string{"request_id": ids[cycle], "welcome": base64.StdEncoding.EncodeToString(welcome)}
		// Only the owner may publish.
		want(t, e.do("POST", "/v1/channels/welcome", bystander, body), 404, "not_found")
		want(t, e.do("POST", "/v1/channels/welcome", joiner, body), 404, "not_found")
		r = e.do("POST", "/v1/channels/welcome", owner, body)
		want(t, r, 200, "")
		if string(bytes.TrimSpace(r.raw)) != `{"status":"completed","welcome":null}` {
			t.Fatalf("publish = %s", r.raw)
		}
		// Not pending any more.
		want(t, e.do("POST", "/v1/channels/welcome", owner, body), 404, "not_found")

		// The joiner gets it, then acks.
		r = e.do("GET", "/v1/channels/welcome/"+ids[cycle], joiner, nil)
		want(t, r, 200, "")
		got, _ := base64.StdEncoding.DecodeString(r.str("welcome"))
		if r.str("status") != "completed" || !bytes.Equal(got, welcome) {
			t.Fatalf("poll = %s", r)
		}
		want(t, e.do("POST", "/v1/channels/welcome/"+ids[cycle]+"/ack", bystander, nil), 200, "")
		if r := e.do("POST", "/v1/channels/welcome/"+ids[cycle]+"/ack", joiner, nil); string(bytes.TrimSpace(r.raw)) != `{"acked":true}` {
			t.Fatalf("ack = %s", r)
		}
		if r := e.do("POST", "/v1/channels/welcome/"+ids[cycle]+"/ack", joiner, nil); string(bytes.TrimSpace(r.raw)) != `{"acked":false}` {
			t.Fatalf("second ack = %s", r)
		}
		want(t, e.do("GET", "/v1/channels/welcome/"+ids[cycle], joiner, nil), 404, "not_found")
	}
	// Ack of an in-flight request is refused (acked false), and keeps it.
	r = e.join(joiner, ch, e.invite(owner, ch, 1), "did:web:x", []byte("kp"))
	want(t, r, 201, "")
	id := r.str("request_id")
	if r := e.do("POST", "/v1/channels/welcome/"+id+"/ack", joiner, nil); r.body["acked"] != false {
		t.Fatalf("ack of pending = %s", r)
	}
	want(t, e.do("GET", "/v1/channels/welcome/"+id, joiner, nil), 200, "")
}

func TestJoinLimits(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	_, joiner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	inv := e.invite(owner, ch, 100)

	check := func(r reply, status int, code string) {
		t.Helper()
		want(t, r, status, code)
	}
	check(e.join(joiner, ch, inv, "did:web:a", make([]byte, MaxKeyPackage)), 201, "")
	before := e.snapshot()
	check(e.join(joiner, ch, inv, "did:web:a", make([]byte, MaxKeyPackage+1)), 413, "payload_too_large")
	if e.snapshot() != before {
		t.Fatal("an oversized key package changed the store")
	}
	check(e.join(joiner, ch, inv, strings.Repeat("é", 256), []byte("kp")), 201, "")
	before = e.snapshot()
	check(e.join(joiner, ch, inv, strings.Repeat("é", 257), []byte("kp")), 400, "invalid_request")
	check(e.join(joiner, ch, inv, "", []byte("kp")), 400, "invalid_request")
	check(e.join(joiner, ch, inv, "did:web:a", nil), 400, "invalid_request")
	check(e.join(joiner, ch, "skt_inv_wrong", "did:web:a", []byte("kp")), 403, "invalid_invite")
	check(e.join(joiner, ch, "", "did:web:a", []byte("kp")), 400, "invalid_request")
	check(e.join(joiner, "acme/pay/none", inv, "did:web:a", []byte("kp")), 404, "channel_not_found")
	if e.snapshot() != before {
		t.Fatal("a refused join changed the store")
	}

	// An invite for one channel does not open another.
	e.channel(owner, "acme/pay/other")
	check(e.join(joiner, "acme/pay/other", inv, "did:web:a", []byte("kp")), 403, "invalid_invite")

	// Expiry.
	short := e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "ttl_seconds": 60}).str("token")
	e.clock.Advance(59 * time.Second)
	check(e.join(joiner, ch, short, "did:web:a", []byte("kp")), 201, "")
	short = e.do("POST", "/v1/channels/invites", owner, map[string]any{"channel": ch, "ttl_seconds": 60}).str("token")
	e.clock.Advance(60 * time.Second)
	check(e.join(joiner, ch, short, "did:web:a", []byte("kp")), 403, "invalid_invite")
}

func TestPendingCap(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	chID := e.channel(owner, ch)
	inv := e.invite(owner, ch, 100)
	var acct string
	e.queryRow(`SELECT account_id FROM api_keys LIMIT 1`).Scan(&acct)
	// Fill the queue to one below the cap directly.
	tx, err := e.s.store.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxPending - 1 {
		if _, err := tx.Exec(e.s.store.b.Rebind(`INSERT INTO join_requests (id, channel_id, account_id, identity, key_package, status, created_at, updated_at)
			VALUES (?, ?, ?, 'did:web:x', ?, 'pending', ?, ?)`), fmt.Sprint("fill-", i), chID, acct, []byte{0}, i, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	e.rebuildLedger()
	want(t, e.join(owner, ch, inv, "did:web:999", []byte("kp")), 201, "")
	before := e.snapshot()
	want(t, e.join(owner, ch, inv, "did:web:1000", []byte("kp")), 429, "too_many_pending")
	if e.snapshot() != before {
		t.Fatal("refused join consumed an invite use or queued a request")
	}
	// Completing one frees a slot.
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": "fill-0", "welcome": "AA=="}), 200, "")
	want(t, e.join(owner, ch, inv, "did:web:1000", []byte("kp")), 201, "")
}

func TestWelcomeLimits(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	const ch = "acme/pay/agent"
	e.channel(owner, ch)
	id := e.join(owner, ch, e.invite(owner, ch, 1), "did:web:a", []byte("kp")).str("request_id")
	big := base64.StdEncoding.EncodeToString(make([]byte, MaxWelcome+1))
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": id, "welcome": big}), 413, "payload_too_large")
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": id, "welcome": "%%%"}), 400, "invalid_base64")
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": "", "welcome": "AA=="}), 400, "invalid_request")
	max := base64.StdEncoding.EncodeToString(make([]byte, MaxWelcome))
	want(t, e.do("POST", "/v1/channels/welcome", owner, map[string]string{"request_id": id, "welcome": max}), 200, "")
	r := e.do("GET", "/v1/channels/welcome/"+id, owner, nil)
	if r.str("welcome") != max {
		t.Fatal("a maximal welcome did not round-trip")
	}
}

func TestFederation(t *testing.T) {
	e := newEnv(t, nil)
	_, owner := e.account("acme")
	_, partner := e.account("partner")
	_, partner2 := e.account("partner")
	_, outsider := e.account("globex")
	const ch = "acme/shared/agents"
	e.channel(owner, ch)

	body := map[string]any{"channel": ch, "org": "partner", "max_uses": 2, "ttl_seconds": 600}
	want(t, e.do("POST", "/v1/federation/invites", partner, body), 403, "not_owner")
	r := e.do("POST", "/v1/federation/invites", owner, body)
	want(t, r, 201, "")
	fed := r.str("token")
	if !strings.HasPrefix(fed, "skt_fed_") || strings.Contains(e.snapshot(), fed) {
		t.Fatalf("federation token %q (or stored raw)", fed)
	}
	for _, bad := range []map[string]any{
		{"channel": ch, "org": "partner", "max_uses": 0},
		{"channel": ch, "org": "partner", "ttl_seconds": 604801},
		{"channel": ch, "org": "a/b"},
		{"channel": ch},
	} {
		want(t, e.do("POST", "/v1/federation/invites", owner, bad), 400, "invalid_request")
	}

	fedJoin := func(key, identity string) reply {
		return e.do("POST", "/v1/channels/join", key, map[string]string{
			"channel": ch, "federation_token": fed, "identity": identity,
			"key_package": base64.StdEncoding.EncodeToString([]byte("kp " + identity)),
		})
	}
	before := e.snapshot()
	want(t, fedJoin(outsider, "did:web:globex"), 403, "invalid_federation_token")
	if e.snapshot() != before {
		t.Fatal("an org-mismatched federation join changed the store")
	}
	want(t, fedJoin(partner, "did:web:p1"), 201, "")
	want(t, fedJoin(partner2, "did:web:p2"), 201, "")
	want(t, fedJoin(partner, "did:web:p3"), 403, "invalid_federation_token")

	r = e.do("GET", "/v1/channels/pending?channel="+ch, owner, nil)
	if n := len(r.body["requests"].([]any)); n != 2 {
		t.Fatalf("%d pending after federation joins", n)
	}
	// A federation token is not an invite token, and vice versa.
	want(t, e.join(partner, ch, fed, "did:web:p4", []byte("kp")), 403, "invalid_invite")
}

func TestSeats(t *testing.T) {
	e := newEnv(t, nil)
	acct, key := e.account("acme")
	_, other := e.account("acme")
	body := e.seatBody(key, "z6MkExample", "acme/seats/home")
	// Registering proves possession of the identity key, for this
	// account and channel: no proof, another's, or a proof for another
	// account or channel is refused and changes nothing.
	before := e.snapshot()
	noProof := map[string]string{"identity": body["identity"], "channel": body["channel"]}
	badProof := map[string]string{"identity": body["identity"], "channel": body["channel"], "proof": e.seatBody(key, "z6MkOther", "acme/seats/home")["proof"]}
	wrongChannel := map[string]string{"identity": body["identity"], "channel": "acme/seats/other", "proof": body["proof"]}
	for _, b := range []map[string]string{noProof, badProof, wrongChannel} {
		want(t, e.do("POST", "/v1/seats", key, b), 403, "invalid_proof")
	}
	want(t, e.do("POST", "/v1/seats", other, body), 403, "invalid_proof")
	if e.snapshot() != before {
		t.Fatal("a refused proof changed the store")
	}
	r := e.do("POST", "/v1/seats", key, body)
	want(t, r, 201, "")
	cred := r.str("credential")
	if !strings.HasPrefix(cred, "sk_chan_") || len(r.str("seat_id")) != 36 {
		t.Fatalf("seat = %s", r)
	}
	// The uniqueness guard: byte-identical again is still 409, so is
	// another account, with a proof of its own.
	before = e.snapshot()
	want(t, e.do("POST", "/v1/seats", key, body), 409, "seat_exists")
	want(t, e.do("POST", "/v1/seats", other, e.seatBody(other, "z6MkExample", "acme/seats/home")), 409, "seat_exists")
	if e.snapshot() != before {
		t.Fatal("refused seat changed the store")
	}
	// The channel was registered for the account; another account cannot take it.
	want(t, e.do("POST", "/v1/seats", other, e.seatBody(other, "z6MkOther", "acme/seats/home")), 409, "channel_taken")
	want(t, e.do("POST", "/v1/seats", key, e.seatBody(key, "z6MkB", "globex/seats/home")), 403, "wrong_org")
	want(t, e.do("POST", "/v1/seats", key, map[string]string{"identity": "did:web:x", "channel": "acme/seats/b"}), 400, "invalid_request")
	want(t, e.do("POST", "/v1/seats", key, map[string]string{"identity": "did:key:", "channel": "acme/seats/b"}), 400, "invalid_request")
	want(t, e.do("POST", "/v1/seats", key, map[string]string{"identity": "did:key:z", "channel": "acme/seats"}), 400, "invalid_channel")
	want(t, e.do("POST", "/v1/seats", key, map[string]string{"identity": "did:key:z6MkNotAKey", "channel": "acme/seats/b"}), 400, "invalid_request")
	// A second seat on the same (owned) channel is fine.
	want(t, e.do("POST", "/v1/seats", key, e.seatBody(key, "z6MkSecond", "acme/seats/home")), 201, "")

	// The credential mints only channel-scoped tokens.
	r = e.do("POST", "/v1/tokens", cred, map[string]string{"audience": "skytale-relay"})
	want(t, r, 201, "")
	c, err := jwt.Verify(testJWTSecret, r.str("token"), e.clock.Now(), jwt.AudienceRelay)
	if err != nil || c.Channel != "acme/seats/home" || c.Subject != acct {
		t.Fatalf("claims %+v, %v", c, err)
	}
	chanJWT := e.jwt(cred, nil)

	// Channel-scoped credentials touch only their channel.
	e.channel(key, "acme/seats/elsewhere")
	for _, tok := range []string{cred, chanJWT} {
		want(t, e.do("GET", "/v1/channels/pending?channel=acme/seats/home", tok, nil), 200, "")
		want(t, e.do("GET", "/v1/channels/pending?channel=acme/seats/elsewhere", tok, nil), 403, "forbidden")
		want(t, e.do("POST", "/v1/channels/invites", tok, map[string]string{"channel": "acme/seats/elsewhere"}), 403, "forbidden")
		want(t, e.do("POST", "/v1/channels", tok, map[string]string{"name": "acme/seats/new"}), 403, "forbidden")
		want(t, e.do("POST", "/v1/seats", tok, e.seatBody(tok, "z6MkC", "acme/seats/home")), 403, "forbidden")
		want(t, e.do("POST", "/v1/device/grants/approve", tok, map[string]string{"user_code": "BCDF-GHJK"}), 403, "forbidden")
	}
	// A scoped joiner sees only requests on its channel.
	inv := e.invite(key, "acme/seats/elsewhere", 1)
	id := e.join(key, "acme/seats/elsewhere", inv, "did:web:a", []byte("kp")).str("request_id")
	want(t, e.do("GET", "/v1/channels/welcome/"+id, key, nil), 200, "")
	want(t, e.do("GET", "/v1/channels/welcome/"+id, cred, nil), 404, "not_found")
	want(t, e.do("POST", "/v1/channels/welcome", cred, map[string]string{"request_id": id, "welcome": "AA=="}), 404, "not_found")
}

func TestRevocation(t *testing.T) {
	e := newEnv(t, nil)
	a, aKey := e.account("acme")
	b, bKey := e.account("acme")
	c, cKey := e.account("acme")

	subs, next, err := e.s.RevokedSince(t.Context(), 0)
	if err != nil || len(subs) != 0 || next != 0 {
		t.Fatalf("RevokedSince = %v %d %v", subs, next, err)
	}
	want(t, e.do("GET", "/v1/internal/revocations", "", nil), 401, "unauthorized")
	want(t, e.do("GET", "/v1/internal/revocations", aKey, nil), 401, "unauthorized")
	r := e.do("GET", "/v1/internal/revocations?after=0", testInternalSecret, nil)
	if string(bytes.TrimSpace(r.raw)) != `{"subs":[],"next":0}` {
		t.Fatalf("empty feed = %s", r.raw)
	}
	want(t, e.do("GET", "/v1/internal/revocations?after=-1", testInternalSecret, nil), 400, "invalid_request")
	want(t, e.do("GET", "/v1/internal/revocations?after=x", testInternalSecret, nil), 400, "invalid_request")

	// Only oneself, unless with the internal secret.
	want(t, e.do("POST", "/v1/revocations", aKey, map[string]string{"did": "did:skytale:" + b}), 403, "forbidden")
	want(t, e.do("POST", "/v1/revocations", aKey, map[string]string{"did": a}), 400, "invalid_request")
	want(t, e.do("POST", "/v1/revocations", aKey, map[string]string{"did": "did:skytale:"}), 400, "invalid_request")
	want(t, e.do("POST", "/v1/revocations", "", map[string]string{"did": "did:skytale:" + a}), 401, "unauthorized")

	tokA := e.jwt(aKey, nil)
	r = e.do("POST", "/v1/revocations", aKey, map[string]string{"did": "did:skytale:" + a})
	want(t, r, 200, "")
	if string(bytes.TrimSpace(r.raw)) != `{"revoked":true}` {
		t.Fatalf("revoke = %s", r.raw)
	}
	want(t, e.do("POST", "/v1/revocations", testInternalSecret, map[string]string{"did": "did:skytale:" + b}), 200, "")
	want(t, e.do("POST", "/v1/revocations", testInternalSecret, map[string]string{"did": "did:skytale:" + b}), 200, "") // idempotent
	want(t, e.do("POST", "/v1/revocations", testInternalSecret, map[string]string{"did": "did:skytale:not-an-account"}), 200, "")

	// Revoked credentials are refused, key and JWT alike.
	want(t, e.do("POST", "/v1/tokens", aKey, nil), 403, "revoked")
	want(t, e.do("POST", "/v1/channels", tokA, map[string]string{"name": "acme/a/b"}), 403, "revoked")
	want(t, e.do("POST", "/v1/channels", bKey, map[string]string{"name": "acme/a/b"}), 403, "revoked")
	want(t, e.do("POST", "/v1/channels", cKey, map[string]string{"name": "acme/a/b"}), 201, "")

	subs, next, err = e.s.RevokedSince(t.Context(), 0)
	if err != nil || strings.Join(subs, ",") != a+","+b+",not-an-account" || next != 3 {
		t.Fatalf("RevokedSince = %v %d %v", subs, next, err)
	}
	r = e.do("GET", "/v1/internal/revocations?after=1", testInternalSecret, nil)
	want(t, r, 200, "")
	if got := fmt.Sprint(r.body["subs"], r.body["next"]); got != fmt.Sprint([]any{b, "not-an-account"}, float64(3)) {
		t.Fatalf("feed after 1 = %s", r.raw)
	}
	r = e.do("GET", "/v1/internal/revocations?after=3", testInternalSecret, nil)
	if string(bytes.TrimSpace(r.raw)) != `{"subs":[],"next":3}` {
		t.Fatalf("feed after 3 = %s", r.raw)
	}
	_ = c
}
