package mls

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"testing"
)

// lowOrderX25519 is a low-order X25519 point: multiplying it by any
// clamped scalar gives the all-zero shared secret (RFC 7748, Section 6.1).
var lowOrderX25519 = x25519SmallOrder[2][:]

// TestX25519SmallOrderTable checks the table of small-order points against
// crypto/ecdh, which refuses an all-zero shared secret: every entry (with
// bit 255 clear or set) must make X25519 fail, and fresh keys must pass.
func TestX25519SmallOrderTable(t *testing.T) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range x25519SmallOrder {
		for _, top := range []byte{0, 0x80} {
			q := p
			q[31] |= top
			pub, err := ecdh.X25519().NewPublicKey(q[:])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := priv.ECDH(pub); err == nil {
				t.Errorf("entry %d (top bit %#x) is not of small order", i, top)
			}
			if err := suiteX25519AES128.checkHPKEPublicKey(q[:]); err == nil {
				t.Errorf("entry %d (top bit %#x) accepted", i, top)
			}
		}
	}
	for range 100 {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if err := suiteX25519AES128.checkHPKEPublicKey(k.PublicKey().Bytes()); err != nil {
			t.Fatalf("fresh key refused: %v", err)
		}
	}
}

// signedProposal returns a PublicMessage carrying p from member g, as g's
// engine would send it if it did not check p itself.
func signedProposal(t *testing.T, g *Group, p *Proposal) []byte {
	t.Helper()
	fc := &framedContent{
		GroupID:     g.cur.ctx.GroupID,
		Epoch:       g.cur.ctx.Epoch,
		Sender:      Sender{SenderType: SenderTypeMember, LeafIndex: g.LeafIndex()},
		ContentType: ContentTypeProposal,
		Proposal:    p,
	}
	ac, err := signFramedContent(g.s, g.sigPriv, WireFormatPublicMessage, fc, g.cur.ctx)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := g.cur.prot.protectPublic(ac)
	if err != nil {
		t.Fatal(err)
	}
	return marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage, PublicMessage: pm})
}

