package directory

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/internal/devcert"
)

// linkGrant asks for a linked device's grant; it returns the user code,
// the grant's poll path and token, and the device's keys.
func (e *env) linkGrant() (code, path, poll string, signing ed25519.PrivateKey, hpkeKey []byte) {
	e.t.Helper()
	xk, x64 := newDevice(e.t.(*testing.T))
	_, signing, _ = ed25519.GenerateKey(rand.Reader)
	r := e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64, "label": "laptop",
		"signing_key": base64.StdEncoding.EncodeToString(signing.Public().(ed25519.PublicKey))})
	want(e.t, r, 201, "")
	return r.str("user_code"), "/v1/device/grants/" + r.str("grant_id"), r.str("poll_token"), signing, xk.PublicKey().Bytes()
}

func certFor(t *testing.T, p *testPerson, signing ed25519.PrivateKey, hpkeKey []byte) string {
	t.Helper()
	c, err := devcert.Issue(p.priv, signing.Public().(ed25519.PublicKey), hpkeKey, 1, newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(c.Compact())
}

// linkedKey links a device to key's account and returns its API key
// (opened from the sealed credential) and its signing key.
func (e *env) linkedKey(key string) (string, string, ed25519.PrivateKey) {
	t := e.t.(*testing.T)
	t.Helper()
	p := e.person(key)
	xk, x64 := newDevice(t)
	_, signing, _ := ed25519.GenerateKey(rand.Reader)
	r := e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64, "label": "laptop",
		"signing_key": base64.StdEncoding.EncodeToString(signing.Public().(ed25519.PublicKey))})
	want(t, r, 201, "")
	path, poll, code := "/v1/device/grants/"+r.str("grant_id"), r.str("poll_token"), r.str("user_code")
	r = e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": code, "certificate": certFor(t, p, signing, xk.PublicKey().Bytes())})
	want(t, r, 200, "")
	device := r.str("device")
	r = e.do("GET", path, poll, nil)
	sealed, _ := base64.StdEncoding.DecodeString(r.str("sealed_credential"))
	cred, err := OpenCredential(xk, sealed)
	if err != nil {
		t.Fatal(err)
	}
	return cred, device, signing
}

