package directory

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func newDevice(t *testing.T) (*ecdh.PrivateKey, string) {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k, base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())
}

func TestDeviceGrantRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	acct, key := e.account("acme")
	priv, pub := newDevice(t)

	// The new device asks, without any credential.
	r := e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": pub, "label": "laptop"})
	want(t, r, 201, "")
	grant, code, poll := r.str("grant_id"), r.str("user_code"), r.str("poll_token")
	if len(grant) != 36 || len(code) != 9 || code[4] != '-' || poll == "" {
		t.Fatalf("grant = %s", r)
	}
	if exp, _ := time.Parse(time.RFC3339, r.str("expires_at")); !exp.Equal(e.clock.Now().Add(10 * time.Minute)) {
		t.Fatalf("expires_at %q", r.str("expires_at"))
	}
	if strings.Contains(e.snapshot(), poll) {
		t.Fatal("raw poll token stored")
	}

	path := "/v1/device/grants/" + grant
	want(t, e.do("GET", path, "", nil), 401, "unauthorized")
	want(t, e.do("GET", path, "skt_poll_wrong", nil), 404, "not_found")
	want(t, e.do("GET", "/v1/device/grants/nope", poll, nil), 404, "not_found")
	r = e.do("GET", path, poll, nil)
	want(t, r, 200, "")
	if r.str("status") != "pending" || r.body["sealed_credential"] != nil {
		t.Fatalf("poll = %s", r)
	}

	// An authenticated device approves by user code (any case, hyphen optional).
	want(t, e.do("POST", "/v1/device/grants/approve", "", map[string]string{"user_code": code}), 401, "unauthorized")
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": "BCDF-GHJK"}), 404, "not_found")
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": "AEIO-U123"}), 400, "invalid_request")
	r = e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": strings.ToLower(strings.ReplaceAll(code, "-", ""))})
	want(t, r, 200, "")
	if r.str("grant_id") != grant || r.str("status") != "approved" {
		t.Fatalf("approve = %s", r)
	}
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": code}), 409, "already_approved")

	// The credential is delivered sealed, exactly once.
	r = e.do("GET", path, poll, nil)
	want(t, r, 200, "")
	if r.str("status") != "approved" {
		t.Fatalf("poll = %s", r)
	}
	sealed, err := base64.StdEncoding.DecodeString(r.str("sealed_credential"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != 32+len("sk_live_")+43+16 {
		t.Fatalf("sealed credential is %d bytes, want enc(32) || ciphertext", len(sealed))
	}
	again := e.do("GET", path, poll, nil)
	if again.str("status") != "approved" || again.body["sealed_credential"] != nil {
		t.Fatalf("second poll = %s", again)
	}
	if strings.Contains(e.snapshot(), r.str("sealed_credential")) {
		t.Fatal("sealed credential kept after delivery")
	}
	// Its job done, the grant keeps no approver, label or address.
	var approver sql.NullString
	var label, remote string
	if err := e.queryRow(`SELECT approved_by, label, remote FROM device_grants WHERE id = ?`, grant).Scan(&approver, &label, &remote); err != nil {
		t.Fatal(err)
	}
	if approver.Valid || label != "" || remote != "" || strings.Contains(e.snapshot(), "laptop") {
		t.Fatalf("a delivered grant keeps approver %v, label %q, address %q", approver, label, remote)
	}

	// Another key cannot open it; the device key can, and the credential works.
	other, _ := newDevice(t)
	if _, err := OpenCredential(other, sealed); err == nil {
		t.Fatal("opened with the wrong key")
	}
	cred, err := OpenCredential(priv, sealed)
	if err != nil {
		t.Fatal(err)
	}
	// The wire format, checked with crypto/hpke directly: DHKEM(X25519,
	// HKDF-SHA256), HKDF-SHA256, AES-128-GCM, the fixed info string, and
	// enc (32 bytes) followed by the ciphertext.
	hk, err := hpke.NewDHKEMPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := hpke.NewRecipient(sealed[:32], hk, hpke.HKDFSHA256(), hpke.AES128GCM(), []byte("skytale device grant v1"))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := r2.Open(nil, sealed[32:])
	if err != nil || string(pt) != cred {
		t.Fatalf("direct HPKE open: %q, %v", pt, err)
	}
	if !strings.HasPrefix(cred, "sk_live_") || cred == key {
		t.Fatalf("credential %q", cred)
	}
	if strings.Contains(e.snapshot(), cred) {
		t.Fatal("raw device credential stored")
	}
	tok := e.jwt(cred, nil)
	want(t, e.do("POST", "/v1/channels", tok, map[string]string{"name": "acme/from/device"}), 201, "")
	var owner string
	e.queryRow(`SELECT owner_id FROM channels WHERE name = 'acme/from/device'`).Scan(&owner)
	if owner != acct {
		t.Fatalf("device credential acts for %q, want the approver %q", owner, acct)
	}
}

func TestDeviceGrantExpiry(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.account("acme")

	// Never approved.
	_, pub := newDevice(t)
	r := e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": pub, "label": ""})
	want(t, r, 201, "")
	e.clock.Advance(10 * time.Minute)
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": r.str("user_code")}), 404, "not_found")
	if p := e.do("GET", "/v1/device/grants/"+r.str("grant_id"), r.str("poll_token"), nil); p.str("status") != "expired" {
		t.Fatalf("poll = %s", p)
	}

	// Approved but never collected: the credential is destroyed.
	_, pub = newDevice(t)
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": pub, "label": "phone"})
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": r.str("user_code")}), 200, "")
	var keys int
	e.queryRow(`SELECT COUNT(*) FROM api_keys`).Scan(&keys)
	e.clock.Advance(10*time.Minute + time.Second)
	p := e.do("GET", "/v1/device/grants/"+r.str("grant_id"), r.str("poll_token"), nil)
	if p.str("status") != "expired" || p.body["sealed_credential"] != nil {
		t.Fatalf("poll = %s", p)
	}
	var after int
	e.queryRow(`SELECT COUNT(*) FROM api_keys`).Scan(&after)
	if after != keys-1 {
		t.Fatalf("api keys %d → %d: the uncollected credential survived", keys, after)
	}
}

func TestDeviceGrantBadInput(t *testing.T) {
	e := newEnv(t, nil)
	_, pub := newDevice(t)
	zero := base64.StdEncoding.EncodeToString(make([]byte, 32)) // a low-order point
	short := base64.StdEncoding.EncodeToString(make([]byte, 31))
	before := e.snapshot()
	for _, b := range []struct {
		body   any
		status int
		code   string
	}{
		{map[string]string{"device_key": zero}, 400, "invalid_request"},
		{map[string]string{"device_key": short}, 400, "invalid_request"},
		{map[string]string{"device_key": "not base64!"}, 400, "invalid_request"},
		{map[string]string{"device_key": ""}, 400, "invalid_request"},
		{map[string]string{"device_key": pub, "label": strings.Repeat("x", 129)}, 400, "invalid_request"},
		{map[string]any{"device_key": pub, "label": 5}, 400, "invalid_json"},
		{map[string]any{"device_key": pub, "account": "x"}, 400, "invalid_json"},
	} {
		want(t, e.do("POST", "/v1/device/grants", "", b.body), b.status, b.code)
	}
	if e.snapshot() != before {
		t.Fatal("refused grant changed the store")
	}
}

// TestDeviceGrantSealedSeat follows the approver's side of the extended
// flow: look the grant up by user code, seal a box to its device key, and
// hand it over with the approval; the device gets it once, with the
// credential and the account it acts for.
func TestDeviceGrantSealedSeat(t *testing.T) {
	e := newEnv(t, nil)
	acct, key := e.account("acme")
	priv, pub := newDevice(t)
	r := e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": pub, "label": "second home"})
	want(t, r, 201, "")
	grant, code, poll := r.str("grant_id"), r.str("user_code"), r.str("poll_token")

	// Lookup needs an unscoped credential and a well-formed, live code.
	want(t, e.do("POST", "/v1/device/grants/lookup", "", map[string]string{"user_code": code}), 401, "unauthorized")
	want(t, e.do("POST", "/v1/device/grants/lookup", key, map[string]string{"user_code": "nope"}), 400, "invalid_request")
	want(t, e.do("POST", "/v1/device/grants/lookup", key, map[string]string{"user_code": "BCDF-GHJK"}), 404, "not_found")
	r = e.do("POST", "/v1/device/grants/lookup", key, map[string]string{"user_code": strings.ToLower(code)})
	want(t, r, 200, "")
	if r.str("grant_id") != grant || r.str("device_key") != pub || r.str("label") != "second home" || r.str("expires_at") == "" {
		t.Fatalf("lookup = %s", r)
	}

	// The box is opaque to the directory; only its size is checked.
	dk, _ := base64.StdEncoding.DecodeString(r.str("device_key"))
	devPub, err := ecdh.X25519().NewPublicKey(dk)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "sk_chan_the-seat-transport-credential"
	box, err := SealCredential(devPub, secret)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	before := e.snapshot()
	for _, bad := range []struct {
		box    string
		status int
		code   string
	}{
		{"not base64!", 400, "invalid_base64"},
		{b64(make([]byte, 47)), 400, "invalid_request"},
		{b64(make([]byte, MaxSealedSeat+1)), 413, "payload_too_large"},
	} {
		want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": code, "sealed_seat": bad.box}), bad.status, bad.code)
	}
	if e.snapshot() != before {
		t.Fatal("a refused approval changed the store")
	}
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": code, "sealed_seat": b64(box)}), 200, "")
	want(t, e.do("POST", "/v1/device/grants/lookup", key, map[string]string{"user_code": code}), 409, "already_approved")

	r = e.do("GET", "/v1/device/grants/"+grant, poll, nil)
	want(t, r, 200, "")
	if r.str("account_id") != acct || r.str("org") != "acme" || r.str("sealed_seat") != b64(box) {
		t.Fatalf("poll = %s", r)
	}
	sealed, _ := base64.StdEncoding.DecodeString(r.str("sealed_credential"))
	if _, err := OpenCredential(priv, sealed); err != nil {
		t.Fatal(err)
	}
	if got, err := OpenCredential(priv, box); err != nil || got != secret {
		t.Fatalf("box opened to %q, %v", got, err)
	}
	if strings.Contains(e.snapshot(), b64(box)) {
		t.Fatal("sealed_seat kept after delivery")
	}
	again := e.do("GET", "/v1/device/grants/"+grant, poll, nil)
	if again.body["sealed_seat"] != nil || again.body["sealed_credential"] != nil || again.body["org"] != nil {
		t.Fatalf("second poll = %s", again)
	}

	// Approved with a box but never collected: the box goes with the
	// credential when the grant expires.
	_, pub3 := newDevice(t)
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": pub3})
	box3 := b64(append(make([]byte, 47), 'Z'))
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": r.str("user_code"), "sealed_seat": box3}), 200, "")
	if !strings.Contains(e.snapshot(), box3) {
		t.Fatal("sealed_seat not stored until delivery")
	}
	e.clock.Advance(10*time.Minute + time.Second)
	if p := e.do("GET", "/v1/device/grants/"+r.str("grant_id"), r.str("poll_token"), nil); p.str("status") != "expired" || p.body["sealed_seat"] != nil {
		t.Fatalf("poll after expiry = %s", p)
	}
	if strings.Contains(e.snapshot(), box3) {
		t.Fatal("an expired grant kept its sealed_seat")
	}

	// A channel-scoped key may neither look up nor approve.
	_, pub2 := newDevice(t)
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": pub2})
	scoped := e.do("POST", "/v1/seats", key, e.seatBody(key, "z6MkExample", "acme/seats/home")).str("credential")
	want(t, e.do("POST", "/v1/device/grants/lookup", scoped, map[string]string{"user_code": r.str("user_code")}), 403, "forbidden")
}
