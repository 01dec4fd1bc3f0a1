package seat

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/devcert"
)

const fuzzChannel = "acme/tally/00"

func FuzzParseKeyBundle(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	f.Add(encodeKeyBundle(priv, fuzzChannel, 3, make([]byte, 32), make([]byte, 80)))
	f.Add([]byte(keyBundleMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		epoch, recipient, box, err := parseKeyBundle(b, fuzzChannel, pub)
		if err != nil {
			return
		}
		// What parses re-encodes to the same bytes (the signature is
		// deterministic Ed25519).
		if got := encodeKeyBundle(priv, fuzzChannel, epoch, recipient, box); !bytes.Equal(got, b) {
			t.Fatalf("a bundle does not round trip")
		}
	})
}

// TestKeyBundleRefusesOthers: a bundle verifies only for the identity and
// channel it was signed for, and any flipped byte breaks it.
func TestKeyBundleRefusesOthers(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	b := encodeKeyBundle(priv, fuzzChannel, 1, make([]byte, 32), make([]byte, 80))
	if _, _, _, err := parseKeyBundle(b, fuzzChannel, pub); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := parseKeyBundle(b, fuzzChannel, other); err == nil {
		t.Fatal("verifies for another identity")
	}
	if _, _, _, err := parseKeyBundle(b, "acme/tally/01", pub); err == nil {
		t.Fatal("verifies on another channel")
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 1
		if _, _, _, err := parseKeyBundle(c, fuzzChannel, pub); err == nil {
			t.Fatalf("byte %d flipped still verifies", i)
		}
	}
}

func FuzzOpenLinkBox(f *testing.F) {
	_, person, _ := ed25519.GenerateKey(rand.Reader)
	dev, _, _ := ed25519.GenerateKey(rand.Reader)
	xk, _ := ecdh.X25519().GenerateKey(rand.Reader)
	c, _ := devcert.Issue(person, dev, xk.PublicKey().Bytes(), 1, time.Now())
	box, _ := json.Marshal(linkContent{AccountID: "a", Org: "o", Person: DIDKey(person.Public().(ed25519.PublicKey)), Cert: c.Compact(),
		Keys: []epochKey{{Epoch: 0, Key: make([]byte, 32)}}})
	pt, _ := json.Marshal(linkBox{Box: box, Sig: ed25519.Sign(person, linkBoxMessage("g", box))})
	if _, err := openLinkBox(pt, "g", dev, xk.PublicKey().Bytes()); err != nil {
		f.Fatal(err)
	}
	f.Add(pt)
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := openLinkBox(b, "g", dev, xk.PublicKey().Bytes())
		if err != nil {
			return
		}
		// Whatever opens carries the person's certificate of these keys.
		pub, err := ParseDIDKey(got.Person)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := devcert.Parse(pub, dev, got.Cert); err != nil {
			t.Fatal("opened without a valid certificate")
		}
	})
}

func FuzzBatchEpoch(f *testing.F) {
	k, _ := newEpochKey(7, make([]byte, 32))
	b, _ := k.key.Seal(fuzzChannel, []Entry{NewEntry("x", time.Unix(1, 0))})
	f.Add(b)
	f.Add([]byte("SKB1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := BatchEpoch(b)
		if err != nil {
			return
		}
		if e != 7 {
			return
		}
		if got, err := k.key.Open(fuzzChannel, b); err == nil && len(got.Entries) > 0 && got.Entries[0].Text != "x" {
			t.Fatal("a batch opened to another text")
		}
	})
}

// TestKeyBundleSizes pins what one revocation costs on the sync channel
// (docs/SECURITY.md): a bundle per linked device of 186 bytes, and one of
// 166 bytes for the homes holding the phrase.
func TestKeyBundleSizes(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	xk, _ := ecdh.X25519().GenerateKey(rand.Reader)
	hk, err := hpkePublic(xk.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	box, err := sealKey(hk, fuzzChannel, 1, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(encodeKeyBundle(priv, fuzzChannel, 1, make([]byte, 32), box)); n != 186 {
		t.Fatalf("a device's bundle is %d bytes", n)
	}
	var seed Seed
	aead, _ := wrapAEAD(&seed)
	if n := len(encodeKeyBundle(priv, fuzzChannel, 1, phraseRecipient, aead.Seal(nil, nil, make([]byte, 32), nil))); n != 166 {
		t.Fatalf("the phrase holders' bundle is %d bytes", n)
	}
}
