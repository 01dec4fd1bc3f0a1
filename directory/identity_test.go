package directory

// Test identities: real Ed25519 did:keys, seat registrations that prove
// them, and device identities certified by them, as the seat makes them.

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"regexp"
	"sync"

	"github.com/skytale-oss/skytale/internal/base58"
	"github.com/skytale-oss/skytale/internal/jwt"
)

// testPerson is a person's identity key and its did:key.
type testPerson struct {
	priv ed25519.PrivateKey
	did  string
}

// newTestPerson makes an identity from seed (the same seed, the same
// identity).
func newTestPerson(seed string) *testPerson {
	sum := sha256.Sum256([]byte("person " + seed))
	priv := ed25519.NewKeyFromSeed(sum[:])
	return &testPerson{priv: priv, did: didKeyOf(priv.Public().(ed25519.PublicKey))}
}

// seatBody is the body of POST /v1/seats registering p for account with
// its sync channel ch.
func (p *testPerson) seatBody(account, ch string) map[string]string {
	proof := ed25519.Sign(p.priv, SeatProof(account, ch))
	return map[string]string{"identity": p.did, "channel": ch, "proof": base64.StdEncoding.EncodeToString(proof)}
}

// device returns the device identity of p for the device key derived
// from name, and that key.
func (p *testPerson) device(name string) (identity string, key ed25519.PublicKey) {
	sum := sha256.Sum256([]byte("device " + p.did + " " + name))
	key = ed25519.NewKeyFromSeed(sum[:]).Public().(ed25519.PublicKey)
	sig := ed25519.Sign(p.priv, append([]byte(DeviceKeyLabel), key...))
	return p.did + deviceMark + base58.Encode(sig), key
}

// people remembers the seat identity registered for each API key.
var people struct {
	sync.Mutex
	m map[*env]map[string]*testPerson
}

// person returns the seat identity of key's account, registering it
// (with a sync channel of the account's org) the first time.
func (e *env) person(key string) *testPerson {
	e.t.Helper()
	people.Lock()
	defer people.Unlock()
	if people.m == nil {
		people.m = map[*env]map[string]*testPerson{}
	}
	if people.m[e] == nil {
		people.m[e] = map[string]*testPerson{}
	}
	if p := people.m[e][key]; p != nil {
		return p
	}
	pr, _, err := e.s.store.lookupKey(e.t.Context(), hashSecret(key))
	if err != nil {
		e.t.Fatal(err)
	}
	p := newTestPerson(fmt.Sprintf("%p %s", e, pr.account))
	ch := fmt.Sprintf("%s/tally/%x", pr.org, p.priv.Public().(ed25519.PublicKey)[:8])
	want(e.t, e.do("POST", "/v1/seats", key, p.seatBody(pr.account, ch)), 201, "")
	people.m[e][key] = p
	return p
}

// dev is the device identity of key's person for the device called name.
func (e *env) dev(key, name string) string {
	id, _ := e.person(key).device(name)
	return id
}

// plainName is a device name the stock helpers turn into a device
// identity of the uploader; any other name goes to the directory as is.
var plainName = regexp.MustCompile(`^[a-z0-9 ]{1,40}$`)

// stockUpload is the global stockUpload for key's account, with the
// device called name as a device identity of its person (and its
// device_key) when name is a plain name.
func (e *env) stockUpload(key, name string, n int, lastResort bool) map[string]any {
	e.t.Helper()
	if !plainName.MatchString(name) {
		return stockUpload(name, n, lastResort)
	}
	id, dk := e.person(key).device(name)
	body := stockUpload(id, n, lastResort)
	body["device_key"] = base64.StdEncoding.EncodeToString(dk)
	return body
}

// seatBody is the body of POST /v1/seats registering the identity made
// from name for key's account, with the sync channel ch.
func (e *env) seatBody(key, name, ch string) map[string]string {
	e.t.Helper()
	account := "unknown"
	if pr, _, err := e.s.store.lookupKey(e.t.Context(), hashSecret(key)); err == nil {
		account = pr.account
	} else if c, err := jwt.Verify(testJWTSecret, key, e.clock.Now(), jwt.AudienceAPI); err == nil {
		account = c.Subject
	}
	return newTestPerson(name).seatBody(account, ch)
}

// relate makes key's account share a channel with each of others (a
// channel of its own they become members of), so that they may claim its
// offers and leave it Welcomes.
func (e *env) relate(key string, others ...string) {
	e.t.Helper()
	pr, _, err := e.s.store.lookupKey(e.t.Context(), hashSecret(key))
	if err != nil {
		e.t.Fatal(err)
	}
	ch := fmt.Sprintf("%s/contacts/c%d", pr.org, len(others))
	for i := 0; e.do("POST", "/v1/channels", key, map[string]string{"name": ch}).status != 201; i++ {
		ch = fmt.Sprintf("%s/contacts/c%d-%d", pr.org, len(others), i)
	}
	for _, o := range others {
		want(e.t, e.do("POST", "/v1/channels/members", key, map[string]string{"channel": ch, "account_id": mustID(e.t, e, o)}), 200, "")
	}
}

// tid is the did:key of the test person made from name.
func tid(name string) string { return newTestPerson(name).did }

// accountOf is the account id behind key.
func (e *env) accountOf(key string) string {
	e.t.Helper()
	pr, _, err := e.s.store.lookupKey(e.t.Context(), hashSecret(key))
	if err != nil {
		e.t.Fatal(err)
	}
	return pr.account
}

// autoJoin is the body of POST /v1/channels/join by key's account with
// the invite token under tid(name), with the proof that it holds that
// identity's key, as the seat sends it.
func (e *env) autoJoin(key, ch, token, name string) map[string]string {
	e.t.Helper()
	p := newTestPerson(name)
	proof := ed25519.Sign(p.priv, JoinProof(e.accountOf(key), ch, p.did, hashSecret(token)))
	return map[string]string{"channel": ch, "token": token, "identity": p.did, "proof": base64.StdEncoding.EncodeToString(proof)}
}

// fedJoin is autoJoin with a federation token.
func (e *env) fedJoin(key, ch, fed, name string) map[string]string {
	e.t.Helper()
	p := newTestPerson(name)
	proof := ed25519.Sign(p.priv, JoinProof(e.accountOf(key), ch, p.did, hashSecret(fed)))
	return map[string]string{"channel": ch, "federation_token": fed, "identity": p.did, "proof": base64.StdEncoding.EncodeToString(proof)}
}
