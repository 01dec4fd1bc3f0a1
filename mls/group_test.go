package mls

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

const testSuite = MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519

func newTestBundle(t testing.TB, did string) *KeyPackageBundle {
	t.Helper()
	return newSuiteBundle(t, testSuite, did)
}

func newSuiteBundle(t testing.TB, cs CipherSuite, did string) *KeyPackageBundle {
	t.Helper()
	sk, err := GenerateSignatureKey(cs)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewKeyPackage(cs, did, sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testGroup is a set of members of one group, driven in lock step as a
// Delivery Service would: a commit is confirmed by its sender and
// processed by everyone else.
type testGroup struct {
	t       testing.TB
	members map[string]*Group
	cfg     *Config
	suite   CipherSuite
}

func newTestGroup(t testing.TB, owner string, cfg *Config) *testGroup {
	t.Helper()
	return newSuiteTestGroup(t, testSuite, owner, cfg)
}

func newSuiteTestGroup(t testing.TB, cs CipherSuite, owner string, cfg *Config) *testGroup {
	t.Helper()
	g, err := NewGroup(bytes.Repeat([]byte{7}, 32), newSuiteBundle(t, cs, owner), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &testGroup{t: t, members: map[string]*Group{owner: g}, cfg: cfg, suite: cs}
}

// fanOut confirms res for committer and has every other member process it.
func (tg *testGroup) fanOut(committer string, res *CommitResult) {
	tg.t.Helper()
	if err := tg.members[committer].ConfirmCommit(); err != nil {
		tg.t.Fatal(err)
	}
	for name, m := range tg.members {
		if name == committer {
			continue
		}
		rec, err := m.Process(res.Commit)
		if err != nil {
			tg.t.Fatalf("%s processing commit of %s: %v", name, committer, err)
		}
		if rec.Kind != KindCommit {
			tg.t.Fatalf("kind %v", rec.Kind)
		}
		if rec.Removed {
			delete(tg.members, name)
		}
	}
}

func (tg *testGroup) add(committer, joiner string) {
	tg.t.Helper()
	b := newSuiteBundle(tg.t, tg.suite, joiner)
	res, err := tg.members[committer].AddMembers(b.Bytes())
	if err != nil {
		tg.t.Fatal(err)
	}
	tg.fanOut(committer, res)
	opts := &JoinOptions{}
	if tg.cfg != nil && tg.cfg.OutOfBandTree {
		opts.RatchetTree = tg.members[committer].RatchetTree()
	}
	g, err := Join(res.Welcome, b, opts, tg.cfg)
	if err != nil {
		tg.t.Fatalf("%s joining: %v", joiner, err)
	}
	tg.members[joiner] = g
}

func (tg *testGroup) check() {
	tg.t.Helper()
	var ref *Group
	var refName string
	for name, m := range tg.members {
		if ref == nil {
			ref, refName = m, name
			continue
		}
		if m.Epoch() != ref.Epoch() {
			tg.t.Fatalf("%s epoch %d, %s epoch %d", name, m.Epoch(), refName, ref.Epoch())
		}
		if !bytes.Equal(m.EpochAuthenticator(), ref.EpochAuthenticator()) {
			tg.t.Fatalf("%s and %s disagree on the epoch authenticator", name, refName)
		}
		e1, _ := m.Export("test", []byte("ctx"), 32)
		e2, _ := ref.Export("test", []byte("ctx"), 32)
		if !bytes.Equal(e1, e2) {
			tg.t.Fatalf("%s and %s disagree on the exporter", name, refName)
		}
		if len(m.Members()) != len(tg.members) {
			tg.t.Fatalf("%s sees %d members, want %d", name, len(m.Members()), len(tg.members))
		}
	}
	// Every member's message decrypts for every other member.
	for name, m := range tg.members {
		msg, err := m.Protect([]byte("hello from "+name), nil)
		if err != nil {
			tg.t.Fatal(err)
		}
		for other, o := range tg.members {
			if other == name {
				continue
			}
			rec, err := o.Process(msg)
			if err != nil {
				tg.t.Fatalf("%s reading %s: %v", other, name, err)
			}
			if rec.Kind != KindApplication || string(rec.Data) != "hello from "+name || rec.SenderIdentity != name {
				tg.t.Fatalf("%s got %+v", other, rec)
			}
		}
	}
}

func TestGroupTwoThree(t *testing.T) {
	for _, public := range []bool{false, true} {
		t.Run(fmt.Sprintf("public=%v", public), func(t *testing.T) {
			tg := newTestGroup(t, "did:key:alice", &Config{PublicHandshake: public})
			tg.check()
			tg.add("did:key:alice", "did:key:bob")
			tg.check()
			tg.add("did:key:bob", "did:key:carol")
			tg.check()
			res, err := tg.members["did:key:carol"].SelfUpdate()
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut("did:key:carol", res)
			tg.check()
			bob, _ := tg.members["did:key:alice"].MemberByIdentity("did:key:bob")
			res, err = tg.members["did:key:alice"].RemoveMembers(bob.LeafIndex)
			if err != nil {
				t.Fatal(err)
			}
			removed := tg.members["did:key:bob"]
			tg.fanOut("did:key:alice", res)
			if removed.Active() {
				t.Fatal("removed member still active")
			}
			tg.check()
			msg, _ := tg.members["did:key:alice"].Protect([]byte("secret"), nil)
			if _, err := removed.Process(msg); err == nil {
				t.Fatal("removed member read a new message")
			}
		})
	}
}

func TestPendingCommitDiscard(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", nil)
	tg.add("did:key:alice", "did:key:bob")
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	// Both commit in the same epoch; the relay accepts Bob's.
	if _, err := alice.SelfUpdate(); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Protect([]byte("x"), nil); !errors.Is(err, ErrPendingCommit) {
		t.Fatalf("got %v", err)
	}
	res, err := bob.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	alice.DiscardCommit()
	tg.fanOut("did:key:bob", res)
	tg.check()
}

func TestStateRoundTrip(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	tg.add("did:key:alice", "did:key:carol")
	// Leave some state behind: a skipped generation and a cached proposal.
	m1, _ := alice.Protect([]byte("1"), nil)
	m2, _ := alice.Protect([]byte("2"), nil)
	if _, err := bob.Process(m2); err != nil {
		t.Fatal(err)
	}
	prop, err := tg.members["did:key:carol"].ProposeUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(prop); err != nil {
		t.Fatal(err)
	}
	st, err := bob.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	bob2, err := RestoreGroup(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	st2, _ := bob2.MarshalBinary()
	if !bytes.Equal(st, st2) {
		t.Fatal("state does not re-encode identically")
	}
	tg.members["did:key:bob"] = bob2
	if rec, err := bob2.Process(m1); err != nil || string(rec.Data) != "1" {
		t.Fatal(rec, err)
	}
	if _, err := bob2.Process(m1); !errors.Is(err, ErrReplay) {
		t.Fatalf("consumed key survived a restore: %v", err)
	}
	if _, err := alice.Process(prop); err != nil {
		t.Fatal(err)
	}
	// A restored member can commit the cached proposal.
	res, err := bob2.Commit(CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:bob", res)
	tg.check()
	for _, bad := range [][]byte{nil, {9}, st[:len(st)-1], append(bytes.Clone(st), 0)} {
		if _, err := RestoreGroup(bad, nil); err == nil {
			t.Fatalf("restored from %d bad bytes", len(bad))
		}
	}
}

func TestExternalJoin(t *testing.T) {
	for _, oob := range []bool{false, true} {
		t.Run(fmt.Sprintf("oob=%v", oob), func(t *testing.T) {
			tg, alice, _ := twoMembers(t, &Config{OutOfBandTree: oob, ExternalPolicy: admitExternal})
			gi, err := alice.GroupInfo()
			if err != nil {
				t.Fatal(err)
			}
			var tree []byte
			if oob {
				tree = alice.RatchetTree()
			}
			dave := newTestBundle(t, "did:key:dave")
			g, commit, err := JoinExternal(gi, dave, tree, tg.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for name, m := range tg.members {
				rec, err := m.Process(commit)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if rec.SenderIdentity != "did:key:dave" {
					t.Fatalf("sender %q", rec.SenderIdentity)
				}
			}
			tg.members["did:key:dave"] = g
			tg.check()
			tg.add("did:key:dave", "did:key:erin")
			tg.check()

			// Resync: dave joins again externally, replacing his old leaf.
			gi, _ = alice.GroupInfo()
			g2, commit, err := JoinExternal(gi, newTestBundle(t, "did:key:dave"), alice.RatchetTree(), tg.cfg)
			if err != nil {
				t.Fatal(err)
			}
			delete(tg.members, "did:key:dave")
			for name, m := range tg.members {
				if _, err := m.Process(commit); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			tg.members["did:key:dave"] = g2
			tg.check()
		})
	}
}

func TestOutOfBandTreeJoin(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", &Config{OutOfBandTree: true})
	alice := tg.members["did:key:alice"]
	bob := newTestBundle(t, "did:key:bob")
	res, err := alice.AddMembers(bob.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.ConfirmCommit(); err != nil {
		t.Fatal(err)
	}
	if _, err := Join(res.Welcome, bob, nil, nil); !errors.Is(err, ErrInvalidWelcome) {
		t.Fatalf("joined without a tree: %v", err)
	}
	g, err := Join(res.Welcome, bob, &JoinOptions{RatchetTree: alice.RatchetTree()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:bob"] = g
	tg.check()
}

func TestCommitFiltersConflictingProposals(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", nil)
	for _, n := range []string{"did:key:bob", "did:key:carol", "did:key:dave"} {
		tg.add("did:key:alice", n)
	}
	dave, _ := tg.members["did:key:alice"].MemberByIdentity("did:key:dave")
	props := map[string][]byte{}
	for _, n := range []string{"did:key:bob", "did:key:carol"} {
		p, err := tg.members[n].ProposeRemove(dave.LeafIndex)
		if err != nil {
			t.Fatal(err)
		}
		props[n] = p
	}
	up, err := tg.members["did:key:dave"].ProposeUpdate()
	if err != nil {
		t.Fatal(err)
	}
	props["did:key:dave"] = up
	for name, m := range tg.members {
		for proposer, p := range props {
			if proposer == name {
				continue // senders cache their own proposals
			}
			if _, err := m.Process(p); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	res, err := tg.members["did:key:alice"].Commit(CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	if _, ok := tg.members["did:key:dave"]; ok {
		t.Fatal("dave not removed")
	}
	tg.check()
}

func TestPSKAndExtensions(t *testing.T) {
	cfg := &Config{ExternalPSKs: map[string][]byte{"psk-1": []byte("shared secret")}}
	tg, alice, _ := twoMembers(t, cfg)
	// An external PSK injected together with an Add: the joiner needs it
	// too.
	carol := newTestBundle(t, "did:key:carol")
	res, err := alice.Commit(CommitOptions{Add: [][]byte{carol.Bytes()}, ExternalPSKs: [][]byte{[]byte("psk-1")}})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	if _, err := Join(res.Welcome, carol, nil, nil); !errors.Is(err, ErrMissingPSK) {
		t.Fatalf("joined without the psk: %v", err)
	}
	g, err := Join(res.Welcome, carol, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:carol"] = g
	tg.check()
	// A PSK proposal by reference.
	prop, err := tg.members["did:key:bob"].ProposeExternalPSK([]byte("psk-1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"did:key:alice", "did:key:carol"} {
		if _, err := tg.members[n].Process(prop); err != nil {
			t.Fatal(err)
		}
	}
	res, err = tg.members["did:key:carol"].Commit(CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:carol", res)
	tg.check()
	// Required capabilities that every member meets, then one that the
	// members do not.
	rc := marshal(&requiredCapabilities{CredentialTypes: []CredentialType{CredentialTypeBasic}})
	res, err = alice.Commit(CommitOptions{Extensions: []Extension{{ExtensionType: ExtensionTypeRequiredCapabilities, ExtensionData: rc}}})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	tg.check()
	rc = marshal(&requiredCapabilities{CredentialTypes: []CredentialType{CredentialTypeX509}})
	if _, err := alice.Commit(CommitOptions{Extensions: []Extension{{ExtensionType: ExtensionTypeRequiredCapabilities, ExtensionData: rc}}}); !errors.Is(err, ErrInvalidProposal) {
		t.Fatalf("got %v, want ErrInvalidProposal", err)
	}
}

func TestBulkAdd(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", nil)
	var bundles []*KeyPackageBundle
	var kps [][]byte
	for i := range 40 {
		b := newTestBundle(t, fmt.Sprintf("did:key:bulk%d", i))
		bundles = append(bundles, b)
		kps = append(kps, b.Bytes())
	}
	res, err := tg.members["did:key:alice"].AddMembers(kps...)
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	for _, b := range bundles {
		g, err := Join(res.Welcome, b, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		tg.members[b.Identity()] = g
	}
	tg.check()
	// A bad signature anywhere in a bulk add rejects the whole commit.
	bad := newTestBundle(t, "did:key:bad")
	bad.kp.Signature[0] ^= 1
	if _, err := tg.members["did:key:alice"].AddMembers(append(kps[:0:0], newTestBundle(t, "did:key:x").Bytes(), bad.Bytes())...); !errors.Is(err, ErrInvalidLeafNode) {
		t.Fatalf("got %v", err)
	}
}

func TestPadding(t *testing.T) {
	// Pad every message to a multiple of 256 bytes, as a seat's buckets do.
	cfg := &Config{Padding: func(n int) int { return (256 - n%256) % 256 }}
	tg, alice, bob := twoMembers(t, cfg)
	var sizes []int
	for _, n := range []int{1, 10, 100} {
		msg, err := alice.Protect(bytes.Repeat([]byte{'a'}, n), nil)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(msg))
		rec, err := bob.Process(msg)
		if err != nil || len(rec.Data) != n {
			t.Fatal(rec, err)
		}
	}
	if sizes[0] != sizes[1] || sizes[1] != sizes[2] {
		t.Fatalf("padded sizes differ: %v", sizes)
	}
	tg.check()
}

// listExternalSender has alice commit an external_senders extension with
// one entry, a server, and returns that entry's signature private key.
func listExternalSender(t *testing.T, tg *testGroup, alice *Group) []byte {
	t.Helper()
	extPriv, err := GenerateSignatureKey(testSuite)
	if err != nil {
		t.Fatal(err)
	}
	extPub, _ := alice.s.signPublicFromPrivate(extPriv)
	senders := marshal(&externalSenders{Senders: []ExternalSender{{SignatureKey: extPub,
		Credential: Credential{CredentialType: CredentialTypeBasic, Identity: []byte("did:web:server")}}}})
	res, err := alice.Commit(CommitOptions{Extensions: []Extension{{ExtensionType: ExtensionTypeExternalSenders, ExtensionData: senders}}})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	return extPriv
}

// externalProposal is p as a PublicMessage of external sender 0 in g's
// current epoch, signed with signKey.
func externalProposal(t *testing.T, g *Group, signKey []byte, p *Proposal) []byte {
	t.Helper()
	fc := &framedContent{
		GroupID:     g.cur.ctx.GroupID,
		Epoch:       g.cur.ctx.Epoch,
		Sender:      Sender{SenderType: SenderTypeExternal, SenderIndex: 0},
		ContentType: ContentTypeProposal,
		Proposal:    p,
	}
	ac, err := signFramedContent(g.s, signKey, WireFormatPublicMessage, fc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage,
		PublicMessage: &publicMessage{Content: ac.Content, Auth: ac.Auth}})
}

func TestExternalSenderProposal(t *testing.T) {
	tg, alice, _ := twoMembers(t, &Config{ExternalPolicy: admitExternal})
	tg.add("did:key:alice", "did:key:carol")
	// The group lists an external sender (a server that may remove members).
	extPriv := listExternalSender(t, tg, alice)
	carol, _ := alice.MemberByIdentity("did:key:carol")
	remove := &Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: carol.LeafIndex}}
	msg := externalProposal(t, alice, extPriv, remove)
	for name, m := range tg.members {
		if _, err := m.Process(msg); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// A forged one (signed by another key) is rejected.
	other, _ := GenerateSignatureKey(testSuite)
	bad := externalProposal(t, alice, other, remove)
	if _, err := alice.Process(bad); !errors.Is(err, ErrInvalidSignature) {
		t.Fatalf("got %v, want ErrInvalidSignature", err)
	}
	res, err := alice.Commit(CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	if _, ok := tg.members["did:key:carol"]; ok {
		t.Fatal("carol not removed")
	}
	tg.check()
}

func TestLatestUpdateWins(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	for range 2 {
		p, err := bob.ProposeUpdate()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Process(p); err != nil {
			t.Fatal(err)
		}
	}
	res, err := alice.Commit(CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	tg.check()
}
