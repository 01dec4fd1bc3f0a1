package mls

import "testing"

func BenchmarkExpandWithLabel(b *testing.B) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	secret := make([]byte, 32)
	context := make([]byte, 32)
	defer startCPUMeter().report(b)
	for b.Loop() {
		expandWithLabel(s, secret, "key", context, 16)
	}
}

func benchKeyPackageInputs(b *testing.B) (suite, Credential, []byte) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	priv, _, err := s.signKeyPair()
	if err != nil {
		b.Fatal(err)
	}
	return s, Credential{CredentialType: CredentialTypeBasic, Identity: []byte("alice")}, priv
}

// BenchmarkKeyPackageGenerate measures a whole KeyPackage for suite 1: two
// HPKE key pairs and two Ed25519 signatures (LeafNode, then KeyPackage).
func BenchmarkKeyPackageGenerate(b *testing.B) {
	s, cred, priv := benchKeyPackageInputs(b)
	defer startCPUMeter().report(b)
	for b.Loop() {
		if _, _, _, err := generateKeyPackage(s, cred, priv, Lifetime{NotAfter: 1 << 40}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyPackageSign measures the signing step of KeyPackage
// generation for suite 1: parse the key, sign the LeafNode, sign the
// KeyPackage.
func BenchmarkKeyPackageSign(b *testing.B) {
	s, cred, priv := benchKeyPackageInputs(b)
	kp, _, _, err := generateKeyPackage(s, cred, priv, Lifetime{NotAfter: 1 << 40}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer startCPUMeter().report(b)
	for b.Loop() {
		sk, err := s.signKey(priv)
		if err != nil {
			b.Fatal(err)
		}
		if err := kp.signWithLeaf(sk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyPackageValidate decodes a KeyPackage and verifies both of its
// signatures.
func BenchmarkKeyPackageValidate(b *testing.B) {
	s, cred, priv := benchKeyPackageInputs(b)
	kp, _, _, err := generateKeyPackage(s, cred, priv, Lifetime{NotAfter: 1 << 40}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	data := marshal(kp)
	defer startCPUMeter().report(b)
	for b.Loop() {
		var got KeyPackage
		if err := unmarshal(data, &got); err != nil {
			b.Fatal(err)
		}
		if err := got.verifySignatures(s); err != nil {
			b.Fatal(err)
		}
	}
}
