package mls

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// These tests pin a fixed defect: one proposal that passed the checks on
// receipt but broke the proposal list made every later Commit fail, and
// Protect refused to send while it was pending, so the group was wedged for
// good. Each test sends such a proposal in a real group and checks that
// every member can still commit, that the others process the Commit, and
// that everyone can then send and read.

// sendRaw frames, signs and protects p as a proposal of g without any
// check, as a hostile member's own client could, and caches it as a
// client keeps what it sends.
func sendRaw(t testing.TB, g *Group, p *Proposal) []byte {
	t.Helper()
	fc := &framedContent{
		GroupID:     g.cur.ctx.GroupID,
		Epoch:       g.cur.ctx.Epoch,
		Sender:      Sender{SenderType: SenderTypeMember, LeafIndex: uint32(g.own)},
		ContentType: ContentTypeProposal,
		Proposal:    p,
	}
	msg, ac, err := g.protectHandshake(fc)
	if err != nil {
		t.Fatal(err)
	}
	g.cacheProposal(ac, nil)
	return msg
}

// deliver has every member but from process msg, and returns how many
// refused it.
func (tg *testGroup) deliver(from string, msg []byte) (refused int) {
	tg.t.Helper()
	for name, m := range tg.members {
		if name == from {
			continue
		}
		if _, err := m.Process(msg); err != nil {
			refused++
		}
	}
	return refused
}

// everyoneCommits checks that each member in turn can commit what is
// pending, in the epoch the proposals were sent in: each Commit is made
// and discarded, and the last one is sent to the group.
func (tg *testGroup) everyoneCommits(last string) *CommitResult {
	tg.t.Helper()
	for name, m := range tg.members {
		if name == last {
			continue
		}
		if _, err := m.SelfUpdate(); err != nil {
			tg.t.Fatalf("%s cannot commit: %v", name, err)
		}
		m.DiscardCommit()
	}
	res, err := tg.members[last].SelfUpdate()
	if err != nil {
		tg.t.Fatalf("%s cannot commit: %v", last, err)
	}
	tg.fanOut(last, res)
	return res
}

func threeMembers(t *testing.T, cfg *Config) *testGroup {
	tg := newTestGroup(t, "did:key:alice", cfg)
	tg.add("did:key:alice", "did:key:bob")
	tg.add("did:key:alice", "did:key:carol")
	return tg
}

func droppedTypes(res *CommitResult) []ProposalType {
	var out []ProposalType
	for _, d := range res.Dropped {
		out = append(out, d.Type)
	}
	return out
}

func TestReInitDoesNotWedge(t *testing.T) {
	tg := threeMembers(t, nil)
	bob := tg.members["did:key:bob"]
	reinit := &Proposal{ProposalType: ProposalTypeReInit, ReInit: &ReInit{
		GroupID: []byte("new group"), Version: ProtocolVersionMLS10, CipherSuite: testSuite}}
	tg.deliver("did:key:bob", sendRaw(t, bob, reinit))
	res := tg.everyoneCommits("did:key:alice")
	if got := droppedTypes(res); !slices.Equal(got, []ProposalType{ProposalTypeReInit}) || !errors.Is(res.Dropped[0].Err, ErrInvalidProposal) {
		t.Fatalf("dropped %v", res.Dropped)
	}
	tg.check()
}

func TestTwoExtensionsProposalsDoNotWedge(t *testing.T) {
	tg := threeMembers(t, nil)
	rc := func(ct ...CredentialType) []Extension {
		return []Extension{{ExtensionType: ExtensionTypeRequiredCapabilities,
			ExtensionData: marshal(&requiredCapabilities{CredentialTypes: ct})}}
	}
	// Two honest members propose at once; both are valid alone.
	for _, name := range []string{"did:key:bob", "did:key:carol"} {
		p, err := tg.members[name].ProposeGroupContextExtensions(rc(CredentialTypeBasic))
		if err != nil {
			t.Fatal(err)
		}
		if n := tg.deliver(name, p); n != 0 {
			t.Fatalf("%d members refused %s's proposal", n, name)
		}
	}
	res := tg.everyoneCommits("did:key:alice")
	if got := droppedTypes(res); !slices.Equal(got, []ProposalType{ProposalTypeGroupContextExtensions}) {
		t.Fatalf("dropped %v", res.Dropped)
	}
	if _, ok := findExtension(tg.members["did:key:carol"].cur.ctx.Extensions, ExtensionTypeRequiredCapabilities); !ok {
		t.Fatal("neither proposal was committed")
	}
	tg.check()
}