// TestRejectLowOrderKeyPackageKeys: a KeyPackage whose leaf encryption key
// or init key is a low-order X25519 point is refused by the member adding
// it and by a member receiving it in a proposal. Before, such a leaf was
// added, and every later commit of every member failed on it.
func TestRejectLowOrderKeyPackageKeys(t *testing.T) {
	for _, which := range []string{"encryption_key", "init_key"} {
		t.Run(which, func(t *testing.T) {
			_, alice, bob := twoMembers(t, &Config{PublicHandshake: true})
			b := newTestBundle(t, "did:key:mallory")
			if which == "init_key" {
				b.kp.InitKey = bytes.Clone(lowOrderX25519)
			} else {
				b.kp.LeafNode.EncryptionKey = bytes.Clone(lowOrderX25519)
			}
			resignBundle(t, b)
			if _, err := alice.AddMembers(b.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
				t.Fatalf("AddMembers: %v, want ErrInvalidLeafNode", err)
			}
			if _, err := alice.ProposeAdd(b.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
				t.Fatalf("ProposeAdd: %v, want ErrInvalidLeafNode", err)
			}
			msg := signedProposal(t, alice, &Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: b.kp}})
			before := fingerprint(t, bob)
			if _, err := bob.Process(msg); !errors.Is(err, ErrInvalidLeafNode) {
				t.Fatalf("Process of the Add: %v, want ErrInvalidLeafNode", err)
			}
			expectUnchanged(t, bob, before)
			// The group goes on.
			res, err := bob.SelfUpdate()
			if err != nil {
				t.Fatal(err)
			}
			if err := bob.ConfirmCommit(); err != nil {
				t.Fatal(err)
			}
			if _, err := alice.Process(res.Commit); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRejectOffCurveKeys: on a P-256 suite, a KeyPackage whose encryption
// key or signature key is not a point on the curve is refused.
func TestRejectOffCurveKeys(t *testing.T) {
	const cs = MLS_128_DHKEMP256_AES128GCM_SHA256_P256
	sk, err := GenerateSignatureKey(cs)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := NewKeyPackage(cs, "did:key:alice", sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroup([]byte("p256"), owner, nil)
	if err != nil {
		t.Fatal(err)
	}
	offCurve := func(p []byte) []byte {
		q := bytes.Clone(p)
		q[len(q)-1] ^= 1 // y no longer matches x
		return q
	}
	sk2, _ := GenerateSignatureKey(cs)
	b, err := NewKeyPackage(cs, "did:key:mallory", sk2, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.kp.LeafNode.EncryptionKey = offCurve(b.kp.LeafNode.EncryptionKey)
	resignBundle(t, b)
	if _, err := g.AddMembers(b.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
		t.Fatalf("off-curve encryption key: %v, want ErrInvalidLeafNode", err)
	}
	if err := suiteP256AES128.checkSignaturePublicKey(offCurve(b.kp.LeafNode.SignatureKey)); err == nil {
		t.Fatal("off-curve signature key accepted")
	}
	if err := suiteP256AES128.checkSignaturePublicKey(b.kp.LeafNode.SignatureKey); err != nil {
		t.Fatal(err)
	}
	if err := suiteX25519AES128.checkSignaturePublicKey(make([]byte, 31)); err == nil {
		t.Fatal("31-byte Ed25519 key accepted")
	}
	if err := suiteX25519AES128.checkHPKEPublicKey(make([]byte, 33)); err == nil {
		t.Fatal("33-byte X25519 key accepted")
	}
}

// TestRejectDuplicateExtensionTypes: Section 13.4, "Any field containing
// a list of extensions MUST NOT have more than one extension of any given
// type", for KeyPackages, LeafNodes and GroupInfos.
func TestRejectDuplicateExtensionTypes(t *testing.T) {
	const grease = 0x0a0a
	dup := []Extension{{ExtensionType: grease, ExtensionData: []byte{1}}, {ExtensionType: grease, ExtensionData: []byte{2}}}

	t.Run("KeyPackage", func(t *testing.T) {
		_, alice, _ := twoMembers(t, nil)
		b := newTestBundle(t, "did:key:mallory")
		b.kp.Extensions = dup
		resignBundle(t, b)
		if _, err := alice.AddMembers(b.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
			t.Fatalf("AddMembers: %v, want ErrInvalidLeafNode", err)
		}
	})
	t.Run("LeafNode", func(t *testing.T) {
		_, alice, _ := twoMembers(t, nil)
		b := newTestBundle(t, "did:key:mallory")
		b.kp.LeafNode.Extensions = dup
		b.kp.LeafNode.Capabilities.Extensions = []ExtensionType{grease}
		resignBundle(t, b)
		if _, err := alice.AddMembers(b.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
			t.Fatalf("AddMembers: %v, want ErrInvalidLeafNode", err)
		}
	})
	t.Run("GroupInfo", func(t *testing.T) {
		tg, alice, _ := twoMembers(t, nil)
		gi, err := alice.GroupInfo()
		if err != nil {
			t.Fatal(err)
		}
		var m mlsMessage
		if err := unmarshal(gi, &m); err != nil {
			t.Fatal(err)
		}
		m.GroupInfo.Extensions = append(m.GroupInfo.Extensions, dup...)
		if err := m.GroupInfo.sign(alice.s, alice.sigPriv); err != nil {
			t.Fatal(err)
		}
		if _, _, err := JoinExternal(marshal(&m), newTestBundle(t, "did:key:dave"), nil, tg.cfg); !errors.Is(err, ErrInvalidWelcome) {
			t.Fatalf("JoinExternal: %v, want ErrInvalidWelcome", err)
		}
	})
}

// TestRejectLowOrderTreeKeys covers the other places a received HPKE key
// enters: the public keys of an UpdatePath, the parent nodes of a ratchet
// tree from a Welcome, the external_pub of a GroupInfo and the kem_output
// of an ExternalInit.
func TestRejectLowOrderTreeKeys(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	tg.add("did:key:alice", "did:key:carol")
	s := alice.s

	newPath := func(t *testing.T) *updatePath {
		tree := alice.cur.tree.clone()
		res, err := tree.generateUpdatePath(alice.priv, nil, alice.sigPriv, alice.cur.ctx.GroupID, nil, func(treeHash []byte) ([]byte, error) {
			return marshal(alice.cur.ctx), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.path
	}
	t.Run("UpdatePath node", func(t *testing.T) {
		path := newPath(t)
		if err := bob.cur.tree.clone().mergeUpdatePath(alice.own, path); err != nil {
			t.Fatalf("genuine path: %v", err)
		}
		path.Nodes[0].EncryptionKey = bytes.Clone(lowOrderX25519)
		if err := bob.cur.tree.clone().mergeUpdatePath(alice.own, path); err == nil {
			t.Fatal("update path with a low-order node key merged")
		}
	})
	t.Run("UpdatePath kem_output", func(t *testing.T) {
		path := newPath(t)
		path.Nodes[0].EncryptedPathSecret[0].KEMOutput = bytes.Clone(lowOrderX25519)
		if err := bob.cur.tree.clone().mergeUpdatePath(alice.own, path); err == nil {
			t.Fatal("update path with a low-order kem_output merged")
		}
	})
	t.Run("tree parent", func(t *testing.T) {
		tree := bob.cur.tree.clone()
		if err := tree.validateStructure(); err != nil {
			t.Fatal(err)
		}
		x := tree.rootIndex()
		if tree.node(x).Parent == nil {
			t.Fatal("root is blank")
		}
		pn := *tree.node(x).Parent
		pn.EncryptionKey = bytes.Clone(lowOrderX25519)
		tree.setNode(x, treeNode{Parent: &pn})
		if err := tree.validateStructure(); err == nil {
			t.Fatal("tree with a low-order parent key validated")
		}
	})
	t.Run("external_pub", func(t *testing.T) {
		if _, _, err := externalInitSender(s, lowOrderX25519); err == nil {
			t.Fatal("low-order external_pub accepted")
		}
	})
	t.Run("kem_output", func(t *testing.T) {
		priv, _, err := alice.keys.externalKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := externalInitReceiver(s, priv, lowOrderX25519); err == nil {
			t.Fatal("low-order kem_output accepted")
		}
	})
}

// TestRejectMalformedExternalSenderKey: an external_senders extension
// whose signature key is not a key of the suite is refused (Section
// 5.1.1), with or without a credential hook, and the group is unchanged.
func TestRejectMalformedExternalSenderKey(t *testing.T) {
	_, alice, _ := twoMembers(t, nil)
	for _, key := range [][]byte{nil, []byte("short"), make([]byte, 33)} {
		senders := marshal(&externalSenders{Senders: []ExternalSender{{SignatureKey: key,
			Credential: Credential{CredentialType: CredentialTypeBasic, Identity: []byte("did:web:server")}}}})
		before, err := alice.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		_, err = alice.Commit(CommitOptions{Extensions: []Extension{{ExtensionType: ExtensionTypeExternalSenders, ExtensionData: senders}}})
		if !errors.Is(err, ErrInvalidProposal) {
			t.Fatalf("external sender key of %d bytes: %v", len(key), err)
		}
		after, _ := alice.MarshalBinary()
		if !bytes.Equal(before, after) {
			t.Fatalf("external sender key of %d bytes changed the group", len(key))
		}
	}
}
