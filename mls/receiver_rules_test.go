package mls_test

// Black-box tests of RFC 9420 receiver rules that an audit of the engine
// found broken. They use only the public API that the engine had when the
// audit was made, so the same file runs against that engine too, where
// each of them fails.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/mls"
)

const blackBoxSuite = mls.MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519

func blackBoxMember(t *testing.T, did string, cfg *mls.Config) *mls.KeyPackageBundle {
	t.Helper()
	sk, err := mls.GenerateSignatureKey(blackBoxSuite)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := mls.NewKeyPackage(blackBoxSuite, did, sk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// blackBoxGroup makes a group of alice, bob and carol, each with its own
// engine, all in the same epoch.
func blackBoxGroup(t *testing.T) (alice, bob, carol *mls.Group) {
	t.Helper()
	id := sha256.Sum256([]byte("findings"))
	alice, err := mls.NewGroup(id[:], blackBoxMember(t, "did:key:alice", nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	var others []*mls.Group
	for _, did := range []string{"did:key:bob", "did:key:carol"} {
		kp := blackBoxMember(t, did, nil)
		res, err := alice.AddMembers(kp.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if err := alice.ConfirmCommit(); err != nil {
			t.Fatal(err)
		}
		for _, o := range others {
			if _, err := o.Process(res.Commit); err != nil {
				t.Fatal(err)
			}
		}
		g, err := mls.Join(res.Welcome, kp, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, g)
	}
	return alice, others[0], others[1]
}

// a stranger entered a group with one message. Here the
// message is an external Commit from a GroupInfo, which needs no member's
// consent: with no policy saying otherwise, members must refuse it.
func TestStrangerCannotEnter(t *testing.T) {
	alice, bob, _ := blackBoxGroup(t)
	gi, err := alice.GroupInfo()
	if err != nil {
		t.Fatal(err)
	}
	_, commit, err := mls.JoinExternal(gi, blackBoxMember(t, "did:key:mallory", nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(commit); err == nil {
		t.Fatalf("a stranger's external Commit was accepted: the roster is now %d members", len(bob.Members()))
	}
}

// two GroupContextExtensions proposals (two honest members at
// once) made every later Commit fail, so nobody could commit or send.
func TestProposalsCannotWedge(t *testing.T) {
	alice, bob, carol := blackBoxGroup(t)
	for _, g := range []*mls.Group{alice, bob} {
		p, err := g.ProposeGroupContextExtensions(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := carol.Process(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := carol.SelfUpdate(); err != nil {
		t.Fatalf("carol cannot commit: %v", err)
	}
	if err := carol.ConfirmCommit(); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Protect([]byte("still here"), nil); err != nil {
		t.Fatalf("carol cannot send after her commit: %v", err)
	}
}

// two leaves could hold the same identity.
func TestOneIdentityOneLeaf(t *testing.T) {
	alice, _, _ := blackBoxGroup(t)
	twin := blackBoxMember(t, "did:key:bob", nil) // bob's identity, another key
	if _, err := alice.AddMembers(twin.Bytes()); err == nil {
		t.Fatal("a second leaf with bob's identity was added")
	}
}

// of 4000 randomly corrupted saved states, 3328 restored.
func TestCorruptStateRefused(t *testing.T) {
	alice, _, _ := blackBoxGroup(t)
	state, err := alice.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	restored := 0
	const n = 400
	for range n {
		b := bytes.Clone(state)
		for range 1 + r.IntN(4) {
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
		}
		if g, err := mls.RestoreGroup(b, nil); err == nil && g != nil {
			restored++
		}
	}
	if restored > 0 {
		t.Fatalf("%d of %d corrupted states restored", restored, n)
	}
}

// KeyPackages with the lifetime other implementations send by
// default (0 to 2^63-1) could never be added, whatever the application
// wanted. A negative MaxLeafLifetime now means no maximum.
func TestCenturyKeyPackageNeedsNoMaximum(t *testing.T) {
	alice, _, _ := blackBoxGroup(t)
	long := blackBoxMember(t, "did:key:dave", &mls.Config{KeyPackageLifetime: 100 * 365 * 24 * time.Hour})
	if _, err := alice.AddMembers(long.Bytes()); err == nil {
		t.Fatal("a 100-year KeyPackage was added under the default maximum")
	}
	id := sha256.Sum256([]byte("no maximum"))
	g, err := mls.NewGroup(id[:], blackBoxMember(t, "did:key:erin", nil), &mls.Config{MaxLeafLifetime: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddMembers(long.Bytes()); err != nil {
		t.Fatalf("with no maximum, a 100-year KeyPackage: %v", err)
	}
}

// a KeyPackage whose leaf encryption key is a low-order X25519
// point (properly signed by its maker) was added, after which every
// member's commit failed until that leaf was removed.
func TestLowOrderKeyRefused(t *testing.T) {
	alice, _, _ := blackBoxGroup(t)
	sk, err := mls.GenerateSignatureKey(blackBoxSuite)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := mls.NewKeyPackage(blackBoxSuite, "did:key:mallory", sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	// u = 0 is of low order: every Diffie-Hellman with it gives zeros.
	hostile := resignKeyPackage(t, kp.Bytes(), ed25519.NewKeyFromSeed(sk), make([]byte, 32))
	if _, err := alice.AddMembers(hostile); err == nil {
		t.Fatal("a KeyPackage with a low-order encryption key was added")
	}
	if _, err := alice.AddMembers(resignKeyPackage(t, kp.Bytes(), ed25519.NewKeyFromSeed(sk), nil)); err != nil {
		t.Fatalf("the same KeyPackage re-signed with its own key: %v", err)
	}
}

// resignKeyPackage rewrites the leaf encryption key of a KeyPackage
// MLSMessage (RFC 9420 §10) to encKey (nil keeps it) and signs the leaf
// and the KeyPackage again with priv, as the KeyPackage's maker can.
func resignKeyPackage(t *testing.T, msg []byte, priv ed25519.PrivateKey, encKey []byte) []byte {
	t.Helper()
	p := &tlsReader{b: msg}
	head := p.take(4 + 4) // MLSMessage version, wire format; KeyPackage version, suite
	initKey := p.vec()
	enc := p.vec()
	rest := p.off // signature_key .. extensions of the leaf
	p.vec()       // signature_key
	p.take(2)     // credential_type (basic)
	p.vec()       // identity
	for range 5 { // capabilities
		p.vec()
	}
	p.take(1 + 16) // leaf_node_source (key_package) and lifetime
	p.vec()        // leaf extensions
	leafTail := msg[rest:p.off]
	p.vec() // leaf signature
	kpExt := p.vec()
	p.vec() // KeyPackage signature
	if p.bad || p.off != len(msg) {
		t.Fatal("cannot parse the KeyPackage")
	}
	if encKey == nil {
		encKey = enc
	}
	leafTBS := append(vec(encKey), leafTail...)
	leaf := append(bytes.Clone(leafTBS), vec(signWithLabel(priv, "LeafNodeTBS", leafTBS))...)
	kpTBS := append(append(append(bytes.Clone(head[4:]), vec(initKey)...), leaf...), vec(kpExt)...)
	out := append(bytes.Clone(head[:4]), kpTBS...)
	return append(out, vec(signWithLabel(priv, "KeyPackageTBS", kpTBS))...)
}

// signWithLabel is SignWithLabel of RFC 9420 §5.1.2 for Ed25519.
func signWithLabel(priv ed25519.PrivateKey, label string, content []byte) []byte {
	return ed25519.Sign(priv, append(vec([]byte("MLS 1.0 "+label)), vec(content)...))
}

// vec encodes a variable-length vector (RFC 9420 §2.1.2).
func vec(b []byte) []byte {
	n := len(b)
	var out []byte
	switch {
	case n < 1<<6:
		out = []byte{byte(n)}
	case n < 1<<14:
		out = []byte{0x40 | byte(n>>8), byte(n)}
	default:
		out = []byte{0x80 | byte(n>>24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
	return append(out, b...)
}

type tlsReader struct {
	b   []byte
	off int
	bad bool
}

func (r *tlsReader) take(n int) []byte {
	if r.bad || r.off+n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *tlsReader) vec() []byte {
	first := r.take(1)
	if r.bad {
		return nil
	}
	n := int(first[0] & 0x3f)
	switch first[0] >> 6 {
	case 1:
		n = n<<8 | int(r.take(1)[0])
	case 2:
		rest := r.take(3)
		if r.bad {
			return nil
		}
		n = n<<24 | int(rest[0])<<16 | int(rest[1])<<8 | int(rest[2])
	case 3:
		r.bad = true
		return nil
	}
	return r.take(n)
}

// The part the public API can see: a PrivateMessage that
// fails authentication changed the saved state (the sender ratchets it
// derived on the way stayed), though the package promised it would not.
func TestForgedMessageChangesNothing(t *testing.T) {
	alice, bob, _ := blackBoxGroup(t)
	msg, err := alice.Protect([]byte("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	before, err := bob.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	forged := bytes.Clone(msg)
	forged[len(forged)-1] ^= 1 // the AEAD tag
	if _, err := bob.Process(forged); err == nil {
		t.Fatal("a forged message was read")
	}
	after, err := bob.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("a forged message changed the saved state")
	}
	if _, err := bob.Process(msg); err != nil {
		t.Fatalf("the genuine message after the forgery: %v", err)
	}
}
