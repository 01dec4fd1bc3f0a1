package mls

import (
	"fmt"
	"testing"
)

func BenchmarkExpandWithLabel(b *testing.B) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	secret := make([]byte, 32)
	context := make([]byte, 32)
	defer startCPUMeter().report(b)
	for b.Loop() {
		expandWithLabel(s, secret, "key", context, 16)
	}
}

// BenchmarkKeyPackageGenerate measures NewKeyPackage for suite 1: two fresh
// X25519 key pairs, a LeafNode signature and a KeyPackage signature.
func BenchmarkKeyPackageGenerate(b *testing.B) {
	cs := MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519
	priv, err := GenerateSignatureKey(cs)
	if err != nil {
		b.Fatal(err)
	}
	defer startCPUMeter().report(b)
	for b.Loop() {
		if _, err := NewKeyPackage(cs, "did:key:z6MkBench", priv, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyPackageSign measures the signing step of KeyPackage
// generation for suite 1: parse the signature key once, sign the LeafNode,
// sign the KeyPackage.
func BenchmarkKeyPackageSign(b *testing.B) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	kp, priv := testKeyPackage(b, s)
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

// BenchmarkKeyPackageValidate decodes a suite 1 KeyPackage and verifies
// both of its signatures.
func BenchmarkKeyPackageValidate(b *testing.B) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	kp, _ := testKeyPackage(b, s)
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

// BenchmarkKeyPackageSuite compares suite 1 with the post-quantum suite
// 0x004D on the same two steps: Generate is NewKeyPackage (two HPKE key
// pairs and two signatures); Validate is what a member does with a
// received KeyPackage before adding it: decode, check the public keys
// (for X-Wing, the ML-KEM-768 encapsulation key check) and verify both
// signatures.
func BenchmarkKeyPackageSuite(b *testing.B) {
	for _, cs := range []CipherSuite{MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519, MLS_256_XWING_CHACHA20POLY1305_SHA256_Ed25519} {
		s, _ := suiteFor(cs)
		name := fmt.Sprintf("suite=0x%04x", uint16(cs))
		b.Run(name+"/Generate", func(b *testing.B) {
			priv, err := GenerateSignatureKey(cs)
			if err != nil {
				b.Fatal(err)
			}
			var kp *KeyPackageBundle
			defer startCPUMeter().report(b)
			for b.Loop() {
				if kp, err = NewKeyPackage(cs, "did:key:z6MkBench", priv, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(kp.Bytes())), "kp-B")
		})
		b.Run(name+"/Validate", func(b *testing.B) {
			kp, _ := testKeyPackage(b, s)
			data := marshal(kp)
			defer startCPUMeter().report(b)
			for b.Loop() {
				var got KeyPackage
				if err := unmarshal(data, &got); err != nil {
					b.Fatal(err)
				}
				if err := got.checkKeys(s); err != nil {
					b.Fatal(err)
				}
				if err := got.LeafNode.checkKeys(s); err != nil {
					b.Fatal(err)
				}
				if err := got.verifySignatures(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
