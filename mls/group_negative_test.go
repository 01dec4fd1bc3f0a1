package mls

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// fingerprint summarizes the state that a rejected message must not
// change.
func fingerprint(t *testing.T, g *Group) []byte {
	t.Helper()
	st, err := g.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func expectUnchanged(t *testing.T, g *Group, before []byte) {
	t.Helper()
	if after := fingerprint(t, g); !bytes.Equal(before, after) {
		t.Fatal("group state changed by a rejected message")
	}
}

// expectGenuineRead checks that, after rejecting forged messages, to
// still reads a genuine application message of from.
func expectGenuineRead(t *testing.T, from, to *Group) {
	t.Helper()
	msg, err := from.Protect([]byte("genuine"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := to.Process(msg); err != nil || string(rec.Data) != "genuine" {
		t.Fatalf("genuine message after a forgery: %v %v", rec, err)
	}
}

// twoMembers returns a group of alice and bob sending public handshakes,
// so that tests can tamper with commits.
func twoMembers(t *testing.T, cfg *Config) (*testGroup, *Group, *Group) {
	tg := newTestGroup(t, "did:key:alice", cfg)
	tg.add("did:key:alice", "did:key:bob")
	return tg, tg.members["did:key:alice"], tg.members["did:key:bob"]
}

// resealPublic re-encodes a PublicMessage after f changed it, with a fresh
// membership tag from the epoch keys of g (as an insider could).
func resealPublic(t *testing.T, g *Group, msg []byte, f func(pm *publicMessage)) []byte {
	t.Helper()
	var m mlsMessage
	if err := unmarshal(msg, &m); err != nil || m.PublicMessage == nil {
		t.Fatalf("not a public message: %v", err)
	}
	f(m.PublicMessage)
	tag, err := g.cur.prot.membershipTag(&m.PublicMessage.Content, &m.PublicMessage.Auth)
	if err != nil {
		t.Fatal(err)
	}
	m.PublicMessage.MembershipTag = tag
	return marshal(&m)
}

func TestRejectCommitFromNonMember(t *testing.T) {
	_, alice, bob := twoMembers(t, &Config{PublicHandshake: true})
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	outsider, _ := GenerateSignatureKey(testSuite)
	forged := resealPublic(t, bob, res.Commit, func(pm *publicMessage) {
		ac, err := signFramedContent(bob.s, outsider, WireFormatPublicMessage, &pm.Content, bob.cur.ctx)
		if err != nil {
			t.Fatal(err)
		}
		pm.Auth.Signature = ac.Auth.Signature
	})
	before := fingerprint(t, bob)
	if _, err := bob.Process(forged); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("got %v, want ErrInvalidSignature", err)
	}
	expectUnchanged(t, bob, before)

	// A sender index that names no member.
	forged = resealPublic(t, bob, res.Commit, func(pm *publicMessage) { pm.Content.Sender.LeafIndex = 5 })
	if _, err := bob.Process(forged); !errors.Is(err, ErrUnknownSender) {
		t.Fatalf("got %v, want ErrUnknownSender", err)
	}
	expectUnchanged(t, bob, before)

	// Without the membership key an outsider cannot even get that far.
	var m mlsMessage
	_ = unmarshal(res.Commit, &m)
	m.PublicMessage.MembershipTag[0] ^= 1
	if _, err := bob.Process(marshal(&m)); !errors.Is(err, ErrInvalidMembershipTag) {
		t.Fatalf("got %v, want ErrInvalidMembershipTag", err)
	}
	expectUnchanged(t, bob, before)

	// The genuine commit still applies.
	if err := alice.ConfirmCommit(); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(res.Commit); err != nil {
		t.Fatal(err)
	}
}

func TestRejectWrongConfirmationTag(t *testing.T) {
	_, alice, bob := twoMembers(t, &Config{PublicHandshake: true})
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	forged := resealPublic(t, bob, res.Commit, func(pm *publicMessage) { pm.Auth.ConfirmationTag[3] ^= 0x40 })
	before := fingerprint(t, bob)
	if _, err := bob.Process(forged); !errors.Is(err, ErrInvalidConfirmationTag) {
		t.Fatalf("got %v, want ErrInvalidConfirmationTag", err)
	}
	expectUnchanged(t, bob, before)
}

func TestRejectInvalidProposalList(t *testing.T) {
	tg, alice, _ := twoMembers(t, &Config{PublicHandshake: true})
	tg.add("did:key:alice", "did:key:carol")
	bob := tg.members["did:key:bob"]
	carol, _ := alice.MemberByIdentity("did:key:carol")
	// The committer refuses to build it...
	if _, err := alice.RemoveMembers(carol.LeafIndex, carol.LeafIndex); !errors.Is(err, ErrInvalidProposal) {
		t.Fatalf("got %v, want ErrInvalidProposal", err)
	}
	// ...and a receiver rejects one built by hand: two removes of the same
	// leaf, and a remove of the committer.
	for _, props := range [][]proposalOrRef{
		{removeRef(carol.LeafIndex), removeRef(carol.LeafIndex)},
		{removeRef(alice.LeafIndex())},
	} {
		fc := &framedContent{
			GroupID:     alice.cur.ctx.GroupID,
			Epoch:       alice.cur.ctx.Epoch,
			Sender:      Sender{SenderType: SenderTypeMember, LeafIndex: alice.LeafIndex()},
			ContentType: ContentTypeCommit,
			Commit:      &commitContent{Proposals: props},
		}
		ac, err := signFramedContent(alice.s, alice.sigPriv, WireFormatPublicMessage, fc, alice.cur.ctx)
		if err != nil {
			t.Fatal(err)
		}
		ac.Auth.ConfirmationTag = make([]byte, 32)
		msg, err := alice.encodeContent(ac)
		if err != nil {
			t.Fatal(err)
		}
		before := fingerprint(t, bob)
		if _, err := bob.Process(msg); !errors.Is(err, ErrInvalidProposal) {
			t.Fatalf("got %v, want ErrInvalidProposal", err)
		}
		expectUnchanged(t, bob, before)
	}
}

func removeRef(l uint32) proposalOrRef {
	return proposalOrRef{Type: porProposal, Proposal: Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: l}}}
}