func TestUnsupportedExtensionDoesNotWedge(t *testing.T) {
	tg := threeMembers(t, nil)
	bob := tg.members["did:key:bob"]
	bad := &Proposal{ProposalType: ProposalTypeGroupContextExtensions, GroupContextExtensions: &GroupContextExtensions{
		Extensions: []Extension{{ExtensionType: 0xff0a, ExtensionData: []byte("nobody supports this")}}}}
	if n := tg.deliver("did:key:bob", sendRaw(t, bob, bad)); n != 2 {
		t.Fatalf("%d of 2 members refused the proposal", n)
	}
	tg.everyoneCommits("did:key:carol")
	tg.check()
}

func TestDuplicateAddsDoNotWedge(t *testing.T) {
	tg := threeMembers(t, nil)
	dave := newTestBundle(t, "did:key:dave")
	for _, name := range []string{"did:key:bob", "did:key:carol"} {
		p, err := tg.members[name].ProposeAdd(dave.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		tg.deliver(name, p)
	}
	res := tg.everyoneCommits("did:key:alice")
	if got := droppedTypes(res); !slices.Equal(got, []ProposalType{ProposalTypeAdd}) || !errors.Is(res.Dropped[0].Err, ErrInvalidCredential) {
		t.Fatalf("dropped %v", res.Dropped)
	}
	g, err := Join(res.Welcome, dave, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:dave"] = g
	tg.check()
}

// lowOrderKeyPackage returns b's KeyPackage with its init key replaced by
// an X25519 point of order 4, and signed again.
func lowOrderKeyPackage(t testing.TB, b *KeyPackageBundle) *KeyPackage {
	t.Helper()
	kp := b.kp
	kp.InitKey = make([]byte, 32)
	kp.InitKey[0] = 1
	if err := kp.sign(b.s, b.sigPriv); err != nil {
		t.Fatal(err)
	}
	return &kp
}

func TestLowOrderInitKeyDoesNotWedge(t *testing.T) {
	tg := threeMembers(t, nil)
	bob := tg.members["did:key:bob"]
	kp := lowOrderKeyPackage(t, newTestBundle(t, "did:key:dave"))
	tg.deliver("did:key:bob", sendRaw(t, bob, &Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: *kp}}))
	tg.everyoneCommits("did:key:alice")
	tg.check()
}

// TestUnknownPSKDoesNotWedge: a PSK proposal for a key the committer does
// not hold is valid on its own (Section 12.1.4) but cannot be committed.
func TestUnknownPSKDoesNotWedge(t *testing.T) {
	tg := threeMembers(t, nil)
	bob := tg.members["did:key:bob"]
	nonce := make([]byte, bob.s.hashLen())
	psk := &Proposal{ProposalType: ProposalTypePSK, PreSharedKey: &PreSharedKey{PSK: PreSharedKeyID{
		PSKType: PSKTypeExternal, PSKID: []byte("nobody has this"), PSKNonce: nonce}}}
	tg.deliver("did:key:bob", sendRaw(t, bob, psk))
	res := tg.everyoneCommits("did:key:carol")
	if got := droppedTypes(res); !slices.Equal(got, []ProposalType{ProposalTypePSK}) || !errors.Is(res.Dropped[0].Err, ErrMissingPSK) {
		t.Fatalf("dropped %v", res.Dropped)
	}
	tg.check()
}

