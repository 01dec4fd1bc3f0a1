package mls

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// These tests pin a fixed defect: two leaves could hold the same
// BasicCredential identity (duplicate Adds were caught only by signature
// key), and an Update or an UpdatePath could change a leaf's identity,
// after which SenderIdentity reported the spoofed one. One credential, one
// leaf, for life.

// leafWithIdentity returns a copy of g's own leaf naming identity, with a
// fresh encryption key, signed for source (update or commit) by g.
func leafWithIdentity(t *testing.T, g *Group, identity string, source LeafNodeSource) *LeafNode {
	t.Helper()
	ln := *g.cur.tree.leafNode(g.own)
	_, pub, err := g.s.hpkeGenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	ln.EncryptionKey = pub
	ln.LeafNodeSource = source
	ln.Lifetime = Lifetime{}
	ln.ParentHash = nil
	ln.Credential = Credential{CredentialType: CredentialTypeBasic, Identity: []byte(identity)}
	if err := ln.sign(g.s, g.sigPriv, g.cur.ctx.GroupID, uint32(g.own)); err != nil {
		t.Fatal(err)
	}
	return &ln
}

func TestDuplicateIdentityAddRefused(t *testing.T) {
	tg := threeMembers(t, nil)
	alice, carol := tg.members["did:key:alice"], tg.members["did:key:carol"]
	// A second leaf for bob, with another signature key.
	bob2 := newTestBundle(t, "did:key:bob")
	before := fingerprint(t, alice)
	_, err := alice.AddMembers(bob2.Bytes())
	if !errors.Is(err, ErrInvalidCredential) || !errors.Is(err, ErrInvalidProposal) {
		t.Fatalf("got %v, want ErrInvalidCredential", err)
	}
	expectUnchanged(t, alice, before)

	// Proposed by another member, it is left out of the next Commit.
	p, err := carol.ProposeAdd(bob2.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tg.deliver("did:key:carol", p)
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || !errors.Is(res.Dropped[0].Err, ErrInvalidCredential) || res.Welcome != nil {
		t.Fatalf("dropped %v", res.Dropped)
	}
	tg.fanOut("did:key:alice", res)
	tg.check()

	// Together with the Remove of the old leaf it is allowed: bob moves
	// to a new device.
	old, _ := alice.MemberByIdentity("did:key:bob")
	res, err = alice.Commit(CommitOptions{Remove: []uint32{old.LeafIndex}, Add: [][]byte{bob2.Bytes()}})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	g, err := Join(res.Welcome, bob2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:bob"] = g
	tg.check()
	if m, _ := alice.MemberByIdentity("did:key:bob"); !bytes.Equal(m.SignatureKey, g.cur.tree.leafNode(g.own).SignatureKey) {
		t.Fatal("bob's leaf is not the new one")
	}
}

func TestIdentityChangeViaUpdateRefused(t *testing.T) {
	tg := threeMembers(t, nil)
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	for _, spoof := range []string{"did:key:mallory", "did:key:carol"} {
		ln := leafWithIdentity(t, bob, spoof, LeafNodeSourceUpdate)
		msg := sendRaw(t, bob, &Proposal{ProposalType: ProposalTypeUpdate, Update: &Update{LeafNode: *ln}})
		for _, name := range []string{"did:key:alice", "did:key:carol"} {
			if _, err := tg.members[name].Process(msg); !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("%s: update to %s: got %v, want ErrInvalidCredential", name, spoof, err)
			}
		}
	}
	bob.ClearPendingProposals()
	tg.check() // SenderIdentity of bob's message is still bob
	if m, _ := alice.MemberByIdentity("did:key:bob"); m.LeafIndex != bob.LeafIndex() {
		t.Fatal("bob lost his leaf")
	}
}

func TestIdentityChangeViaUpdatePathRefused(t *testing.T) {
	tg := threeMembers(t, nil)
	bob := tg.members["did:key:bob"]
	for _, spoof := range []string{"did:key:mallory", "did:key:carol"} {
		res, err := bob.Commit(CommitOptions{testOnlyLeaf: leafWithIdentity(t, bob, spoof, LeafNodeSourceCommit)})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"did:key:alice", "did:key:carol"} {
			if _, err := tg.members[name].Process(res.Commit); !errors.Is(err, ErrInvalidCredential) {
				t.Fatalf("%s: commit as %s: got %v, want ErrInvalidCredential", name, spoof, err)
			}
		}
		bob.DiscardCommit()
	}
	// The others are still in step with each other; bob's next honest
	// Commit brings everyone to the next epoch, and his messages carry
	// his own identity.
	res, err := bob.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:bob", res)
	tg.check()
}