// TestLinkDeviceCertificate: a linked device's grant is approved only
// with a certificate, by an identity the approving account registered,
// of that grant's two keys; anything else approves nothing. A linked
// device's key is bound to the device and listed; it cannot link another
// device, nor approve one that does not prove it holds the phrase, nor
// revoke its account.
func TestLinkDeviceCertificate(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.account("acme")
	alice := e.person(key)
	mallory := newTestPerson("mallory")
	_, bobKey := e.account("bobco")
	e.person(bobKey)

	code, _, _, signing, hk := e.linkGrant()
	r := e.do("POST", "/v1/device/grants/lookup", key, map[string]string{"user_code": code})
	want(t, r, 200, "")
	if r.str("signing_key") != base64.StdEncoding.EncodeToString(signing.Public().(ed25519.PublicKey)) {
		t.Fatalf("lookup = %s", r)
	}
	other := make([]byte, 32)
	rand.Read(other)
	before := e.snapshot()
	for name, c := range map[string]struct {
		bearer, cert string
		status       int
		code         string
	}{
		"another person's certificate":      {key, certFor(t, mallory, signing, hk), 403, "invalid_certificate"},
		"a certificate of another X25519":   {key, certFor(t, alice, signing, other), 403, "invalid_certificate"},
		"alice's certificate, bob approves": {bobKey, certFor(t, alice, signing, hk), 403, "invalid_certificate"},
		"not a certificate":                 {key, base64.StdEncoding.EncodeToString([]byte("x")), 403, "invalid_certificate"},
		"too long":                          {key, base64.StdEncoding.EncodeToString(make([]byte, devcert.CompactSize+1)), 413, "payload_too_large"},
	} {
		want(t, e.do("POST", "/v1/device/grants/approve", c.bearer, map[string]string{"user_code": code, "certificate": c.cert}), c.status, c.code)
		if e.snapshot() != before {
			t.Fatalf("%s changed the store", name)
		}
	}
	// A grant made without a signing key takes no certificate.
	_, x64 := newDevice(t)
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64})
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": r.str("user_code"), "certificate": certFor(t, alice, signing, hk)}), 400, "invalid_request")

	cred, device, _ := e.linkedKey(key)
	if len(device) != 8 {
		t.Fatalf("device id %q", device)
	}
	r = e.do("GET", "/v1/devices", cred, nil)
	want(t, r, 200, "")
	devs, _ := r.body["devices"].([]any)
	if len(devs) != 1 || devs[0].(map[string]any)["id"] != device || devs[0].(map[string]any)["this"] != true ||
		!strings.Contains(devs[0].(map[string]any)["identity"].(string), devcert.IdentityMark) {
		t.Fatalf("devices = %s", r)
	}
	// Nobody else's list shows it; a stranger gets nothing.
	r = e.do("GET", "/v1/devices", bobKey, nil)
	if devs, _ := r.body["devices"].([]any); r.status != 200 || len(devs) != 0 {
		t.Fatalf("bob's devices = %s", r)
	}
	want(t, e.do("GET", "/v1/devices", "", nil), 401, "unauthorized")

	// The linked device's key: no links, no legacy approvals, no
	// account revocation.
	code2, _, _, signing2, hk2 := e.linkGrant()
	want(t, e.do("POST", "/v1/device/grants/approve", cred, map[string]string{"user_code": code2, "certificate": certFor(t, alice, signing2, hk2)}), 403, "forbidden")
	_, x64 = newDevice(t)
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64})
	want(t, e.do("POST", "/v1/device/grants/approve", cred, map[string]string{"user_code": r.str("user_code")}), 403, "not_identity_holder")
	want(t, e.do("POST", "/v1/revocations", cred, map[string]string{"did": "did:skytale:" + e.accountOf(key)}), 403, "forbidden")
	// Nor register an identity of its own (which could then certify or
	// revoke the account's devices).
	thief := newTestPerson("thief")
	want(t, e.do("POST", "/v1/seats", cred, thief.seatBody(e.accountOf(key), "acme/tally/thief")), 403, "forbidden")
	// A restored device proves the phrase: the linked device may let it in.
	xk, x64 := newDevice(t)
	proof := ed25519.Sign(alice.priv, append([]byte(RecoverLabel), xk.PublicKey().Bytes()...))
	want(t, e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64, "identity": alice.did, "proof": base64.StdEncoding.EncodeToString(ed25519.Sign(mallory.priv, []byte("x")))}), 400, "invalid_request")
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64, "identity": alice.did, "proof": base64.StdEncoding.EncodeToString(proof)})
	want(t, r, 201, "")
	want(t, e.do("POST", "/v1/device/grants/approve", cred, map[string]string{"user_code": r.str("user_code")}), 200, "")
	// One proved for mallory's identity (not the account's) is refused.
	proof = ed25519.Sign(mallory.priv, append([]byte(RecoverLabel), xk.PublicKey().Bytes()...))
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64, "identity": mallory.did, "proof": base64.StdEncoding.EncodeToString(proof)})
	want(t, e.do("POST", "/v1/device/grants/approve", cred, map[string]string{"user_code": r.str("user_code")}), 403, "not_identity_holder")
}