// TestRemoveOfCommitterDoesNotWedge: a member removing another is
// committed by anyone but the removed member, whose own Commit leaves it
// out; both Commits are processed by everyone.
func TestRemoveOfCommitterDoesNotWedge(t *testing.T) {
	tg := threeMembers(t, nil)
	carol, _ := tg.members["did:key:alice"].MemberByIdentity("did:key:carol")
	p, err := tg.members["did:key:bob"].ProposeRemove(carol.LeafIndex)
	if err != nil {
		t.Fatal(err)
	}
	tg.deliver("did:key:bob", p)
	res, err := tg.members["did:key:carol"].SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if got := droppedTypes(res); !slices.Equal(got, []ProposalType{ProposalTypeRemove}) {
		t.Fatalf("dropped %v", res.Dropped)
	}
	tg.members["did:key:carol"].DiscardCommit()
	tg.everyoneCommits("did:key:alice")
	if _, ok := tg.members["did:key:carol"]; ok {
		t.Fatal("carol was not removed")
	}
	tg.check()
}

// TestPendingProposals checks the pending proposal API: a member that
// has seen a proposal cannot send until it commits or discards it
// (Section 12.4), and discarding makes it refuse a Commit that includes
// the proposal.
func TestPendingProposals(t *testing.T) {
	tg := threeMembers(t, nil)
	alice, bob, carol := tg.members["did:key:alice"], tg.members["did:key:bob"], tg.members["did:key:carol"]
	p, err := bob.ProposeUpdate()
	if err != nil {
		t.Fatal(err)
	}
	var ref []byte
	for _, m := range []*Group{alice, carol} {
		rec, err := m.Process(p)
		if err != nil {
			t.Fatal(err)
		}
		ref = rec.ProposalRef
	}
	pend := alice.PendingProposals()
	if len(pend) != 1 || string(pend[0].Ref) != string(ref) || pend[0].Sender.LeafIndex != bob.LeafIndex() ||
		pend[0].Proposal.ProposalType != ProposalTypeUpdate {
		t.Fatalf("pending %+v", pend)
	}
	pend[0].Proposal.Update.LeafNode.EncryptionKey[0] ^= 1 // a copy: the cache is untouched
	if _, err := alice.Protect([]byte("x"), nil); !errors.Is(err, ErrPendingProposals) {
		t.Fatalf("got %v, want ErrPendingProposals", err)
	}
	if n := carol.DiscardProposals([]byte("no such ref"), ref); n != 1 || len(carol.PendingProposals()) != 0 {
		t.Fatalf("discarded %d", n)
	}
	msg, err := carol.Protect([]byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(msg); err != nil {
		t.Fatal(err)
	}
	// A PublicMessage, so that carol's refusal consumes no key.
	res, err := alice.Commit(CommitOptions{WireFormat: WireFormatPublicMessage})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 0 {
		t.Fatalf("dropped %v", res.Dropped)
	}
	before := fingerprint(t, carol)
	if _, err := carol.Process(res.Commit); !errors.Is(err, ErrInvalidProposal) {
		t.Fatalf("carol processed a commit of a proposal she discarded: %v", err)
	}
	expectUnchanged(t, carol, before)
	alice.DiscardCommit()
	carol.ClearPendingProposals()
	alice.ClearPendingProposals()
	bob.ClearPendingProposals()
	tg.check()
}

// TestNoWedgeProperty sends random mixes of valid and invalid proposals,
// from members and from outsiders, and after each round has a random
// member commit. Every member must be able to commit, every other member
// must process the Commit, and everyone must then send and read. The
// mixes are drawn from fixed seeds, so a failure is reproducible: with
// -short, 3 seeds of 6 rounds of 1 to 6 proposals (about 70 proposals);
// without, 16 seeds of 16 rounds of 1 to 8 (about 1,000). The test logs
// how many were refused on receipt, committed and left out.
func TestNoWedgeProperty(t *testing.T) {
	seeds, rounds, perRound := 3, 6, 6
	if !testing.Short() {
		seeds, rounds, perRound = 16, 16, 8
	}
	var total wedgeStats
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			st := runWedgeRounds(t, uint64(seed), rounds, perRound)
			total.sent += st.sent
			total.refused += st.refused
			total.included += st.included
			total.dropped += st.dropped
		})
	}
	t.Logf("%d proposals sent: %d refused by some member on receipt, %d committed, %d left out of commits", total.sent, total.refused, total.included, total.dropped)
	if total.refused == 0 || total.included == 0 || total.dropped == 0 {
		t.Fatal("the mix does not cover refused, committed and left-out proposals")
	}
}

