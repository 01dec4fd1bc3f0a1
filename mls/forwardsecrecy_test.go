package mls

import (
	"bytes"
	"errors"
	"testing"
)

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestPastEpochKeepsOnlyApplicationKeys: an epoch kept for late
// application messages holds no handshake ratchet and no retained
// handshake key (Sections 9.2 and 15.3), in memory or in the saved state,
// and still reads late application messages.
func TestPastEpochKeepsOnlyApplicationKeys(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	late, err := alice.Protect([]byte("late"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two proposals of alice, of which bob reads the second: he keeps
	// the handshake key of the first for later.
	if _, err := alice.ProposeUpdate(); err != nil {
		t.Fatal(err)
	}
	p2, err := alice.ProposeUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(p2); err != nil {
		t.Fatal(err)
	}
	hs := &bob.cur.prot.tree.leaves[alice.LeafIndex()].handshake
	if hs.secret == nil || len(hs.order) == 0 {
		t.Fatalf("setup: bob's handshake ratchet for alice has secret %v and %d retained keys", hs.secret != nil, len(hs.order))
	}
	secret := hs.secret
	retained := hs.skipped[hs.order[0]]
	wanted := [][]byte{bytes.Clone(secret), bytes.Clone(retained.key), bytes.Clone(retained.nonce)}

	alice.proposals = nil
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	bob.proposals = nil
	tg.fanOut("did:key:alice", res)

	past := bob.past[len(bob.past)-1].prot.tree
	if lr := past.leaves[alice.LeafIndex()]; lr == nil || lr.handshake.secret != nil || len(lr.handshake.order) != 0 {
		t.Fatal("the past epoch kept alice's handshake ratchet")
	}
	for i, b := range [][]byte{secret, retained.key, retained.nonce} {
		if !allZero(b) {
			t.Errorf("handshake secret %d of the past epoch not wiped", i)
		}
	}
	st := fingerprint(t, bob)
	for i, w := range wanted {
		if bytes.Contains(st, w) {
			t.Errorf("handshake secret %d of the past epoch is in the saved state", i)
		}
	}
	// A leaf reached only now in the past epoch gets no handshake
	// ratchet either.
	if _, _, err := past.receiveKey(bob.LeafIndex(), handshakeRatchet, 0); !errors.Is(err, errHandshakeDeleted) {
		t.Fatalf("handshake lookup in a past epoch: %v", err)
	}
	bob2, err := RestoreGroup(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Group{bob, bob2} {
		if rec, err := g.Process(late); err != nil || string(rec.Data) != "late" {
			t.Fatalf("late message: %v %v", rec, err)
		}
	}
}

// TestDroppedRatchetKeysWiped: keys of skipped generations beyond the
// retention cap, and everything a lookup derived for a message that then
// failed, are zeroed (Section 9.2).
func TestDroppedRatchetKeysWiped(t *testing.T) {
	tree := testSecretTree(t, 4, secretTreeLimits{MaxRetainedKeys: 2})
	// A first message from leaf 1 at generation 5: generations 0-4 are
	// skipped, of which the last two are retained.
	_, pending, err := tree.receiveKey(1, applicationRatchet, 5)
	if err != nil {
		t.Fatal(err)
	}
	skip := pending.step.skip
	pending.commit()
	for i, k := range skip {
		dropped := allZero(k.key) && allZero(k.nonce)
		if want := i < 3; dropped != want {
			t.Errorf("skipped generation %d: wiped %v, want %v", i, dropped, want)
		}
	}

	// A failed message from leaf 2, reached for the first time: the
	// lookup changes nothing, and discard wipes all it derived.
	before := secretTreeBytes(tree)
	k, pending, err := tree.receiveKey(2, applicationRatchet, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := secretTreeBytes(tree); !bytes.Equal(got, before) {
		t.Fatal("a lookup changed the secret tree")
	}
	derived := [][]byte{k.key, k.nonce, pending.step.next, pending.leaf.lr.application.secret, pending.leaf.lr.handshake.secret}
	for _, sk := range pending.step.skip {
		derived = append(derived, sk.key, sk.nonce)
	}
	for _, n := range pending.leaf.siblings {
		derived = append(derived, n.secret)
	}
	pending.discard()
	for i, b := range derived {
		if !allZero(b) {
			t.Errorf("derived value %d not wiped by discard", i)
		}
	}
	if got := secretTreeBytes(tree); !bytes.Equal(got, before) {
		t.Fatal("discard changed the secret tree")
	}
}

func secretTreeBytes(t *secretTree) []byte {
	var b builder
	marshalSecretTree(&b, t)
	return b.bytes()
}

// TestFailedPrivateMessageLeavesStateIdentical: a PrivateMessage that fails
// authentication leaves the serialized state byte-identical, also when it
// names a sender whose ratchets this member never derived (before, the
// lazily derived ratchets of the secret tree stayed behind).
func TestFailedPrivateMessageLeavesStateIdentical(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	tg.add("did:key:alice", "did:key:carol")
	carol := tg.members["did:key:carol"]
	for _, ct := range []ContentType{ContentTypeApplication, ContentTypeProposal} {
		// bob forges a message in alice's name: he holds the keys of
		// every sender, but not alice's signature key.
		fc := &framedContent{
			GroupID:     bob.cur.ctx.GroupID,
			Epoch:       bob.cur.ctx.Epoch,
			Sender:      Sender{SenderType: SenderTypeMember, LeafIndex: alice.LeafIndex()},
			ContentType: ct,
		}
		if ct == ContentTypeApplication {
			fc.ApplicationData = []byte("forged")
		} else {
			fc.Proposal = &Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: carol.LeafIndex()}}
		}
		ac, err := signFramedContent(bob.s, bob.sigPriv, WireFormatPrivateMessage, fc, bob.cur.ctx)
		if err != nil {
			t.Fatal(err)
		}
		pm, err := bob.cur.prot.protectPrivate(ac)
		if err != nil {
			t.Fatal(err)
		}
		forged := marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm})
		if _, ok := carol.cur.prot.tree.leaves[alice.LeafIndex()]; ok && ct == ContentTypeApplication {
			t.Fatal("setup: carol already derived alice's ratchets")
		}
		before := fingerprint(t, carol)
		if _, err := carol.Process(forged); !errors.Is(err, ErrInvalidSignature) {
			t.Fatalf("%v: got %v, want ErrInvalidSignature", ct, err)
		}
		expectUnchanged(t, carol, before)

		// A corrupted ciphertext fails to decrypt, and changes nothing.
		pm.Ciphertext[len(pm.Ciphertext)-1] ^= 1
		corrupted := marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPrivateMessage, PrivateMessage: pm})
		if _, err := carol.Process(corrupted); err == nil {
			t.Fatal("corrupted message accepted")
		}
		expectUnchanged(t, carol, before)
	}
	expectGenuineRead(t, alice, carol)
}

