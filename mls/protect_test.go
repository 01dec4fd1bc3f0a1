package mls

import (
	"bytes"
	"errors"
	"testing"
)

// protectFixture is a two-member group in one epoch: sender is leaf 1's
// view, receiver leaf 0's, both built from the same epoch secrets.
type protectFixture struct {
	s                  suite
	sigPriv, sigPub    []byte
	gc                 *GroupContext
	sender, receiver   *epochProtection
	encryptionSecret   []byte
	senderDataSecret   []byte
	membershipKey      []byte
	nLeaves            uint32
	signerCalls        int
	signerFailsForLeaf int
}

func newProtectFixture(tb testing.TB, cs CipherSuite) *protectFixture {
	tb.Helper()
	s, err := suiteFor(cs)
	if err != nil {
		tb.Fatal(err)
	}
	priv, pub, err := s.signKeyPair()
	if err != nil {
		tb.Fatal(err)
	}
	f := &protectFixture{
		s: s, sigPriv: priv, sigPub: pub,
		gc: &GroupContext{
			Version: ProtocolVersionMLS10, CipherSuite: cs, GroupID: []byte("group"), Epoch: 7,
			TreeHash: bytes.Repeat([]byte{1}, s.hashLen()), ConfirmedTranscriptHash: bytes.Repeat([]byte{2}, s.hashLen()),
		},
		encryptionSecret:   bytes.Repeat([]byte{3}, s.hashLen()),
		senderDataSecret:   bytes.Repeat([]byte{4}, s.hashLen()),
		membershipKey:      bytes.Repeat([]byte{5}, s.hashLen()),
		nLeaves:            2,
		signerFailsForLeaf: -1,
	}
	f.sender = f.newProtection(tb)
	f.receiver = f.newProtection(tb)
	return f
}

func (f *protectFixture) newProtection(tb testing.TB) *epochProtection {
	tree, err := newSecretTree(f.s, bytes.Clone(f.encryptionSecret), f.nLeaves, secretTreeLimits{})
	if err != nil {
		tb.Fatal(err)
	}
	return &epochProtection{s: f.s, gc: f.gc, membershipKey: f.membershipKey, senderDataSecret: f.senderDataSecret, tree: tree}
}

func (f *protectFixture) signer(fc *framedContent) ([]byte, error) {
	f.signerCalls++
	if fc.Sender.SenderType == SenderTypeMember && int(fc.Sender.LeafIndex) == f.signerFailsForLeaf {
		return nil, errors.New("mls: blank leaf")
	}
	return f.sigPub, nil
}

func (f *protectFixture) content(ct ContentType, data []byte) *framedContent {
	fc := &framedContent{
		GroupID: f.gc.GroupID, Epoch: f.gc.Epoch,
		Sender:            Sender{SenderType: SenderTypeMember, LeafIndex: 1},
		AuthenticatedData: []byte("aad"),
		ContentType:       ct,
	}
	switch ct {
	case ContentTypeApplication:
		fc.ApplicationData = data
	case ContentTypeProposal:
		fc.Proposal = &Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: 0}}
	case ContentTypeCommit:
		fc.Commit = &commitContent{}
	}
	return fc
}

func (f *protectFixture) protect(tb testing.TB, fc *framedContent) *privateMessage {
	tb.Helper()
	ac, err := signFramedContent(f.s, f.sigPriv, WireFormatPrivateMessage, fc, f.gc)
	if err != nil {
		tb.Fatal(err)
	}
	if fc.ContentType == ContentTypeCommit {
		ac.Auth.ConfirmationTag = bytes.Repeat([]byte{9}, f.s.hashLen())
	}
	pm, err := f.sender.protectPrivate(ac)
	if err != nil {
		tb.Fatal(err)
	}
	return pm
}