type wedgeStats struct{ sent, refused, included, dropped int }

// wedgeWorld is the state of one run of the property test.
type wedgeWorld struct {
	t       *testing.T
	rng     *rand.Rand
	tg      *testGroup
	cfg     *Config
	extPriv []byte // the external sender's signature key
	joiners map[string]*KeyPackageBundle
	next    int
	stats   wedgeStats
}

func runWedgeRounds(t *testing.T, seed uint64, rounds, perRound int) wedgeStats {
	w := &wedgeWorld{t: t, rng: rand.New(rand.NewPCG(seed, 9)), joiners: map[string]*KeyPackageBundle{}}
	w.cfg = &Config{
		ExternalPSKs: map[string][]byte{"psk": []byte("a shared secret")},
		// The external sender is admitted; strangers only when invited.
		ExternalPolicy: func(r ExternalRequest) error {
			if r.Sender.SenderType == SenderTypeExternal {
				return nil
			}
			if r.Joiner != nil && strings.HasPrefix(r.Joiner.Identity, "did:key:invited") {
				return nil
			}
			return errors.New("not invited")
		},
	}
	w.tg = threeMembers(t, w.cfg)
	alice := w.tg.members["did:key:alice"]
	extPriv, err := GenerateSignatureKey(testSuite)
	if err != nil {
		t.Fatal(err)
	}
	w.extPriv = extPriv
	res, err := alice.Commit(CommitOptions{Extensions: w.extensions()})
	if err != nil {
		t.Fatal(err)
	}
	w.tg.fanOut("did:key:alice", res)
	for range rounds {
		var hello []byte // an application message, for strangers to read the header of
		for range 1 + w.rng.IntN(perRound) {
			if hello == nil {
				w.tg.check() // everyone can send before the proposals
				hello, err = w.randomMember().Protect([]byte("hi"), nil)
				if err != nil {
					t.Fatal(err)
				}
			}
			w.sendRandomProposal(hello)
		}
		w.commitRound()
	}
	return w.stats
}