// TestSenderIdentityNotSpoofed follows an application message of bob
// after each attempt: its SenderIdentity is always bob's.
func TestSenderIdentityNotSpoofed(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	res, err := bob.Commit(CommitOptions{testOnlyLeaf: leafWithIdentity(t, bob, "did:key:alice", LeafNodeSourceCommit)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(res.Commit); err == nil {
		t.Fatal("alice accepted bob's commit as alice")
	}
	bob.DiscardCommit()
	msg, err := bob.Protect([]byte("who am I"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := alice.Process(msg)
	if err != nil {
		t.Fatal(err)
	}
	if rec.SenderIdentity != "did:key:bob" {
		t.Fatalf("SenderIdentity %q", rec.SenderIdentity)
	}
	tg.check()
}

// TestSuccessorCredential checks ValidateSuccessor: a change it allows is
// accepted by Update and UpdatePath, and still may not take another
// member's credential.
func TestSuccessorCredential(t *testing.T) {
	cfg := &Config{ValidateSuccessor: func(old, next Credential) error {
		if string(next.Identity) != string(old.Identity)+"/renewed" {
			return fmt.Errorf("%s is not a successor of %s", next.Identity, old.Identity)
		}
		return nil
	}}
	tg := threeMembers(t, cfg)
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	ln := leafWithIdentity(t, bob, "did:key:bob/renewed", LeafNodeSourceUpdate)
	msg := sendRaw(t, bob, &Proposal{ProposalType: ProposalTypeUpdate, Update: &Update{LeafNode: *ln}})
	tg.deliver("did:key:bob", msg)
	bob.ClearPendingProposals() // bob keeps no private key for this hand-made update
	res, err := alice.SelfUpdate()
	if err != nil || len(res.Dropped) != 0 {
		t.Fatal(err, res.Dropped)
	}
	// Bob cannot follow a commit of an update whose key he dropped; the
	// others agree, which is what this test is about.
	delete(tg.members, "did:key:bob")
	tg.fanOut("did:key:alice", res)
	if _, ok := alice.MemberByIdentity("did:key:bob/renewed"); !ok {
		t.Fatal("the successor credential is not in the tree")
	}

	carol := tg.members["did:key:carol"]
	res, err = carol.Commit(CommitOptions{testOnlyLeaf: leafWithIdentity(t, carol, "did:key:carol/renewed", LeafNodeSourceCommit)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(res.Commit); err != nil {
		t.Fatal(err)
	}
	carol.ConfirmCommit()
	if rec, _ := alice.Process(mustProtect(t, carol, "hi")); rec == nil || rec.SenderIdentity != "did:key:carol/renewed" {
		t.Fatalf("got %+v", rec)
	}

	// A "successor" that names another member is still refused.
	cfg.ValidateSuccessor = func(old, next Credential) error { return nil }
	res, err = carol.Commit(CommitOptions{testOnlyLeaf: leafWithIdentity(t, carol, "did:key:alice", LeafNodeSourceCommit)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(res.Commit); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("got %v, want ErrInvalidCredential", err)
	}
}

func mustProtect(t *testing.T, g *Group, s string) []byte {
	t.Helper()
	msg, err := g.Protect([]byte(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestValidateCredentialHook checks the Section 5.3.1 hook at each place a
// leaf enters: an Add's KeyPackage, an Update, a Welcome's tree and an
// external Commit. The Authentication Service here is a directory of
// identities and their signature keys.
func TestValidateCredentialHook(t *testing.T) {
	directory := map[string][]byte{}
	bundle := func(did string, register bool) *KeyPackageBundle {
		b := newTestBundle(t, did)
		if register {
			directory[did] = b.kp.LeafNode.SignatureKey
		}
		return b
	}
	var calls int
	cfg := &Config{
		ExternalPolicy: admitExternal,
		ValidateCredential: func(cred Credential, sk []byte) error {
			calls++
			if want, ok := directory[string(cred.Identity)]; !ok || !bytes.Equal(want, sk) {
				return fmt.Errorf("%s is not registered with this key", cred.Identity)
			}
			return nil
		},
	}
	alice := bundle("did:key:alice", true)
	g, err := NewGroup(bytes.Repeat([]byte{7}, 32), alice, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tg := &testGroup{t: t, members: map[string]*Group{"did:key:alice": g}, cfg: cfg}
	bob := bundle("did:key:bob", true)
	res, err := g.AddMembers(bob.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	bg, err := Join(res.Welcome, bob, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:bob"] = bg
	if calls == 0 {
		t.Fatal("the hook was not called")
	}

	// Add: mallory claims to be carol, who is not registered with her key.
	if _, err := g.AddMembers(bundle("did:key:carol", false).Bytes()); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("add: got %v, want ErrInvalidCredential", err)
	}
	// Welcome: a joiner whose directory does not know bob refuses the tree.
	carol := bundle("did:key:carol", true)
	res, err = g.AddMembers(carol.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	bobKey := directory["did:key:bob"]
	delete(directory, "did:key:bob")
	if _, err := Join(res.Welcome, carol, nil, cfg); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("join: got %v, want ErrInvalidCredential", err)
	}
	directory["did:key:bob"] = bobKey
	cg, err := Join(res.Welcome, carol, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:carol"] = cg
	tg.check()

	// Update: bob moves to a signature key the directory does not have.
	if _, err := bg.ProposeUpdate(); err != nil {
		t.Fatal(err)
	}
	bg.ClearPendingProposals()
	newPriv, err := GenerateSignatureKey(testSuite)
	if err != nil {
		t.Fatal(err)
	}
	ln := *bg.cur.tree.leafNode(bg.own)
	_, ln.EncryptionKey, _ = bg.s.hpkeGenerateKeyPair()
	ln.SignatureKey, _ = bg.s.signPublicFromPrivate(newPriv)
	ln.LeafNodeSource, ln.Lifetime, ln.ParentHash = LeafNodeSourceUpdate, Lifetime{}, nil
	if err := ln.sign(bg.s, newPriv, bg.cur.ctx.GroupID, uint32(bg.own)); err != nil {
		t.Fatal(err)
	}
	msg := sendRaw(t, bg, &Proposal{ProposalType: ProposalTypeUpdate, Update: &Update{LeafNode: ln}})
	if _, err := g.Process(msg); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("update: got %v, want ErrInvalidCredential", err)
	}
	bg.ClearPendingProposals()

	// External Commit: an unregistered joiner is refused by every member,
	// even though the policy admits external joins.
	gi, err := g.GroupInfo()
	if err != nil {
		t.Fatal(err)
	}
	_, commit, err := JoinExternal(gi, bundle("did:key:dave", false), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range tg.members {
		if _, err := m.Process(commit); !errors.Is(err, ErrInvalidCredential) {
			t.Fatalf("%s: external commit: got %v, want ErrInvalidCredential", name, err)
		}
	}
	tg.check()
}

// TestExternalJoinDuplicateIdentityRefused: an external Commit that does
// not replace the leaf of the identity it claims would give it two leaves.
func TestExternalJoinDuplicateIdentityRefused(t *testing.T) {
	tg, alice, _ := twoMembers(t, &Config{ExternalPolicy: admitExternal})
	gi, err := alice.GroupInfo()
	if err != nil {
		t.Fatal(err)
	}
	noResync := func(*ratchetTree, *LeafNode) (leafIndex, bool) { return 0, false }
	_, commit, err := joinExternal(gi, newTestBundle(t, "did:key:bob"), nil, nil, noResync, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range tg.members {
		before := fingerprint(t, m)
		if _, err := m.Process(commit); !errors.Is(err, ErrInvalidCredential) {
			t.Fatalf("%s: got %v, want ErrInvalidCredential", name, err)
		}
		expectUnchanged(t, m, before)
	}
}

// TestWelcomeWithDuplicateIdentityRefused: a committer that skips the
// checks can build a tree where two leaves hold one identity; the members
// refuse its Commit and the joiner its Welcome.
func TestWelcomeWithDuplicateIdentityRefused(t *testing.T) {
	_, alice, bob := twoMembers(t, nil)
	bob2 := newTestBundle(t, "did:key:bob")
	committer := Sender{SenderType: SenderTypeMember, LeafIndex: alice.LeafIndex()}
	props := []committedProposal{{proposal: Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: bob2.kp}}, sender: committer}}
	res, err := alice.createCommit(props, &CommitOptions{}, WireFormatPublicMessage)
	if err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, bob)
	if _, err := bob.Process(res.Commit); !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("bob: got %v, want ErrInvalidCredential", err)
	}
	expectUnchanged(t, bob, before)
	if _, err := Join(res.Welcome, bob2, nil, nil); !errors.Is(err, ErrInvalidWelcome) || !errors.Is(err, ErrInvalidCredential) {
		t.Fatalf("join: got %v, want ErrInvalidWelcome and ErrInvalidCredential", err)
	}
}

// TestSuccessorUpdateTakesOtherCredential checks that an Update whose new
// credential ValidateSuccessor allows is still refused when another member
// holds that credential, and that the refusal changes nothing (the
// handshake is public, so no ratchet key is consumed either).
func TestSuccessorUpdateTakesOtherCredential(t *testing.T) {
	tg := threeMembers(t, &Config{PublicHandshake: true, ValidateSuccessor: func(old, next Credential) error { return nil }})
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	ln := leafWithIdentity(t, bob, "did:key:carol", LeafNodeSourceUpdate)
	msg := sendRaw(t, bob, &Proposal{ProposalType: ProposalTypeUpdate, Update: &Update{LeafNode: *ln}})
	before := fingerprint(t, alice)
	if _, err := alice.Process(msg); !errors.Is(err, ErrInvalidCredential) || !errors.Is(err, ErrInvalidLeafNode) {
		t.Fatalf("got %v, want ErrInvalidCredential", err)
	}
	expectUnchanged(t, alice, before)
	bob.ClearPendingProposals()
	tg.check()
}
