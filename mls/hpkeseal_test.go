package mls

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// TestHPKESealerOpens checks hpkeSealer against crypto/hpke: what it seals
// opens with hpkeOpen (crypto/hpke's SetupBaseR and Open) under the same
// info and no other, in every suite, and a bad public key is refused as
// hpkeSeal refuses it.
func TestHPKESealerOpens(t *testing.T) {
	for _, cs := range SupportedSuites() {
		s, err := suiteFor(cs)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 32, 200} {
			info := make([]byte, n)
			rand.Read(info)
			seal := s.hpkeSealer(info)
			for range 4 {
				priv, pub, err := s.hpkeGenerateKeyPair()
				if err != nil {
					t.Fatal(err)
				}
				pt := make([]byte, 32)
				rand.Read(pt)
				kem, ct, err := seal(pub, pt)
				if err != nil {
					t.Fatalf("%v: %v", cs, err)
				}
				got, err := s.hpkeOpen(priv, kem, info, nil, ct)
				if err != nil || !bytes.Equal(got, pt) {
					t.Fatalf("%v, info of %d bytes: opened %x, %v; want %x", cs, n, got, err, pt)
				}
				if _, err := s.hpkeOpen(priv, kem, append(info, 0), nil, ct); err == nil {
					t.Fatalf("%v: opened under another info", cs)
				}
			}
		}
		if _, _, err := s.hpkeSealer(nil)([]byte{1, 2, 3}, []byte("x")); err == nil || err.Error() != "mls: invalid HPKE public key" {
			t.Fatalf("%v: short public key: %v", cs, err)
		}
	}
}
