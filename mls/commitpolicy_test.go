package mls

import (
	"errors"
	"testing"
)

// protectLeafZero is a CommitPolicy under which nobody removes the member
// at leaf 0 but that member itself.
func protectLeafZero(c CommitCheck) error {
	for _, p := range c.Proposals {
		if p.Type != ProposalTypeRemove || p.Removed == nil || p.Removed.LeafIndex != 0 {
			continue
		}
		if p.SenderMember == nil || p.SenderMember.LeafIndex != 0 {
			return errors.New("only leaf 0 removes leaf 0")
		}
	}
	return nil
}

func threeWithCommitPolicy(t *testing.T) (*testGroup, *Group, *Group, *Group) {
	t.Helper()
	cfg := &Config{PublicHandshake: true, CommitPolicy: protectLeafZero}
	tg := newTestGroup(t, "did:key:alice", cfg)
	tg.add("did:key:alice", "did:key:bob")
	tg.add("did:key:alice", "did:key:carol")
	return tg, tg.members["did:key:alice"], tg.members["did:key:bob"], tg.members["did:key:carol"]
}

// TestCommitPolicyRefusesOwnCommit checks that a member's own Commit that
// the policy refuses fails, with nothing changed.
func TestCommitPolicyRefusesOwnCommit(t *testing.T) {
	tg, alice, bob, _ := threeWithCommitPolicy(t)
	before := fingerprint(t, bob)
	if _, err := bob.RemoveMembers(0); !errors.Is(err, ErrRefusedByPolicy) {
		t.Fatalf("got %v, want ErrRefusedByPolicy", err)
	}
	expectUnchanged(t, bob, before)
	if bob.HasPendingCommit() {
		t.Fatal("a refused commit is pending")
	}
	// What the policy allows still goes through.
	res, err := alice.RemoveMembers(2)
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	tg.check()
}

// TestCommitPolicyEveryReceiverRefuses checks that a Commit built by a
// member whose engine has no policy is refused by every member that has
// one, and changes nothing there.
func TestCommitPolicyEveryReceiverRefuses(t *testing.T) {
	tg, alice, bob, carol := threeWithCommitPolicy(t)
	bob.cfg.CommitPolicy = nil // a hostile member's engine
	res, err := bob.RemoveMembers(0)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*Group{"alice": alice, "carol": carol} {
		before := fingerprint(t, m)
		if _, err := m.Process(res.Commit); !errors.Is(err, ErrRefusedByPolicy) {
			t.Fatalf("%s: got %v, want ErrRefusedByPolicy", name, err)
		}
		expectUnchanged(t, m, before)
	}
	bob.DiscardCommit()
	tg.check()
}

// TestCommitPolicyRefusesProposal checks that a member's proposal that
// the policy refuses is refused when it is sent and when it is received,
// so it never waits in the cache.
func TestCommitPolicyRefusesProposal(t *testing.T) {
	_, alice, bob, carol := threeWithCommitPolicy(t)
	if _, err := bob.ProposeRemove(0); !errors.Is(err, ErrRefusedByPolicy) {
		t.Fatalf("got %v, want ErrRefusedByPolicy", err)
	}
	bob.cfg.CommitPolicy = nil // a hostile member's engine
	prop, err := bob.ProposeRemove(0)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]*Group{"alice": alice, "carol": carol} {
		before := fingerprint(t, m)
		if _, err := m.Process(prop); !errors.Is(err, ErrRefusedByPolicy) {
			t.Fatalf("%s: got %v, want ErrRefusedByPolicy", name, err)
		}
		expectUnchanged(t, m, before)
	}
}

// TestCommitPolicyDropsPendingProposal checks that a pending proposal the
// policy refuses is left out of a Commit rather than making it fail, and
// that a Commit including it by reference is refused by receivers.
func TestCommitPolicyDropsPendingProposal(t *testing.T) {
	tg, alice, bob, carol := threeWithCommitPolicy(t)
	bob.cfg.CommitPolicy = nil
	prop, err := bob.ProposeRemove(0)
	if err != nil {
		t.Fatal(err)
	}
	// The proposal is cached by engines without the policy (the policy
	// is put back afterwards, as after an upgrade).
	for _, m := range []*Group{alice, carol} {
		m.cfg.CommitPolicy = nil
		if _, err := m.Process(prop); err != nil {
			t.Fatal(err)
		}
	}
	alice.cfg.CommitPolicy = protectLeafZero
	// A hostile carol commits the proposal; alice refuses the Commit.
	bad, err := carol.SelfUpdate()
	if err != nil || len(bad.Dropped) != 0 {
		t.Fatalf("%v, dropped %v", err, bad.Dropped)
	}
	before := fingerprint(t, alice)
	if _, err := alice.Process(bad.Commit); !errors.Is(err, ErrRefusedByPolicy) {
		t.Fatalf("got %v, want ErrRefusedByPolicy", err)
	}
	expectUnchanged(t, alice, before)
	carol.DiscardCommit()
	carol.cfg.CommitPolicy = protectLeafZero
	// With the policy, carol's Commit leaves the proposal out.
	res, err := carol.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || !errors.Is(res.Dropped[0].Err, ErrRefusedByPolicy) {
		t.Fatalf("dropped %v", res.Dropped)
	}
	tg.fanOut("did:key:carol", res)
	tg.check()
}

// TestGroupWithApplicationExtension checks that a group can be created
// with an application GroupContext extension that its members list in
// their capabilities, that a joiner learns it from the Welcome, and that a
// KeyPackage that does not list it cannot be added (Section 12.1.1).
func TestGroupWithApplicationExtension(t *testing.T) {
	const appExt ExtensionType = 0xFF0A
	cfg := &Config{ExtensionTypes: []ExtensionType{appExt}}
	sk, err := GenerateSignatureKey(testSuite)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewKeyPackage(testSuite, "did:key:alice", sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	exts := []Extension{{ExtensionType: appExt, ExtensionData: []byte("roles")}}
	if _, err := NewGroupWithExtensions([]byte("g"), plain, exts, cfg); err == nil {
		t.Fatal("a creator that does not support the extension created the group")
	}
	b, err := NewKeyPackage(testSuite, "did:key:alice", sk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := NewGroupWithExtensions([]byte("g"), b, exts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.AddMembers(newTestBundle(t, "did:key:bob").Bytes()); !errors.Is(err, ErrInvalidLeafNode) && !errors.Is(err, ErrInvalidProposal) {
		t.Fatalf("got %v, want the add refused", err)
	}
	carolSK, _ := GenerateSignatureKey(testSuite)
	carol, err := NewKeyPackage(testSuite, "did:key:carol", carolSK, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := alice.AddMembers(carol.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.ConfirmCommit(); err != nil {
		t.Fatal(err)
	}
	g, err := Join(res.Welcome, carol, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := g.Extensions()
	if len(got) != 1 || got[0].ExtensionType != appExt || string(got[0].ExtensionData) != "roles" {
		t.Fatalf("joiner sees %v", got)
	}
	// A GroupContextExtensions commit that changes it.
	exts[0].ExtensionData = []byte("roles 2")
	res, err = alice.Commit(CommitOptions{Extensions: exts})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.ConfirmCommit(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Process(res.Commit); err != nil {
		t.Fatal(err)
	}
	if got := g.Extensions(); string(got[0].ExtensionData) != "roles 2" {
		t.Fatalf("joiner sees %v", got)
	}
}
