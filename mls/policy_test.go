package mls

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// admitExternal is an ExternalPolicy that admits everything.
func admitExternal(ExternalRequest) error { return nil }

// strangerAdd returns the new_member_proposal Add (Section 12.1.8) with
// which the owner of b asks to join the group that sent appMsg. A
// stranger needs nothing but what every PrivateMessage shows in its
// header: the group id and the epoch.
func strangerAdd(t *testing.T, appMsg []byte, b *KeyPackageBundle) []byte {
	t.Helper()
	var m mlsMessage
	if err := unmarshal(appMsg, &m); err != nil || m.WireFormat != WireFormatPrivateMessage {
		t.Fatalf("not a private message: %v", err)
	}
	fc := &framedContent{
		GroupID:     m.PrivateMessage.GroupID,
		Epoch:       m.PrivateMessage.Epoch,
		Sender:      Sender{SenderType: SenderTypeNewMemberProposal},
		ContentType: ContentTypeProposal,
		Proposal:    &Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: b.kp}},
	}
	ac, err := signFramedContent(b.s, b.sigPriv, WireFormatPublicMessage, fc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage,
		PublicMessage: &publicMessage{Content: ac.Content, Auth: ac.Auth}})
}

// TestStrangerAddRefused: a stranger's new_member_proposal Add was once
// cached, and the next plain SelfUpdate of a member committed it. With no
// policy it is refused, changes nothing, and the next Commit adds nobody.
func TestStrangerAddRefused(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	hello, err := bob.Protect([]byte("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(hello); err != nil {
		t.Fatal(err)
	}
	mallory := newTestBundle(t, "did:key:mallory")
	prop := strangerAdd(t, hello, mallory)
	for name, m := range tg.members {
		before := fingerprint(t, m)
		if _, err := m.Process(prop); !errors.Is(err, ErrRefusedByPolicy) {
			t.Fatalf("%s: got %v, want ErrRefusedByPolicy", name, err)
		}
		expectUnchanged(t, m, before)
	}
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if res.Welcome != nil {
		t.Fatal("a self update welcomes someone")
	}
	tg.fanOut("did:key:alice", res)
	if _, ok := alice.MemberByIdentity("did:key:mallory"); ok {
		t.Fatal("the stranger is a member")
	}
	tg.check()
}

// TestExternalPolicyAdmits checks that a policy sees who asks to join and
// that what it admits is committed: an invited joiner's Add is cached and
// included in the next Commit, and the joiner can join from the Welcome.
func TestExternalPolicyAdmits(t *testing.T) {
	var asked []string
	cfg := &Config{ExternalPolicy: func(r ExternalRequest) error {
		if r.Sender.SenderType != SenderTypeNewMemberProposal || r.Joiner == nil {
			return errors.New("only add proposals")
		}
		asked = append(asked, r.Joiner.Identity)
		if !strings.HasPrefix(r.Joiner.Identity, "did:key:invited") {
			return errors.New("not invited")
		}
		return nil
	}}
	tg, alice, bob := twoMembers(t, cfg)
	hello, err := bob.Protect([]byte("hello"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(hello); err != nil {
		t.Fatal(err)
	}
	mallory := newTestBundle(t, "did:key:mallory")
	invited := newTestBundle(t, "did:key:invited-carol")
	for name, m := range tg.members {
		if _, err := m.Process(strangerAdd(t, hello, mallory)); !errors.Is(err, ErrRefusedByPolicy) || !strings.Contains(err.Error(), "not invited") {
			t.Fatalf("%s: got %v, want the policy's refusal", name, err)
		}
		rec, err := m.Process(strangerAdd(t, hello, invited))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if rec.Kind != KindProposal || len(rec.ProposalRef) == 0 {
			t.Fatalf("%s: got %+v", name, rec)
		}
	}
	if len(asked) != 4 {
		t.Fatalf("policy asked %d times: %v", len(asked), asked)
	}
	res, err := bob.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 0 || res.Welcome == nil {
		t.Fatalf("dropped %v, welcome %v", res.Dropped, res.Welcome != nil)
	}
	tg.fanOut("did:key:bob", res)
	g, err := Join(res.Welcome, invited, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:invited-carol"] = g
	tg.check()
}

// TestExternalCommitPolicy checks that an external Commit is refused
// without a policy, changing nothing, and that a policy sees the joiner
// and the member a resync replaces.
func TestExternalCommitPolicy(t *testing.T) {
	tg, alice, _ := twoMembers(t, nil)
	gi, err := alice.GroupInfo()
	if err != nil {
		t.Fatal(err)
	}
	_, commit, err := JoinExternal(gi, newTestBundle(t, "did:key:dave"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range tg.members {
		before := fingerprint(t, m)
		if _, err := m.Process(commit); !errors.Is(err, ErrRefusedByPolicy) {
			t.Fatalf("%s: got %v, want ErrRefusedByPolicy", name, err)
		}
		expectUnchanged(t, m, before)
	}
	tg.check()

	// A policy that admits joins but no resync.
	var seen []ExternalRequest
	cfg := &Config{ExternalPolicy: func(r ExternalRequest) error {
		seen = append(seen, r)
		if r.Replaces != nil {
			return errors.New("no resync")
		}
		return nil
	}}
	tg, alice, _ = twoMembers(t, cfg)
	gi, _ = alice.GroupInfo()
	dave, commit, err := JoinExternal(gi, newTestBundle(t, "did:key:dave"), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range tg.members {
		if _, err := m.Process(commit); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	tg.members["did:key:dave"] = dave
	tg.check()
	if len(seen) != 2 || seen[0].Sender.SenderType != SenderTypeNewMemberCommit || seen[0].Joiner.Identity != "did:key:dave" ||
		seen[0].Joiner.LeafIndex != dave.LeafIndex() || seen[0].Replaces != nil {
		t.Fatalf("policy saw %+v", seen)
	}
	gi, _ = alice.GroupInfo()
	_, commit, err = JoinExternal(gi, newTestBundle(t, "did:key:dave"), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, alice)
	if _, err := alice.Process(commit); !errors.Is(err, ErrRefusedByPolicy) {
		t.Fatalf("got %v, want ErrRefusedByPolicy", err)
	}
	expectUnchanged(t, alice, before)
	if r := seen[len(seen)-1]; r.Replaces == nil || r.Replaces.Identity != "did:key:dave" {
		t.Fatalf("policy saw %+v", r)
	}
}

// TestExternalSenderRefusedByDefault checks that a proposal signed by an
// entry of external_senders still needs the application's policy.
func TestExternalSenderRefusedByDefault(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	extPriv := listExternalSender(t, tg, alice)
	msg := externalProposal(t, alice, extPriv, &Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: bob.LeafIndex()}})
	before := fingerprint(t, alice)
	if _, err := alice.Process(msg); !errors.Is(err, ErrRefusedByPolicy) {
		t.Fatalf("got %v, want ErrRefusedByPolicy", err)
	}
	expectUnchanged(t, alice, before)
	tg.check()
}

// TestExternalCommitAuthenticatedData checks that the authenticated_data
// a joiner puts in its external Commit reaches every member's policy, which
// can admit by it, and that a Commit whose authenticated data was changed
// in transit fails its signature and changes nothing.
func TestExternalCommitAuthenticatedData(t *testing.T) {
	ticket := []byte("ticket 42")
	cfg := &Config{ExternalPolicy: func(r ExternalRequest) error {
		if r.Sender.SenderType != SenderTypeNewMemberCommit || !bytes.Equal(r.AuthenticatedData, ticket) {
			return errors.New("no ticket")
		}
		return nil
	}}
	tg, alice, _ := twoMembers(t, cfg)
	gi, err := alice.GroupInfo()
	if err != nil {
		t.Fatal(err)
	}
	_, bare, err := JoinExternalWith(gi, newTestBundle(t, "did:key:dave"), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	dave := newTestBundle(t, "did:key:dave")
	g, commit, err := JoinExternalWith(gi, dave, &ExternalJoinOptions{AuthenticatedData: ticket}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(bytes.Clone(commit), ticket, []byte("ticket 43"), 1)
	for name, m := range tg.members {
		before := fingerprint(t, m)
		if _, err := m.Process(bare); !errors.Is(err, ErrRefusedByPolicy) {
			t.Fatalf("%s: a join without the ticket: %v", name, err)
		}
		if _, err := m.Process(tampered); err == nil {
			t.Fatalf("%s: a tampered ticket was accepted", name)
		}
		expectUnchanged(t, m, before)
		if _, err := m.Process(commit); err != nil {
			t.Fatalf("%s: the ticketed join: %v", name, err)
		}
	}
	tg.members["did:key:dave"] = g
	tg.check()
}

// TestExternalCommitExtensions checks Config.ExternalCommitExtensions: an
// external Commit that also sets the GroupContext extensions is invalid
// for members that do not set it, and for those that do the policy sees
// the extensions the Commit leaves in effect, refuses or admits by them,
// and every member ends with the same extensions.
func TestExternalCommitExtensions(t *testing.T) {
	const appExt ExtensionType = 0xFF42
	bundle := func(did string, cfg *Config) *KeyPackageBundle {
		sk, err := GenerateSignatureKey(testSuite)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewKeyPackage(testSuite, did, sk, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var seen [][]Extension
	policy := func(r ExternalRequest) error {
		seen = append(seen, r.Extensions)
		if !bytes.Equal(findExt(r.Extensions, appExt), []byte("used 1")) {
			return errors.New("the use is not recorded")
		}
		return nil
	}
	for _, allow := range []bool{false, true} {
		seen = nil
		cfg := &Config{ExtensionTypes: []ExtensionType{appExt}, ExternalPolicy: policy, ExternalCommitExtensions: allow}
		alice, err := NewGroup(bytes.Repeat([]byte{7}, 32), bundle("did:key:alice", cfg), cfg)
		if err != nil {
			t.Fatal(err)
		}
		res, err := alice.Commit(CommitOptions{Extensions: []Extension{{ExtensionType: appExt, ExtensionData: []byte("used 0")}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := alice.ConfirmCommit(); err != nil {
			t.Fatal(err)
		}
		bobB := bundle("did:key:bob", cfg)
		res, err = alice.AddMembers(bobB.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if err := alice.ConfirmCommit(); err != nil {
			t.Fatal(err)
		}
		bob, err := Join(res.Welcome, bobB, nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		tg := &testGroup{t: t, members: map[string]*Group{"did:key:alice": alice, "did:key:bob": bob}, cfg: cfg, suite: testSuite}
		gi, err := alice.GroupInfo()
		if err != nil {
			t.Fatal(err)
		}
		_, unrecorded, err := JoinExternalWith(gi, bundle("did:key:dave", cfg), nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		recorded := []Extension{{ExtensionType: appExt, ExtensionData: []byte("used 1")}}
		dave, commit, err := JoinExternalWith(gi, bundle("did:key:dave", cfg), &ExternalJoinOptions{Extensions: func(cur []Extension) ([]Extension, error) {
			if string(findExt(cur, appExt)) != "used 0" {
				return nil, errors.New("the joiner sees other extensions")
			}
			return recorded, nil
		}}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for name, m := range tg.members {
			before := fingerprint(t, m)
			if _, err := m.Process(unrecorded); !errors.Is(err, ErrRefusedByPolicy) {
				t.Fatalf("allow=%v %s: a join that records nothing: %v", allow, name, err)
			}
			expectUnchanged(t, m, before)
			_, err := m.Process(commit)
			if !allow {
				if !errors.Is(err, ErrInvalidProposal) {
					t.Fatalf("%s: an external commit with extensions, not allowed: %v", name, err)
				}
				expectUnchanged(t, m, before)
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := findExt(m.Extensions(), appExt); string(got) != "used 1" {
				t.Fatalf("%s: extension %q after the join", name, got)
			}
		}
		if !allow {
			continue
		}
		tg.members["did:key:dave"] = dave
		tg.check()
		if len(seen) != 4 || findExt(seen[0], appExt) == nil {
			t.Fatalf("policy saw %v", seen)
		}
	}
}

func findExt(exts []Extension, t ExtensionType) []byte {
	for _, e := range exts {
		if e.ExtensionType == t {
			return e.ExtensionData
		}
	}
	return nil
}