// TestRevokeLinkedDevice: a revocation the account's identity signed ends
// the device's API key and the tokens it minted (the directory at once,
// the relay by the feed entry "<account>#<device>"), leaves the account's
// other keys working, is kept for anyone to fetch by the identity, and
// the key is never certified again. Revocations signed by anyone else, or
// malformed, change nothing.
func TestRevokeLinkedDevice(t *testing.T) {
	e := newEnv(t, nil)
	_, key := e.account("acme")
	alice := e.person(key)
	_, bobKey := e.account("bobco")
	bob := e.person(bobKey)
	cred, device, signing := e.linkedKey(key)
	tok := e.jwt(cred, nil)
	want(t, e.do("GET", "/v1/devices", tok, nil), 200, "")
	pub := signing.Public().(ed25519.PublicKey)

	before := e.snapshot()
	forged, _ := devcert.Revoke(bob.priv, pub, e.clock.Now())
	byDevice, _ := devcert.Revoke(signing, pub, e.clock.Now()) // a device key cannot revoke (it is no identity)
	for name, c := range map[string]struct {
		bearer string
		rev    string
		status int
		code   string
	}{
		"bob's revocation, alice's account": {key, base64.StdEncoding.EncodeToString(forged.Bytes()), 403, "revocation_not_yours"},
		"by the device's own key":           {cred, base64.StdEncoding.EncodeToString(byDevice.Bytes()), 400, "invalid_request"},
		"malformed":                         {key, base64.StdEncoding.EncodeToString([]byte("SKR1")), 400, "invalid_request"},
		"not base64":                        {key, "%%%", 400, "invalid_base64"},
		"no credential":                     {"", base64.StdEncoding.EncodeToString(forged.Bytes()), 401, "unauthorized"},
	} {
		want(t, e.do("POST", "/v1/devices/revocations", c.bearer, map[string]string{"revocation": c.rev}), c.status, c.code)
		if e.snapshot() != before {
			t.Fatalf("%s changed the store", name)
		}
	}
	// Another identity of the same account revokes only what it
	// certified.
	second := newTestPerson("second identity of acme")
	want(t, e.do("POST", "/v1/seats", key, second.seatBody(e.accountOf(key), "acme/tally/second")), 201, "")
	bySecond, _ := devcert.Revoke(second.priv, pub, e.clock.Now())
	r0 := e.do("POST", "/v1/devices/revocations", key, map[string]string{"revocation": base64.StdEncoding.EncodeToString(bySecond.Bytes())})
	want(t, r0, 200, "")
	if r0.str("device") != "" {
		t.Fatalf("another identity revoked alice's device: %s", r0)
	}
	want(t, e.do("GET", "/v1/devices", cred, nil), 200, "")
	rev, _ := devcert.Revoke(alice.priv, pub, e.clock.Now())
	r := e.do("POST", "/v1/devices/revocations", key, map[string]string{"revocation": base64.StdEncoding.EncodeToString(rev.Bytes())})
	want(t, r, 200, "")
	if r.str("device") != device {
		t.Fatalf("revoke = %s", r)
	}
	for _, c := range []string{cred, tok} {
		r := e.do("GET", "/v1/devices", c, nil)
		want(t, r, 403, "revoked")
		if !strings.Contains(r.str("message"), "device") {
			t.Fatalf("the revoked device is told %s", r)
		}
	}
	want(t, e.do("GET", "/v1/devices", key, nil), 200, "")
	subs, _, err := e.s.RevokedSince(t.Context(), 0)
	if err != nil || len(subs) != 1 || subs[0] != e.accountOf(key)+"#"+device {
		t.Fatalf("the relay's feed: %v %v", subs, err)
	}
	// Anyone may fetch the person's revocations; bob checks the signature.
	r = e.do("GET", "/v1/devices/revocations?identity="+alice.did, bobKey, nil)
	want(t, r, 200, "")
	list, _ := r.body["revocations"].([]any)
	if len(list) != 1 || list[0] != base64.StdEncoding.EncodeToString(rev.Bytes()) {
		t.Fatalf("revocations = %s", r)
	}
	want(t, e.do("GET", "/v1/devices/revocations?identity=nobody", bobKey, nil), 400, "invalid_request")
	want(t, e.do("GET", "/v1/devices/revocations?identity="+alice.did, "", nil), 401, "unauthorized")
	// Again: nothing new.
	before = e.snapshot()
	want(t, e.do("POST", "/v1/devices/revocations", key, map[string]string{"revocation": base64.StdEncoding.EncodeToString(rev.Bytes())}), 200, "")
	if e.snapshot() != before {
		t.Fatal("revoking again changed the store")
	}
	// The key is never linked again.
	xk, x64 := newDevice(t)
	r = e.do("POST", "/v1/device/grants", "", map[string]string{"device_key": x64, "signing_key": base64.StdEncoding.EncodeToString(pub)})
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": r.str("user_code"), "certificate": certFor(t, alice, signing, xk.PublicKey().Bytes())}), 403, "invalid_certificate")
}

// TestLinkedDevicesBounded: an account links at most MaxLinkedDevices
// devices, revoked ones counted.
func TestLinkedDevicesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("links 50 devices")
	}
	e := newEnv(t, nil)
	_, key := e.account("acme")
	alice := e.person(key)
	for range MaxLinkedDevices {
		e.linkedKey(key)
	}
	code, _, _, signing, hk := e.linkGrant()
	want(t, e.do("POST", "/v1/device/grants/approve", key, map[string]string{"user_code": code, "certificate": certFor(t, alice, signing, hk)}), 409, "too_many_devices")
}
