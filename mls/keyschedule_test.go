package mls

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
)

func testEpoch(t *testing.T, s suite) (*epochSecrets, *GroupContext) {
	t.Helper()
	init, err := newRandomInitSecret(s, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	gc := &GroupContext{Version: ProtocolVersionMLS10, CipherSuite: s.id(), GroupID: []byte("group"), TreeHash: []byte("th")}
	j, err := init.joiner(nil, gc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := j.withPSK(nil)
	if err != nil {
		t.Fatal(err)
	}
	es, err := m.epoch(gc)
	if err != nil {
		t.Fatal(err)
	}
	return es, gc
}

// TestKeyScheduleConsumes checks that every step of the chain can run only
// once and wipes its input (§9.2).
func TestKeyScheduleConsumes(t *testing.T) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	raw := bytes.Repeat([]byte{1}, 32)
	init, err := newInitSecret(s, raw)
	if err != nil {
		t.Fatal(err)
	}
	gc := &GroupContext{Version: ProtocolVersionMLS10, CipherSuite: s.id()}
	j, err := init.joiner(nil, gc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, make([]byte, 32)) {
		t.Error("init secret not wiped")
	}
	if _, err := init.joiner(nil, gc); !errors.Is(err, errSecretConsumed) {
		t.Errorf("second joiner: %v", err)
	}
	m, err := j.withPSK(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.withPSK(nil); !errors.Is(err, errSecretConsumed) {
		t.Errorf("second withPSK: %v", err)
	}
	es, err := m.epoch(gc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.epoch(gc); !errors.Is(err, errSecretConsumed) {
		t.Errorf("second epoch: %v", err)
	}
	if _, err := m.welcomeSecret(); !errors.Is(err, errSecretConsumed) {
		t.Errorf("welcome secret after epoch: %v", err)
	}
	if _, err := es.secretTree(2, secretTreeLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := es.secretTree(2, secretTreeLimits{}); !errors.Is(err, errSecretConsumed) {
		t.Errorf("second secret tree: %v", err)
	}
	if _, err := es.nextInit(); err != nil {
		t.Fatal(err)
	}
	if _, err := es.nextInit(); !errors.Is(err, errSecretConsumed) {
		t.Errorf("second nextInit: %v", err)
	}
	if _, err := newInitSecret(s, make([]byte, 31)); err == nil {
		t.Error("short init secret accepted")
	}
	if _, err := newJoinerSecret(s, make([]byte, 33)); err == nil {
		t.Error("long joiner secret accepted")
	}
}

func TestExternalInit(t *testing.T) {
	for _, cs := range implementedSuites {
		s, err := suiteFor(cs)
		if err != nil {
			t.Fatal(err)
		}
		es, _ := testEpoch(t, s)
		priv, pub, err := es.externalKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		kemOutput, joinerInit, err := externalInitSender(s, pub)
		if err != nil {
			t.Fatal(err)
		}
		memberInit, err := externalInitReceiver(s, priv, kemOutput)
		if err != nil {
			t.Fatal(err)
		}
		if len(joinerInit.secret) != s.hashLen() || !bytes.Equal(joinerInit.secret, memberInit.secret) {
			t.Errorf("suite %d: external init secrets differ", cs)
		}
		if _, err := externalInitReceiver(s, priv, kemOutput[:len(kemOutput)-1]); err == nil {
			t.Errorf("suite %d: truncated kem_output accepted", cs)
		}
		if _, _, err := externalInitSender(s, pub[:5]); err == nil {
			t.Errorf("suite %d: bad external_pub accepted", cs)
		}
	}
}

func TestExporterAndConfirmation(t *testing.T) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	es, _ := testEpoch(t, s)
	a, err := es.export("label", []byte("ctx"), 40)
	if err != nil || len(a) != 40 {
		t.Fatalf("export: %v", err)
	}
	b, _ := es.export("label", []byte("ctx2"), 40)
	if bytes.Equal(a, b) {
		t.Error("exporter ignores the context")
	}
	for _, n := range []int{-1, 255*32 + 1, 1 << 16} {
		if _, err := es.export("label", nil, n); err == nil {
			t.Errorf("exporter length %d accepted", n)
		}
	}
	tag := es.confirmationTag([]byte("cth"))
	if !es.verifyConfirmationTag([]byte("cth"), tag) {
		t.Error("confirmation tag does not verify")
	}
	tag[0] ^= 1
	if es.verifyConfirmationTag([]byte("cth"), tag) {
		t.Error("altered confirmation tag verifies")
	}
}

func TestPSKSecretCounts(t *testing.T) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	z, err := pskSecret(s, nil, nil)
	if err != nil || !bytes.Equal(z, make([]byte, 32)) {
		t.Fatalf("no PSKs: %x, %v", z, err)
	}
	if _, err := pskSecret(s, make([]PreSharedKeyID, 1), nil); err == nil {
		t.Error("mismatched PSK count accepted")
	}
}
