package mls

import (
	"bytes"
	"errors"
	"testing"
)

func testLeaf() LeafNode {
	return LeafNode{
		EncryptionKey:  []byte("enc"),
		SignatureKey:   []byte("sig"),
		Credential:     Credential{CredentialType: CredentialTypeBasic, Identity: []byte("alice")},
		Capabilities:   Capabilities{Versions: []ProtocolVersion{ProtocolVersionMLS10}, CipherSuites: []CipherSuite{1}},
		LeafNodeSource: LeafNodeSourceKeyPackage,
		Lifetime:       Lifetime{NotBefore: 1, NotAfter: 2},
		Signature:      []byte("signature"),
	}
}

func TestWireRoundTrip(t *testing.T) {
	leaf := testLeaf()
	values := []interface {
		marshal(*builder)
		unmarshal(*parser) bool
	}{
		&leaf,
		&Credential{CredentialType: CredentialTypeX509, Certificates: [][]byte{[]byte("a"), {}}},
		&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage, PublicMessage: &publicMessage{
			Content: framedContent{
				GroupID: []byte("g"), Epoch: 7, Sender: Sender{SenderType: SenderTypeExternal, SenderIndex: 3},
				ContentType: ContentTypeProposal, Proposal: &Proposal{ProposalType: ProposalTypePSK, PreSharedKey: &PreSharedKey{PSK: PreSharedKeyID{
					PSKType: PSKTypeResumption, Usage: ResumptionPSKUsageBranch, PSKGroupID: []byte("h"), PSKEpoch: 9, PSKNonce: []byte("n"),
				}}},
			},
			Auth: framedContentAuthData{Signature: []byte("s")},
		}},
		&welcomeSecrets{JoinerSecret: []byte("j"), PathSecret: &pathSecretMsg{PathSecret: []byte("p")}},
		&framedContentToSign{Version: 1, WireFormat: 1, Content: framedContent{ContentType: ContentTypeApplication, Sender: Sender{SenderType: SenderTypeMember}}, Context: &GroupContext{Version: 1, Epoch: 4}},
		&authenticatedContent{WireFormat: 2, Content: framedContent{Sender: Sender{SenderType: SenderTypeNewMemberCommit}, ContentType: ContentTypeCommit, Commit: &commitContent{}}, Auth: framedContentAuthData{ConfirmationTag: []byte("t")}},
		&senderData{LeafIndex: 1, Generation: 2, ReuseGuard: [4]byte{1, 2, 3, 4}},
		&senderDataAAD{GroupID: []byte("g"), ContentType: ContentTypeCommit},
		&privateContentAAD{GroupID: []byte("g"), ContentType: ContentTypeApplication, AuthenticatedData: []byte("a")},
		&requiredCapabilities{ExtensionTypes: []ExtensionType{5}, ProposalTypes: []ProposalType{7}, CredentialTypes: []CredentialType{1}},
		&externalSenders{Senders: []ExternalSender{{SignatureKey: []byte("k"), Credential: Credential{CredentialType: CredentialTypeBasic}}}},
		&ExternalPub{ExternalPub: []byte("x")},
		&ApplicationID{ApplicationID: []byte("app")},
	}
	for _, v := range values {
		enc := marshal(v)
		if err := unmarshal(enc, v); err != nil {
			t.Errorf("%T: %v", v, err)
			continue
		}
		if again := marshal(v); !bytes.Equal(again, enc) {
			t.Errorf("%T: round trip differs", v)
		}
		if err := unmarshal(append(enc, 0), v); err == nil {
			t.Errorf("%T: trailing byte accepted", v)
		}
		for n := range enc {
			if err := unmarshal(enc[:n], v); err == nil {
				t.Errorf("%T: truncation to %d bytes accepted", v, n)
			}
		}
	}
}

