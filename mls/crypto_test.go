package mls

import (
	"bytes"
	"errors"
	"testing"
)

var implementedSuites = SupportedSuites()

func TestSuiteFor(t *testing.T) {
	for _, cs := range []CipherSuite{0, 4, 6, 8, 0xffff} {
		if _, err := suiteFor(cs); !errors.Is(err, errUnsupportedSuite) {
			t.Errorf("suiteFor(%d): err = %v, want errUnsupportedSuite", cs, err)
		}
	}
}

func TestSuitePrimitives(t *testing.T) {
	for _, cs := range implementedSuites {
		s, err := suiteFor(cs)
		if err != nil {
			t.Fatal(err)
		}
		if s.id() != cs || len(s.hash(nil)) != s.hashLen() {
			t.Errorf("suite %d: bad id or hash length", cs)
		}

		// Signatures.
		priv, pub, err := s.signKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		if p, err := s.signPublicFromPrivate(priv); err != nil || !bytes.Equal(p, pub) {
			t.Errorf("suite %d: signPublicFromPrivate mismatch", cs)
		}
		sig, err := signWithLabel(s, priv, "Test", []byte("content"))
		if err != nil {
			t.Fatal(err)
		}
		if !verifyWithLabel(s, pub, "Test", []byte("content"), sig) {
			t.Errorf("suite %d: signature does not verify", cs)
		}
		if verifyWithLabel(s, pub, "Test", []byte("other"), sig) || s.verify(pub[:1], nil, sig) {
			t.Errorf("suite %d: bad signature verifies", cs)
		}
		if _, err := s.sign(priv[:1], nil); err == nil {
			t.Errorf("suite %d: short private key accepted", cs)
		}

		// HPKE.
		hpriv, hpub, err := s.hpkeGenerateKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		kem, ct, err := encryptWithLabel(s, hpub, "Test", []byte("ctx"), []byte("secret"))
		if err != nil {
			t.Fatal(err)
		}
		if pt, err := decryptWithLabel(s, hpriv, "Test", []byte("ctx"), kem, ct); err != nil || string(pt) != "secret" {
			t.Errorf("suite %d: HPKE round trip: %v", cs, err)
		}
		if _, err := decryptWithLabel(s, hpriv, "Other", []byte("ctx"), kem, ct); err == nil {
			t.Errorf("suite %d: HPKE decrypts under another label", cs)
		}
		if _, _, err := s.hpkeSeal([]byte{1, 2, 3}, nil, nil, nil); err == nil {
			t.Errorf("suite %d: invalid HPKE public key accepted", cs)
		}
		dpriv, dpub, err := s.hpkeDeriveKeyPair([]byte("ikm ikm ikm ikm ikm ikm ikm ikm"))
		if err != nil {
			t.Fatal(err)
		}
		if p, err := s.hpkePublicFromPrivate(dpriv); err != nil || !bytes.Equal(p, dpub) {
			t.Errorf("suite %d: hpkePublicFromPrivate mismatch", cs)
		}

		// AEAD.
		key, nonce := make([]byte, s.aeadKeyLen()), make([]byte, s.aeadNonceLen())
		ct, err = s.aeadSeal(key, nonce, []byte("aad"), []byte("pt"))
		if err != nil {
			t.Fatal(err)
		}
		if pt, err := s.aeadOpen(key, nonce, []byte("aad"), ct); err != nil || string(pt) != "pt" {
			t.Errorf("suite %d: AEAD round trip: %v", cs, err)
		}
		if _, err := s.aeadOpen(key, nonce, []byte("bad"), ct); err == nil {
			t.Errorf("suite %d: AEAD opens with wrong aad", cs)
		}
		if _, err := s.aeadSeal(key[:1], nonce, nil, nil); err == nil {
			t.Errorf("suite %d: short AEAD key accepted", cs)
		}
		if _, err := s.aeadSeal(key, nonce[:1], nil, nil); err == nil {
			t.Errorf("suite %d: short AEAD nonce accepted", cs)
		}
	}
}