func TestPrivateMessageRoundTrip(t *testing.T) {
	for _, cs := range implementedSuites {
		f := newProtectFixture(t, cs)
		for _, ct := range []ContentType{ContentTypeApplication, ContentTypeProposal, ContentTypeCommit} {
			fc := f.content(ct, []byte("hello"))
			pm := f.protect(t, fc)
			ac, err := f.receiver.unprotectPrivate(pm, f.signer)
			if err != nil {
				t.Fatalf("suite %d type %d: %v", cs, ct, err)
			}
			if !bytes.Equal(marshal(&ac.Content), marshal(fc)) {
				t.Errorf("suite %d type %d: content changed", cs, ct)
			}
			// A replay finds its key consumed (§9.2).
			if _, err := f.receiver.unprotectPrivate(pm, f.signer); !errors.Is(err, errGenerationConsumed) {
				t.Errorf("suite %d type %d: replay: %v", cs, ct, err)
			}
		}
	}
}

func TestPrivateMessagePadding(t *testing.T) {
	f := newProtectFixture(t, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	var seen int
	f.sender.paddingSize = func(n int) int { seen = n; return 64 - n%64 }
	pm := f.protect(t, f.content(ContentTypeApplication, []byte("padded")))
	if want := (seen+63)/64*64 + 16; len(pm.Ciphertext) != want || seen == 0 {
		t.Errorf("ciphertext length %d, want %d", len(pm.Ciphertext), want)
	}
	if _, err := f.receiver.unprotectPrivate(pm, f.signer); err != nil {
		t.Fatal(err)
	}
	f.sender.paddingSize = func(int) int { return -1 }
	ac, _ := signFramedContent(f.s, f.sigPriv, WireFormatPrivateMessage, f.content(ContentTypeApplication, nil), f.gc)
	if _, err := f.sender.protectPrivate(ac); err == nil {
		t.Error("negative padding accepted")
	}
}

// TestPrivateMessageNonZeroPadding encrypts, with the right keys, a
// plaintext whose padding has a non-zero byte: it must be rejected (§6.3.1).
func TestPrivateMessageNonZeroPadding(t *testing.T) {
	f := newProtectFixture(t, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	fc := f.content(ContentTypeApplication, []byte("x"))
	ac, err := signFramedContent(f.s, f.sigPriv, WireFormatPrivateMessage, fc, f.gc)
	if err != nil {
		t.Fatal(err)
	}
	pmc := privateMessageContent{ApplicationData: fc.ApplicationData, Auth: ac.Auth}
	var b builder
	pmc.marshal(&b, fc.ContentType)
	b.raw([]byte{0, 0, 1, 0})
	k, err := f.sender.tree.nextSendKey(1, applicationRatchet)
	if err != nil {
		t.Fatal(err)
	}
	aad := marshal(&privateContentAAD{GroupID: fc.GroupID, Epoch: fc.Epoch, ContentType: fc.ContentType, AuthenticatedData: fc.AuthenticatedData})
	ct, _ := f.s.aeadSeal(k.key, k.nonce, aad, b.bytes())
	sdKey, sdNonce := senderDataKeyNonce(f.s, f.senderDataSecret, ct)
	sdAAD := marshal(&senderDataAAD{GroupID: fc.GroupID, Epoch: fc.Epoch, ContentType: fc.ContentType})
	esd, _ := f.s.aeadSeal(sdKey, sdNonce, sdAAD, marshal(&senderData{LeafIndex: 1, Generation: k.generation}))
	pm := &privateMessage{GroupID: fc.GroupID, Epoch: fc.Epoch, ContentType: fc.ContentType, AuthenticatedData: fc.AuthenticatedData, EncryptedSenderData: esd, Ciphertext: ct}
	if _, err := f.receiver.unprotectPrivate(pm, f.signer); !errors.Is(err, errMalformedContent) {
		t.Fatalf("non-zero padding: %v", err)
	}
}

func TestPrivateMessageRejects(t *testing.T) {
	f := newProtectFixture(t, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	good := f.protect(t, f.content(ContentTypeApplication, []byte("m")))
	tamper := func(mod func(pm *privateMessage)) *privateMessage {
		pm := *good
		pm.Ciphertext = bytes.Clone(good.Ciphertext)
		pm.EncryptedSenderData = bytes.Clone(good.EncryptedSenderData)
		mod(&pm)
		return &pm
	}
	for name, tc := range map[string]struct {
		pm   *privateMessage
		want error
	}{
		"group":       {tamper(func(pm *privateMessage) { pm.GroupID = []byte("other") }), errWrongGroup},
		"epoch":       {tamper(func(pm *privateMessage) { pm.Epoch++ }), errWrongEpoch},
		"sender data": {tamper(func(pm *privateMessage) { pm.EncryptedSenderData[0] ^= 1 }), errBadSenderData},
		// The ciphertext sample feeds the sender data key, so this
		// fails there already.
		"ciphertext":   {tamper(func(pm *privateMessage) { pm.Ciphertext[0] ^= 1 }), errBadSenderData},
		"tail":         {tamper(func(pm *privateMessage) { pm.Ciphertext[len(pm.Ciphertext)-1] ^= 1 }), errDecryptionFailed},
		"aad":          {tamper(func(pm *privateMessage) { pm.AuthenticatedData = []byte("AAD") }), errDecryptionFailed},
		"content type": {tamper(func(pm *privateMessage) { pm.ContentType = ContentTypeProposal }), errBadSenderData},
	} {
		if _, err := f.receiver.unprotectPrivate(tc.pm, f.signer); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	// None of the failures consumed the key.
	if _, err := f.receiver.unprotectPrivate(good, f.signer); err != nil {
		t.Fatalf("good message after forgeries: %v", err)
	}

	// A sender whose leaf the signer lookup refuses (a blank leaf).
	f.signerFailsForLeaf = 1
	if _, err := f.receiver.unprotectPrivate(f.protect(t, f.content(ContentTypeApplication, nil)), f.signer); err == nil {
		t.Error("message from a refused leaf accepted")
	}
	f.signerFailsForLeaf = -1

	// A bad signature.
	other := newProtectFixture(t, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	f.sigPub = other.sigPub
	if _, err := f.receiver.unprotectPrivate(f.protect(t, f.content(ContentTypeApplication, nil)), f.signer); !errors.Is(err, errBadSignature) {
		t.Errorf("bad signature: %v", err)
	}
}

func TestPrivateMessageSenderChecks(t *testing.T) {
	f := newProtectFixture(t, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	fc := f.content(ContentTypeProposal, nil)
	fc.Sender = Sender{SenderType: SenderTypeExternal}
	ac, _ := signFramedContent(f.s, f.sigPriv, WireFormatPrivateMessage, fc, f.gc)
	if _, err := f.sender.protectPrivate(ac); err == nil {
		t.Error("external sender protected as PrivateMessage")
	}
	fc = f.content(ContentTypeApplication, nil)
	ac, _ = signFramedContent(f.s, f.sigPriv, WireFormatPublicMessage, fc, f.gc)
	if _, err := f.sender.protectPrivate(ac); err == nil {
		t.Error("content signed for PublicMessage protected as PrivateMessage")
	}
	fc.Sender.LeafIndex = 2
	ac, _ = signFramedContent(f.s, f.sigPriv, WireFormatPrivateMessage, fc, f.gc)
	if _, err := f.sender.protectPrivate(ac); !errors.Is(err, errLeafOutOfRange) {
		t.Errorf("leaf outside the tree: %v", err)
	}
}

func TestPublicMessage(t *testing.T) {
	f := newProtectFixture(t, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	sign := func(fc *framedContent) *authenticatedContent {
		ac, err := signFramedContent(f.s, f.sigPriv, WireFormatPublicMessage, fc, f.gc)
		if err != nil {
			t.Fatal(err)
		}
		return ac
	}
	pm, err := f.sender.protectPublic(sign(f.content(ContentTypeProposal, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.receiver.unprotectPublic(pm, f.signer); err != nil {
		t.Fatal(err)
	}
	pm.MembershipTag[0] ^= 1
	if _, err := f.receiver.unprotectPublic(pm, f.signer); !errors.Is(err, errBadMembershipTag) {
		t.Errorf("bad membership tag: %v", err)
	}
	pm.MembershipTag[0] ^= 1
	pm.Content.AuthenticatedData = []byte("changed")
	if _, err := f.receiver.unprotectPublic(pm, f.signer); !errors.Is(err, errBadMembershipTag) {
		t.Errorf("changed content: %v", err)
	}
	if _, err := f.sender.protectPublic(sign(f.content(ContentTypeApplication, []byte("x")))); !errors.Is(err, errApplicationInPlain) {
		t.Errorf("application as PublicMessage: %v", err)
	}

	// External senders have no membership tag and sign without the
	// GroupContext; they may only send proposals.
	fc := f.content(ContentTypeProposal, nil)
	fc.Sender = Sender{SenderType: SenderTypeExternal, SenderIndex: 0}
	pm, err = f.sender.protectPublic(sign(fc))
	if err != nil {
		t.Fatal(err)
	}
	if pm.MembershipTag != nil {
		t.Error("membership tag on an external sender's message")
	}
	if _, err := f.receiver.unprotectPublic(pm, f.signer); err != nil {
		t.Fatal(err)
	}
	fc = f.content(ContentTypeCommit, nil)
	fc.Sender = Sender{SenderType: SenderTypeExternal}
	if _, err := f.sender.protectPublic(sign(fc)); err == nil {
		t.Error("commit from an external sender accepted")
	}
	fc = f.content(ContentTypeProposal, nil)
	fc.Sender = Sender{SenderType: SenderTypeNewMemberCommit}
	if _, err := f.sender.protectPublic(sign(fc)); err == nil {
		t.Error("proposal from a new_member_commit sender accepted")
	}
}

// FuzzUnprotect feeds arbitrary MLSMessages to both unprotect paths: they
// must fail cleanly, never panic, and never move a ratchet on failure.
func FuzzUnprotect(f *testing.F) {
	fx := newProtectFixture(f, MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	// Fuzz workers rebuild the fixture, so its signature key must not be
	// random.
	fx.sigPriv = bytes.Repeat([]byte{6}, 32)
	fx.sigPub, _ = fx.s.signPublicFromPrivate(fx.sigPriv)
	for _, ct := range []ContentType{ContentTypeApplication, ContentTypeProposal, ContentTypeCommit} {
		pm := fx.protect(f, fx.content(ct, []byte("seed")))
		f.Add(marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm}))
	}
	ac, err := signFramedContent(fx.s, fx.sigPriv, WireFormatPublicMessage, fx.content(ContentTypeProposal, nil), fx.gc)
	if err != nil {
		f.Fatal(err)
	}
	pub, err := fx.sender.protectPublic(ac)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage, PublicMessage: pub}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var msg mlsMessage
		if unmarshal(data, &msg) != nil {
			return
		}
		receiver := fx.newProtection(t)
		switch msg.WireFormat {
		case WireFormatPrivateMessage:
			// A message that does not decrypt consumes nothing (§9.2).
			_, err := receiver.unprotectPrivate(msg.PrivateMessage, fx.signer)
			if err != nil && !errors.Is(err, errBadSignature) && !errors.Is(err, errMalformedContent) {
				for _, lr := range receiver.tree.leaves {
					if lr.application.gen != 0 || lr.handshake.gen != 0 {
						t.Fatalf("failed message (%v) moved a ratchet", err)
					}
				}
			}
		case WireFormatPublicMessage:
			receiver.unprotectPublic(msg.PublicMessage, fx.signer)
		}
	})
}