func (w *wedgeWorld) names() []string {
	var out []string
	for n := range w.tg.members {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (w *wedgeWorld) randomName() string {
	n := w.names()
	return n[w.rng.IntN(len(n))]
}

func (w *wedgeWorld) randomMember() *Group { return w.tg.members[w.randomName()] }

// extensions are the group's extensions: the external sender, and
// required_capabilities that every member meets.
func (w *wedgeWorld) extensions() []Extension {
	pub, _ := w.randomMember().s.signPublicFromPrivate(w.extPriv)
	senders := marshal(&externalSenders{Senders: []ExternalSender{{SignatureKey: pub,
		Credential: Credential{CredentialType: CredentialTypeBasic, Identity: []byte("did:web:server")}}}})
	return []Extension{
		{ExtensionType: ExtensionTypeExternalSenders, ExtensionData: senders},
		{ExtensionType: ExtensionTypeRequiredCapabilities, ExtensionData: marshal(&requiredCapabilities{CredentialTypes: []CredentialType{CredentialTypeBasic}})},
	}
}

func (w *wedgeWorld) newJoiner(prefix string) *KeyPackageBundle {
	w.next++
	b := newTestBundle(w.t, fmt.Sprintf("did:key:%s-%d", prefix, w.next))
	w.joiners[fmt.Sprintf("%s-%d", prefix, w.next)] = b
	return b
}

// external signs p as the group's external sender.
func (w *wedgeWorld) external(p *Proposal) []byte {
	g := w.randomMember()
	fc := &framedContent{GroupID: g.cur.ctx.GroupID, Epoch: g.cur.ctx.Epoch,
		Sender: Sender{SenderType: SenderTypeExternal}, ContentType: ContentTypeProposal, Proposal: p}
	ac, err := signFramedContent(g.s, w.extPriv, WireFormatPublicMessage, fc, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	return marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage,
		PublicMessage: &publicMessage{Content: ac.Content, Auth: ac.Auth}})
}

// sendRandomProposal sends one proposal, drawn from the kinds below, to
// every member. Members may refuse it; that is not checked here.
func (w *wedgeWorld) sendRandomProposal(hello []byte) {
	t := w.t
	from := w.randomName()
	g := w.tg.members[from]
	leaves := w.tg.members[w.randomName()].Members()
	victim := leaves[w.rng.IntN(len(leaves))].LeafIndex
	var msg []byte
	var err error
	switch k := w.rng.IntN(15); k {
	case 0: // valid: add a new member
		if len(w.tg.members) < 7 {
			msg, err = g.ProposeAdd(w.newJoiner("joiner").Bytes())
		}
	case 1: // valid: remove a member
		if len(w.tg.members) > 2 {
			msg, err = g.ProposeRemove(victim)
		}
	case 2, 3: // valid: update
		msg, err = g.ProposeUpdate()
	case 4: // valid: a known PSK
		msg, err = g.ProposeExternalPSK([]byte("psk"))
	case 5: // valid alone; two of them conflict
		msg, err = g.ProposeGroupContextExtensions(w.extensions())
	case 6: // invalid: reinit
		msg = sendRaw(t, g, &Proposal{ProposalType: ProposalTypeReInit, ReInit: &ReInit{GroupID: []byte("x"), Version: ProtocolVersionMLS10, CipherSuite: testSuite}})
	case 7: // invalid: an extension nobody supports
		msg = sendRaw(t, g, &Proposal{ProposalType: ProposalTypeGroupContextExtensions, GroupContextExtensions: &GroupContextExtensions{
			Extensions: []Extension{{ExtensionType: 0xff0b}}}})
	case 8: // invalid unless the same Commit removes it: a member's identity added again
		b := newTestBundle(t, w.randomName())
		w.next++
		w.joiners[fmt.Sprintf("again-%d", w.next)] = b
		msg = sendRaw(t, g, &Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: b.kp}})
	case 9: // invalid: low-order init key
		kp := lowOrderKeyPackage(t, w.newJoiner("joiner"))
		msg = sendRaw(t, g, &Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: *kp}})
	case 10: // invalid: a PSK nobody holds
		msg = sendRaw(t, g, &Proposal{ProposalType: ProposalTypePSK, PreSharedKey: &PreSharedKey{PSK: PreSharedKeyID{
			PSKType: PSKTypeExternal, PSKID: []byte("unknown"), PSKNonce: make([]byte, g.s.hashLen())}}})
	case 11: // invalid: an update that changes the sender's identity
		msg = w.identityChangingUpdate(g)
	case 12: // outsider, refused: a stranger's new member Add
		from = "" // to every member
		msg = strangerAdd(t, hello, w.newJoiner("stranger"))
	case 13: // outsider, admitted: an invited joiner's new member Add
		from = ""
		if len(w.tg.members) < 7 {
			msg = strangerAdd(t, hello, w.newJoiner("invited"))
		}
	case 14: // outsider, admitted: the external sender removes or adds someone
		from = ""
		if w.rng.IntN(2) == 0 && len(w.tg.members) > 2 {
			msg = w.external(&Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: victim}})
		} else if len(w.tg.members) < 7 {
			msg = w.external(&Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: w.newJoiner("joiner").kp}})
		}
	}
	if err != nil {
		t.Fatalf("%s proposing: %v", from, err)
	}
	if msg != nil {
		w.stats.sent++
		if w.tg.deliver(from, msg) > 0 {
			w.stats.refused++
		}
	}
}

// identityChangingUpdate is an Update from g whose leaf names another
// identity.
func (w *wedgeWorld) identityChangingUpdate(g *Group) []byte {
	ln := *g.cur.tree.leafNode(g.own)
	_, pub, err := g.s.hpkeGenerateKeyPair()
	if err != nil {
		w.t.Fatal(err)
	}
	ln.EncryptionKey = pub
	ln.LeafNodeSource = LeafNodeSourceUpdate
	ln.Lifetime = Lifetime{}
	ln.ParentHash = nil
	ln.Credential = Credential{CredentialType: CredentialTypeBasic, Identity: []byte("did:key:someone-else")}
	if err := ln.sign(g.s, g.sigPriv, g.cur.ctx.GroupID, uint32(g.own)); err != nil {
		w.t.Fatal(err)
	}
	return sendRaw(w.t, g, &Proposal{ProposalType: ProposalTypeUpdate, Update: &Update{LeafNode: ln}})
}