func TestRejectWelcomeForSomeoneElse(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", nil)
	bob := newTestBundle(t, "did:key:bob")
	res, err := tg.members["did:key:alice"].AddMembers(bob.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	eve := newTestBundle(t, "did:key:eve")
	if _, err := Join(res.Welcome, eve, nil, nil); !errors.Is(err, ErrNotForUs) {
		t.Fatalf("got %v, want ErrNotForUs", err)
	}
	if _, err := Join(res.Welcome, bob, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRejectReplay(t *testing.T) {
	_, alice, bob := twoMembers(t, nil)
	msg, err := alice.Protect([]byte("once"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(msg); err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, bob)
	if _, err := bob.Process(msg); !errors.Is(err, ErrReplay) {
		t.Fatalf("got %v, want ErrReplay", err)
	}
	expectUnchanged(t, bob, before)
}

func TestLateMessagesWindow(t *testing.T) {
	tg, alice, bob := twoMembers(t, &Config{MaxPastEpochs: 1})
	// Out of order within an epoch.
	m1, _ := alice.Protect([]byte("1"), nil)
	m2, _ := alice.Protect([]byte("2"), nil)
	if rec, err := bob.Process(m2); err != nil || string(rec.Data) != "2" {
		t.Fatal(rec, err)
	}
	old, _ := alice.Protect([]byte("old"), nil)
	older, _ := alice.Protect([]byte("older"), nil)
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	// One epoch back is inside the window.
	if rec, err := bob.Process(m1); err != nil || string(rec.Data) != "1" {
		t.Fatal(rec, err)
	}
	if rec, err := bob.Process(old); err != nil || string(rec.Data) != "old" {
		t.Fatal(rec, err)
	}
	res, err = alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	// Two epochs back is outside it.
	before := fingerprint(t, bob)
	if _, err := bob.Process(older); !errors.Is(err, ErrWrongEpoch) {
		t.Fatalf("got %v, want ErrWrongEpoch", err)
	}
	expectUnchanged(t, bob, before)
}

func TestRejectGarbage(t *testing.T) {
	_, _, bob := twoMembers(t, nil)
	before := fingerprint(t, bob)
	for _, b := range [][]byte{nil, {0}, {0, 1, 0, 2}, bytes.Repeat([]byte{0xff}, 100)} {
		if _, err := bob.Process(b); err == nil {
			t.Fatalf("accepted %x", b)
		}
	}
	expectUnchanged(t, bob, before)
}

func TestLateMessageAfterRestore(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	tg.add("did:key:alice", "did:key:carol")
	late, err := tg.members["did:key:carol"].Protect([]byte("late"), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := alice.RemoveMembers(2)
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	// Bob restarts, then reads carol's message from the epoch before her
	// removal.
	st, err := bob.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	bob2, err := RestoreGroup(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := bob2.Process(late)
	if err != nil {
		t.Fatal(err)
	}
	if string(rec.Data) != "late" || rec.SenderIdentity != "did:key:carol" {
		t.Fatalf("got %+v", rec)
	}
	if _, err := bob2.Process(late); !errors.Is(err, ErrReplay) {
		t.Fatalf("got %v, want ErrReplay", err)
	}
	st2, _ := bob2.MarshalBinary()
	if _, err := RestoreGroup(st2, nil); err != nil {
		t.Fatal(err)
	}
}

// TestPastEpochSecretsWiped checks that the secret tree of an epoch that
// leaves the window of past epochs is overwritten, not just dropped
// (Section 9.2): its node secrets, ratchet secrets and retained keys.
func TestPastEpochSecretsWiped(t *testing.T) {
	tg, alice, bob := twoMembers(t, &Config{MaxPastEpochs: 1})
	m1, _ := alice.Protect([]byte("1"), nil)
	m2, _ := alice.Protect([]byte("2"), nil)
	if _, err := bob.Process(m2); err != nil { // leaves generation 0 retained
		t.Fatal(err)
	}
	st := bob.cur.prot.tree
	var held [][]byte
	for _, s := range st.nodes {
		held = append(held, s)
	}
	for _, lr := range st.leaves {
		for _, r := range []*hashRatchet{&lr.handshake, &lr.application} {
			held = append(held, r.secret)
			for _, k := range r.skipped {
				held = append(held, k.key, k.nonce)
			}
		}
	}
	if len(held) < 4 {
		t.Fatalf("only %d secrets held; the test needs more", len(held))
	}
	for range 2 {
		res, err := alice.SelfUpdate()
		if err != nil {
			t.Fatal(err)
		}
		tg.fanOut("did:key:alice", res)
	}
	for i, s := range held {
		if len(s) > 0 && !bytes.Equal(s, make([]byte, len(s))) {
			t.Errorf("secret %d of an epoch outside the window was not wiped", i)
		}
	}
	if _, err := bob.Process(m1); !errors.Is(err, ErrWrongEpoch) {
		t.Fatalf("got %v, want ErrWrongEpoch", err)
	}
}

// TestStateHoldsNoDeletedSecrets checks that the serialized state leaves
// out what Section 9.2 says to delete: a consumed message key and nonce,
// and the secrets of an epoch the group has left.
func TestStateHoldsNoDeletedSecrets(t *testing.T) {
	tg, alice, bob := twoMembers(t, &Config{MaxPastEpochs: -1})
	msg, err := alice.Protect([]byte("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := bob.cur.prot.tree.receiveKey(alice.LeafIndex(), applicationRatchet, 0)
	if err != nil {
		t.Fatal(err)
	}
	key, nonce := bytes.Clone(k.key), bytes.Clone(k.nonce)
	if _, err := bob.Process(msg); err != nil {
		t.Fatal(err)
	}
	old := bob.keys
	oldSecrets := [][]byte{bytes.Clone(old.exporterSecret), bytes.Clone(old.initSecret),
		bytes.Clone(old.confirmationKey), bytes.Clone(old.membershipKey), bytes.Clone(old.senderDataSecret)}
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	st, err := bob.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range append([][]byte{key, nonce}, oldSecrets...) {
		if bytes.Contains(st, s) {
			t.Errorf("deleted secret %d is in the serialized state", i)
		}
	}
}

// TestRejectExternalCommitRemovingAnother checks Section 12.2: the Remove
// in an external Commit may only take out an old appearance of the
// joiner, never another member.
func TestRejectExternalCommitRemovingAnother(t *testing.T) {
	_, alice, bob := twoMembers(t, nil)
	gi, err := alice.GroupInfo()
	if err != nil {
		t.Fatal(err)
	}
	removeBob := func(*ratchetTree, *LeafNode) (leafIndex, bool) { return leafIndex(bob.LeafIndex()), true }
	_, commit, err := joinExternal(gi, newTestBundle(t, "did:key:mallory"), nil, nil, removeBob, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, alice)
	if _, err := alice.Process(commit); !errors.Is(err, ErrInvalidProposal) {
		t.Fatalf("got %v, want ErrInvalidProposal", err)
	}
	expectUnchanged(t, alice, before)
}

// TestProtectTooLong checks that a message no receiver would accept (every
// vector is capped at maxVectorLen) is refused with an error, not sent and
// not a panic.
func TestProtectTooLong(t *testing.T) {
	_, alice, _ := twoMembers(t, nil)
	if _, err := alice.Protect(make([]byte, maxVectorLen+1), nil); err == nil {
		t.Fatal("oversized application data accepted")
	}
	if _, err := alice.Protect(nil, make([]byte, maxVectorLen+1)); err == nil {
		t.Fatal("oversized authenticated data accepted")
	}
	pad := 0
	_, alice, _ = twoMembers(t, &Config{Padding: func(int) int { return pad }})
	pad = maxVectorLen
	if _, err := alice.Protect([]byte("x"), nil); err == nil {
		t.Fatal("padding past the receivers' limit accepted")
	}
	if _, err := alice.Protect([]byte("x"), nil); err == nil {
		t.Fatal("padding past the receivers' limit accepted on a second try")
	}
}

// TestForgedPrivateMessageBurnsNoKey checks that a member, who can derive
// every sender's message keys, cannot burn another sender's generation
// with a PrivateMessage it signed itself: the forgery is an
// ErrInvalidSignature, changes nothing, and the genuine message of that
// generation still decrypts.
func TestForgedPrivateMessageBurnsNoKey(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	tg.add("did:key:alice", "did:key:carol")
	carol := tg.members["did:key:carol"]
	// Everyone reads one message of alice first, so that her ratchets
	// exist and the generations line up.
	warm, err := alice.Protect([]byte("warm"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Group{bob, carol} {
		if _, err := m.Process(warm); err != nil {
			t.Fatal(err)
		}
	}
	fc := &framedContent{
		GroupID:         bob.cur.ctx.GroupID,
		Epoch:           bob.cur.ctx.Epoch,
		Sender:          Sender{SenderType: SenderTypeMember, LeafIndex: alice.LeafIndex()},
		ContentType:     ContentTypeApplication,
		ApplicationData: []byte("forged"),
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
	before := fingerprint(t, carol)
	if _, err := carol.Process(forged); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("got %v, want ErrInvalidSignature", err)
	}
	expectUnchanged(t, carol, before)
	expectGenuineRead(t, alice, carol)
}

// TestRejectOverlongLifetime checks the maximum total lifetime that
// Section 7.3 requires applications to set on KeyPackage leaves.
func TestRejectOverlongLifetime(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", nil)
	alice := tg.members["did:key:alice"]
	sk, err := GenerateSignatureKey(testSuite)
	if err != nil {
		t.Fatal(err)
	}
	long, err := NewKeyPackage(testSuite, "did:key:bob", sk, &Config{KeyPackageLifetime: 2 * 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, alice)
	if _, err := alice.AddMembers(long.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
		t.Fatalf("got %v, want ErrInvalidLeafNode", err)
	}
	expectUnchanged(t, alice, before)
	// A group that allows it accepts the same KeyPackage.
	g, err := NewGroup([]byte("g"), newTestBundle(t, "did:key:carol"), &Config{MaxLeafLifetime: 3 * 365 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.AddMembers(long.Bytes()); err != nil {
		t.Fatal(err)
	}
}
