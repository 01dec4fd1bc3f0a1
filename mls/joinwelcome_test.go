package mls

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
)

// TestWelcomeRoundTrip builds a Welcome the way a committer does and opens
// it the way a new member does, with one external PSK.
func TestWelcomeRoundTrip(t *testing.T) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	initPriv, initPub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	sigPriv, sigPub, err := s.signKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	kp := &KeyPackage{Version: ProtocolVersionMLS10, CipherSuite: s.id(), InitKey: initPub}
	otherKP := &KeyPackage{Version: ProtocolVersionMLS10, CipherSuite: s.id(), InitKey: bytes.Repeat([]byte{1}, 32)}

	// Committer side.
	gc := &GroupContext{Version: ProtocolVersionMLS10, CipherSuite: s.id(), GroupID: []byte("g"), Epoch: 3,
		TreeHash: []byte("th"), ConfirmedTranscriptHash: bytes.Repeat([]byte{4}, 32)}
	init, _ := newRandomInitSecret(s, rand.Reader)
	joiner, err := init.joiner(nil, gc)
	if err != nil {
		t.Fatal(err)
	}
	psk := []byte("external psk")
	ids := []PreSharedKeyID{{PSKType: PSKTypeExternal, PSKID: []byte("id"), PSKNonce: bytes.Repeat([]byte{5}, 32)}}
	pskSec, _ := pskSecret(s, ids, [][]byte{psk})
	gs := &welcomeSecrets{JoinerSecret: joiner.bytes(), PSKs: ids}
	member, _ := joiner.withPSK(pskSec)
	ws, _ := member.welcomeSecret()
	es, _ := member.epoch(gc)
	gi := &GroupInfo{GroupContext: *gc, ConfirmationTag: es.confirmationTag(gc.ConfirmedTranscriptHash), Signer: 0}
	if err := gi.sign(s, sigPriv); err != nil {
		t.Fatal(err)
	}
	egi, err := sealGroupInfo(s, ws, gi)
	if err != nil {
		t.Fatal(err)
	}
	egs, err := sealGroupSecrets(s, kp, gs, egi)
	if err != nil {
		t.Fatal(err)
	}
	w := &welcomeMessage{CipherSuite: s.id(), Secrets: []encryptedGroupSecrets{egs}, EncryptedGroupInfo: egi}

	resolver := func(got []PreSharedKeyID) ([][]byte, error) {
		if len(got) != 1 || !bytes.Equal(got[0].PSKID, []byte("id")) {
			return nil, errors.New("unknown psk")
		}
		return [][]byte{psk}, nil
	}

	// New member side.
	if _, err := openWelcome(w, otherKP, initPriv, resolver); !errors.Is(err, errNoWelcomeForUs) {
		t.Errorf("other key package: %v", err)
	}
	if _, err := openWelcome(w, kp, initPriv, nil); err == nil {
		t.Error("welcome opened without its PSK")
	}
	j, err := openWelcome(w, kp, initPriv, resolver)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.epoch(); !errors.Is(err, errGroupInfoUnverified) {
		t.Errorf("epoch before verification: %v", err)
	}
	if err := j.verifySigner(bytes.Repeat([]byte{1}, 32)); !errors.Is(err, errGroupInfoSignature) {
		t.Errorf("wrong signer: %v", err)
	}
	if err := j.verifySigner(sigPub); err != nil {
		t.Fatal(err)
	}
	got, interim, err := j.epoch()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.epochAuthenticator, es.epochAuthenticator) {
		t.Error("joiner and committer disagree on the epoch")
	}
	if !bytes.Equal(interim, interimTranscriptHash(s, gc.ConfirmedTranscriptHash, gi.ConfirmationTag)) {
		t.Error("wrong interim transcript hash")
	}

	// A GroupInfo with a bad confirmation tag is refused.
	gi.ConfirmationTag[0] ^= 1
	if err := gi.sign(s, sigPriv); err != nil {
		t.Fatal(err)
	}
	member2, _ := mustJoiner(t, s, gs.JoinerSecret).withPSK(pskSec)
	ws2, _ := member2.welcomeSecret()
	w.EncryptedGroupInfo, _ = sealGroupInfo(s, ws2, gi)
	egs, _ = sealGroupSecrets(s, kp, gs, w.EncryptedGroupInfo)
	w.Secrets = []encryptedGroupSecrets{egs}
	j, err = openWelcome(w, kp, initPriv, resolver)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.verifySigner(sigPub); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.epoch(); !errors.Is(err, errBadConfirmationTag) {
		t.Errorf("bad confirmation tag: %v", err)
	}

	// GroupSecrets bound to another encrypted GroupInfo do not decrypt.
	w.EncryptedGroupInfo = egi
	if _, err := openWelcome(w, kp, initPriv, resolver); err == nil {
		t.Error("group secrets bound to another group info accepted")
	}
}

func mustJoiner(t *testing.T, s suite, secret []byte) *joinerSecret {
	t.Helper()
	j, err := newJoinerSecret(s, bytes.Clone(secret))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func TestWelcomePSKRules(t *testing.T) {
	reinit := PreSharedKeyID{PSKType: PSKTypeResumption, Usage: ResumptionPSKUsageReInit}
	branch := PreSharedKeyID{PSKType: PSKTypeResumption, Usage: ResumptionPSKUsageBranch}
	app := PreSharedKeyID{PSKType: PSKTypeResumption, Usage: ResumptionPSKUsageApplication}
	if err := checkWelcomePSKs([]PreSharedKeyID{reinit, app, app}); err != nil {
		t.Error(err)
	}
	if err := checkWelcomePSKs([]PreSharedKeyID{reinit, branch}); err == nil {
		t.Error("two reinit/branch PSKs accepted")
	}
}