// TestReplacedPrivateKeysWiped: the HPKE private keys of nodes that a
// commit blanks or re-keys are zeroed once the new epoch is in place, for
// a receiver, for the committer (ConfirmCommit), and for the new keys of
// a discarded commit.
func TestReplacedPrivateKeysWiped(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	tg.add("did:key:alice", "did:key:carol")
	held := func(g *Group) map[nodeIndex][]byte {
		m := make(map[nodeIndex][]byte)
		for x, k := range g.priv.keys {
			m[x] = k.priv
		}
		return m
	}
	expectWiped := func(who string, old map[nodeIndex][]byte, g *Group) {
		t.Helper()
		for x, priv := range old {
			if k, ok := g.priv.keys[x]; ok && bytes.Equal(k.priv, priv) {
				continue // still in use
			}
			if !allZero(priv) {
				t.Errorf("%s: replaced private key of node %d not wiped", who, x)
			}
		}
	}
	bobOld := held(bob)
	if len(bobOld) < 2 {
		t.Fatalf("setup: bob holds %d private keys", len(bobOld))
	}
	aliceOld := held(alice)
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	var fresh []nodeIndex
	pendingNew := held(&Group{priv: alice.pending.priv})
	for x, priv := range pendingNew {
		if !bytes.Equal(priv, aliceOld[x]) {
			fresh = append(fresh, x)
		}
	}
	if len(fresh) == 0 {
		t.Fatal("setup: the commit made no new keys")
	}
	alice.DiscardCommit()
	for _, x := range fresh {
		if !allZero(pendingNew[x]) {
			t.Errorf("discarded commit: new private key of node %d not wiped", x)
		}
	}
	for x, priv := range aliceOld {
		if allZero(priv) {
			t.Errorf("discarded commit wiped the current key of node %d", x)
		}
	}
	res, err = alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	expectWiped("committer", aliceOld, alice)
	expectWiped("receiver", bobOld, bob)
	tg.check()
}