// TestWireRejects checks the enum values decoding must refuse.
func TestWireRejects(t *testing.T) {
	msg := func(version, wf uint16, body ...byte) []byte {
		var b builder
		b.u16(version)
		b.u16(wf)
		b.raw(body)
		return b.bytes()
	}
	priv := privateMessage{GroupID: []byte("g"), ContentType: ContentTypeApplication}
	privBody := marshal(&priv)
	if err := unmarshal(msg(1, 2, privBody...), new(mlsMessage)); err != nil {
		t.Fatalf("valid private message rejected: %v", err)
	}
	badCT := bytes.Clone(privBody)
	badCT[2+8] = 4 // content_type after group_id<V> and epoch
	for name, in := range map[string][]byte{
		"version 0":           msg(0, 2, privBody...),
		"version 2":           msg(2, 2, privBody...),
		"wire format 0":       msg(1, 0, privBody...),
		"wire format 6":       msg(1, 6, privBody...),
		"content type 4":      msg(1, 2, badCT...),
		"unknown credential":  {0x00, 0x03, 0x00},
		"reserved credential": {0x00, 0x00, 0x00},
	} {
		var err error
		if name == "unknown credential" || name == "reserved credential" {
			err = unmarshal(in, new(Credential))
		} else {
			err = unmarshal(in, new(mlsMessage))
		}
		if err == nil {
			t.Errorf("%s accepted", name)
		}
	}

	for name, in := range map[string][]byte{
		"unknown proposal type": {0x00, 0x08, 0x00},
		"grease proposal type":  {0x0a, 0x0a, 0x00},
		"psk type 0":            {0x00, 0x04, 0x00, 0x00, 0x00},
		"psk usage 4":           {0x00, 0x04, 0x02, 0x04, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00},
	} {
		if err := unmarshal(in, new(Proposal)); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if err := unmarshal([]byte{0x00, 0x04, 0x02, 0x03, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0x00}, new(Proposal)); err != nil {
		t.Errorf("valid psk proposal rejected: %v", err)
	}

	leaf := testLeaf()
	enc := marshal(&leaf)
	srcAt := bytes.Index(enc, []byte{byte(LeafNodeSourceKeyPackage), 0, 0, 0, 0, 0, 0, 0, 1})
	for _, src := range []byte{0, 4} {
		bad := bytes.Clone(enc)
		bad[srcAt] = src
		if err := unmarshal(bad, new(LeafNode)); err == nil {
			t.Errorf("leaf node source %d accepted", src)
		}
	}
	if err := unmarshal([]byte{0x00, 0x02, 0x03}, new(proposalOrRef)); err == nil {
		t.Error("proposal-or-ref type 3 accepted")
	}
	gc := marshal(&GroupContext{Version: 2})
	if err := unmarshal(gc, new(GroupContext)); err == nil {
		t.Error("group context version 2 accepted")
	}
	if err := unmarshal([]byte{0x05}, new(Sender)); err == nil {
		t.Error("sender type 5 accepted")
	}
	if err := unmarshal([]byte{0x00, 0x02}, new(commitContent)); err == nil {
		t.Error("optional flag 2 accepted")
	}
}

func TestPrivateMessageContentPadding(t *testing.T) {
	c := privateMessageContent{ApplicationData: []byte("hi"), Auth: framedContentAuthData{Signature: []byte("s")}, Padding: 5}
	var b builder
	c.marshal(&b, ContentTypeApplication)
	enc := b.bytes()

	var got privateMessageContent
	if p := newParser(enc); !got.unmarshal(p, ContentTypeApplication) || !p.empty() || got.Padding != 5 {
		t.Fatalf("decode: %+v", got)
	}
	enc[len(enc)-2] = 1
	if got.unmarshal(newParser(enc), ContentTypeApplication) {
		t.Error("non-zero padding accepted")
	}
}

// testKeyPackage builds a signed KeyPackage for suite s.
func testKeyPackage(t testing.TB, s suite) (*KeyPackage, []byte) {
	priv, pub, err := s.signKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	_, initPub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	_, encPub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	kp := &KeyPackage{
		Version:     ProtocolVersionMLS10,
		CipherSuite: s.id(),
		InitKey:     initPub,
		LeafNode: LeafNode{
			EncryptionKey:  encPub,
			SignatureKey:   pub,
			Credential:     Credential{CredentialType: CredentialTypeBasic, Identity: []byte("alice")},
			Capabilities:   Capabilities{Versions: []ProtocolVersion{ProtocolVersionMLS10}, CipherSuites: []CipherSuite{s.id()}},
			LeafNodeSource: LeafNodeSourceKeyPackage,
			Lifetime:       Lifetime{NotBefore: 500, NotAfter: 2000},
			Extensions:     []Extension{{ExtensionType: 0x0a0a}},
		},
	}
	sk, err := s.signKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := kp.signWithLeaf(sk); err != nil {
		t.Fatal(err)
	}
	return kp, priv
}

func TestKeyPackageSignatures(t *testing.T) {
	for _, cs := range implementedSuites {
		s, _ := suiteFor(cs)
		kp, priv := testKeyPackage(t, s)
		if err := kp.verifySignatures(s); err != nil {
			t.Fatalf("suite %d: %v", cs, err)
		}

		// Through the wire and back, it still verifies.
		var got KeyPackage
		if err := unmarshal(marshal(&mlsMessage{Version: 1, WireFormat: WireFormatKeyPackage, KeyPackage: kp})[4:], &got); err != nil {
			t.Fatal(err)
		}
		if err := got.verifySignatures(s); err != nil {
			t.Fatalf("suite %d: decoded: %v", cs, err)
		}
		if len(kp.ref(s)) != s.hashLen() {
			t.Errorf("suite %d: bad ref length", cs)
		}

		// signWithLeaf gives the same signatures as signing each part with
		// the key bytes (deterministic for Ed25519; verifiable for ECDSA).
		k2 := *kp
		if err := k2.LeafNode.sign(s, priv, nil, 0); err != nil {
			t.Fatal(err)
		}
		if err := k2.sign(s, priv); err != nil {
			t.Fatal(err)
		}
		if err := k2.verifySignatures(s); err != nil {
			t.Errorf("suite %d: separately signed: %v", cs, err)
		}

		for name, mutate := range map[string]func(k *KeyPackage){
			"suite":       func(k *KeyPackage) { k.CipherSuite ^= 0x10 },
			"signature":   func(k *KeyPackage) { k.Signature = bytes.Clone(k.Signature); k.Signature[3] ^= 1 },
			"init key":    func(k *KeyPackage) { k.InitKey = bytes.Clone(k.LeafNode.EncryptionKey) },
			"leaf":        func(k *KeyPackage) { k.LeafNode.Lifetime.NotAfter++ },
			"leaf source": func(k *KeyPackage) { k.LeafNode.LeafNodeSource = LeafNodeSourceUpdate },
			"leaf sig": func(k *KeyPackage) {
				k.LeafNode.Signature = bytes.Clone(k.LeafNode.Signature)
				k.LeafNode.Signature[5] ^= 1
			},
		} {
			k := *kp
			mutate(&k)
			if err := k.verifySignatures(s); err == nil {
				t.Errorf("suite %d: %s mutation accepted", cs, name)
			}
		}
	}
}

func TestLeafNodeTBSBindsGroup(t *testing.T) {
	s, _ := suiteFor(1)
	priv, pub, _ := s.signKeyPair()
	_, encPub, _ := s.hpkeGenerateKeyPair()
	leaf := testLeaf()
	leaf.EncryptionKey = encPub
	leaf.SignatureKey = pub
	leaf.LeafNodeSource = LeafNodeSourceUpdate
	if err := leaf.sign(s, priv, []byte("group"), 3); err != nil {
		t.Fatal(err)
	}
	if !leaf.verifySignature(s, []byte("group"), 3) {
		t.Fatal("signature does not verify")
	}
	if leaf.verifySignature(s, []byte("group"), 4) || leaf.verifySignature(s, []byte("other"), 3) {
		t.Error("update leaf signature not bound to group and leaf index")
	}
}

func TestGroupInfoSignature(t *testing.T) {
	s, _ := suiteFor(2)
	priv, pub, _ := s.signKeyPair()
	gi := GroupInfo{GroupContext: GroupContext{Version: 1, CipherSuite: 2, GroupID: []byte("g")}, ConfirmationTag: []byte("t"), Signer: 1}
	if err := gi.sign(s, priv); err != nil {
		t.Fatal(err)
	}
	if !gi.verifySignature(s, pub) {
		t.Fatal("signature does not verify")
	}
	gi.Signer = 2
	if gi.verifySignature(s, pub) {
		t.Error("signature verifies after signer changed")
	}
}

func TestUnsupportedSuiteKeyPackage(t *testing.T) {
	if _, err := suiteFor(MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448); !errors.Is(err, errUnsupportedSuite) {
		t.Fatal(err)
	}
}
