package mls

import (
	"bytes"
	"testing"
)

// TestKeyPackageLeaf: the credential and signature key of a KeyPackage,
// as an MLSMessage or bare; one with a byte flipped, or a leaf signed by
// another key, is refused.
func TestKeyPackageLeaf(t *testing.T) {
	sig, err := GenerateSignatureKey(testSuite)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewKeyPackage(testSuite, "did:key:zAlice", sig, nil)
	if err != nil {
		t.Fatal(err)
	}
	cred, key, err := KeyPackageLeaf(b.Bytes())
	if err != nil || string(cred.Identity) != "did:key:zAlice" || !bytes.Equal(key, b.kp.LeafNode.SignatureKey) {
		t.Fatalf("leaf %q %x, %v", cred.Identity, key, err)
	}
	bare := marshal(&b.kp)
	if c, _, err := KeyPackageLeaf(bare); err != nil || string(c.Identity) != "did:key:zAlice" {
		t.Fatalf("bare: %q %v", c.Identity, err)
	}
	for i := range bare {
		bad := bytes.Clone(bare)
		bad[i] ^= 0x01
		if c, _, err := KeyPackageLeaf(bad); err == nil && string(c.Identity) != "did:key:zAlice" {
			t.Fatalf("byte %d flipped: accepted as %q", i, c.Identity)
		}
	}
	other := b.kp
	other.LeafNode.Credential = Credential{CredentialType: CredentialTypeBasic, Identity: []byte("did:key:zMallory")}
	if _, _, err := KeyPackageLeaf(marshal(&other)); err == nil {
		t.Fatal("a KeyPackage whose credential was swapped after signing was accepted")
	}
}

// FuzzKeyPackageLeaf: KeyPackageLeaf never panics, and what it accepts
// carries a leaf whose signature key it returns.
func FuzzKeyPackageLeaf(f *testing.F) {
	for _, s := range messageSeeds(f, "mls_key_package") {
		f.Add(s)
		f.Add(s[4:])
	}
	for _, s := range handmade() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		_, key, err := KeyPackageLeaf(in)
		if err == nil && len(key) == 0 {
			t.Fatal("accepted a KeyPackage without a signature key")
		}
	})
}