// commitRound has every member make a Commit of what is pending, sends a
// random member's, lets the joiners it adds join, and checks that the
// group works.
func (w *wedgeWorld) commitRound() {
	committer := w.randomName()
	pending := len(w.tg.members[committer].PendingProposals())
	res := w.tg.everyoneCommits(committer)
	w.stats.included += pending - len(res.Dropped)
	w.stats.dropped += len(res.Dropped)
	if res.Welcome != nil {
		joined := 0
		for name, b := range w.joiners {
			g, err := Join(res.Welcome, b, nil, w.cfg)
			if errors.Is(err, ErrNotForUs) {
				continue
			}
			if err != nil {
				w.t.Fatalf("%s joining: %v", name, err)
			}
			w.tg.members[b.Identity()] = g
			delete(w.joiners, name)
			joined++
		}
		if joined == 0 {
			w.t.Fatal("a welcome for nobody")
		}
	}
	w.tg.check()
}

// TestCommitWithoutBrokenPending covers the last resort of Commit: a
// pending proposal that passed every check but still breaks the Commit
// (here an Add with a low-order init key that skipped the checks on
// receipt, as one restored from an older state could) is left out, with
// the others, instead of making the Commit fail.
func TestCommitWithoutBrokenPending(t *testing.T) {
	tg := threeMembers(t, nil)
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	kp := lowOrderKeyPackage(t, newTestBundle(t, "did:key:dave"))
	fc := &framedContent{GroupID: bob.cur.ctx.GroupID, Epoch: bob.cur.ctx.Epoch,
		Sender:      Sender{SenderType: SenderTypeMember, LeafIndex: bob.LeafIndex()},
		ContentType: ContentTypeProposal, Proposal: &Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: *kp}}}
	ac, err := bob.signContent(WireFormatPublicMessage, fc, bob.cur.ctx)
	if err != nil {
		t.Fatal(err)
	}
	alice.cacheProposal(ac, nil)
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || res.Dropped[0].Type != ProposalTypeAdd || res.Welcome != nil ||
		!strings.Contains(res.Dropped[0].Err.Error(), "cannot be made with it") {
		t.Fatalf("dropped %v", res.Dropped)
	}
	tg.fanOut("did:key:alice", res)
	tg.check()
}

// TestPendingProposalsBounded: a member flooding the group with proposals
// fills the cache up to its bound and no further; the others can still
// commit, and a state at the bound saves and restores.
func TestPendingProposalsBounded(t *testing.T) {
	tg := threeMembers(t, nil)
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	// Fill alice's cache directly (sending 65,536 real proposals would
	// only make the test slow): Removes of a blank leaf, which no Commit
	// can include.
	for i := range maxPendingProposals - 1 {
		ref := make([]byte, 32)
		ref[0], ref[1], ref[2] = byte(i), byte(i>>8), byte(i>>16)
		alice.proposals = append(alice.proposals, cachedProposal{ref: ref,
			proposal: Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: 99}},
			sender:   Sender{SenderType: SenderTypeMember, LeafIndex: bob.LeafIndex()}})
	}
	p, err := bob.ProposeUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Process(p); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.members["did:key:carol"].Process(p); err != nil {
		t.Fatal(err)
	}
	p, err = bob.ProposeUpdate()
	if err != nil {
		t.Fatal(err)
	}
	before := fingerprint(t, alice)
	if _, err := alice.Process(p); !errors.Is(err, ErrInvalidProposal) {
		t.Fatalf("got %v, want ErrInvalidProposal", err)
	}
	expectUnchanged(t, alice, before)
	restored, err := RestoreGroup(before, nil)
	if err != nil {
		t.Fatalf("restoring a state at the bound: %v", err)
	}
	if len(restored.PendingProposals()) != maxPendingProposals {
		t.Fatalf("restored %d proposals", len(restored.PendingProposals()))
	}
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != maxPendingProposals-1 {
		t.Fatalf("dropped %d", len(res.Dropped))
	}
	tg.fanOut("did:key:alice", res)
	tg.check()
}
