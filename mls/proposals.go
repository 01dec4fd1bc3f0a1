package mls

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file creates proposals (RFC 9420, Section 12.1), validates proposal
// lists (Section 12.2) and applies them to a tree and GroupContext
// (Section 12.3).

// cachedProposal is a proposal received or sent in the current epoch,
// which a Commit may include by reference.
type cachedProposal struct {
	ref      []byte // ProposalRef (Section 5.2)
	proposal Proposal
	sender   Sender
	// updatePriv is the new leaf's HPKE private key of an own Update.
	updatePriv []byte
}

// committedProposal is one proposal of a Commit, resolved.
type committedProposal struct {
	proposal Proposal
	sender   Sender
	byRef    bool
	ref      []byte
}

// resolveProposals turns a Commit's ProposalOrRef list into proposals,
// looking references up in the proposals cached in this epoch. A reference
// to an unknown proposal invalidates the Commit.
func (g *Group) resolveProposals(c *commitContent, committer Sender) ([]committedProposal, error) {
	out := make([]committedProposal, 0, len(c.Proposals))
	for i := range c.Proposals {
		por := &c.Proposals[i]
		switch por.Type {
		case porProposal:
			out = append(out, committedProposal{proposal: por.Proposal, sender: committer})
		case porReference:
			cp := g.findProposal(por.Reference)
			if cp == nil {
				return nil, fmt.Errorf("%w: unknown proposal reference %x", ErrInvalidProposal, por.Reference)
			}
			out = append(out, committedProposal{proposal: cp.proposal, sender: cp.sender, byRef: true, ref: cp.ref})
		default:
			return nil, fmt.Errorf("%w: bad proposal or reference type", ErrInvalidProposal)
		}
	}
	return out, nil
}

func (g *Group) findProposal(ref []byte) *cachedProposal {
	for i := range g.proposals {
		if bytes.Equal(g.proposals[i].ref, ref) {
			return &g.proposals[i]
		}
	}
	return nil
}

// pathRequired reports whether a Commit covering props must carry an
// UpdatePath (Section 12.4): when it covers no proposal, or any proposal
// of a "path required" type.
func pathRequired(props []committedProposal) bool {
	if len(props) == 0 {
		return true
	}
	for _, p := range props {
		switch p.proposal.ProposalType {
		case ProposalTypeAdd, ProposalTypePSK, ProposalTypeReInit:
		default:
			return true
		}
	}
	return false
}

// proposalEffects is the result of applying a proposal list.
type proposalEffects struct {
	added        []leafIndex // leaves of the new members, in Add order
	addedKPs     []*KeyPackage
	psks         []PreSharedKeyID
	externalInit *ExternalInit
	reinit       *ReInit
	removedSelf  bool
	updatedSelf  *cachedProposal // an own Update that was committed
	updated      []leafIndex     // leaves replaced by Update proposals
}

// applyProposals applies a validated proposal list to tree and ctx, which
// must be copies the caller owns (Section 12.3). exts receives the
// GroupContext extensions in effect (changed by a GroupContextExtensions
// proposal).
func (g *Group) applyProposals(props []committedProposal, tree *ratchetTree, ctx *GroupContext) (*proposalEffects, error) {
	eff := &proposalEffects{}
	for _, p := range props {
		if p.proposal.ProposalType == ProposalTypeGroupContextExtensions {
			ctx.Extensions = slices.Clone(p.proposal.GroupContextExtensions.Extensions)
		}
	}
	for _, p := range props {
		if p.proposal.ProposalType != ProposalTypeUpdate {
			continue
		}
		l := leafIndex(p.sender.LeafIndex)
		ln := p.proposal.Update.LeafNode
		if err := tree.updateLeaf(l, &ln); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidProposal, err)
		}
		eff.updated = append(eff.updated, l)
		if l == g.own && p.byRef {
			eff.updatedSelf = g.findProposal(p.ref)
		}
	}
	for _, p := range props {
		if p.proposal.ProposalType != ProposalTypeRemove {
			continue
		}
		l := leafIndex(p.proposal.Remove.Removed)
		if err := tree.removeLeaf(l); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidProposal, err)
		}
		if l == g.own {
			eff.removedSelf = true
		}
	}
	for _, p := range props {
		if p.proposal.ProposalType != ProposalTypeAdd {
			continue
		}
		kp := &p.proposal.Add.KeyPackage
		ln := kp.LeafNode
		eff.added = append(eff.added, tree.addLeaf(&ln))
		eff.addedKPs = append(eff.addedKPs, kp)
	}
	for _, p := range props {
		switch p.proposal.ProposalType {
		case ProposalTypePSK:
			eff.psks = append(eff.psks, p.proposal.PreSharedKey.PSK)
		case ProposalTypeExternalInit:
			eff.externalInit = p.proposal.ExternalInit
		case ProposalTypeReInit:
			eff.reinit = p.proposal.ReInit
		}
	}
	// Section 12.1.7 and 11.1: every member must support the group's
	// extensions and required capabilities. When they changed, check all
	// members; otherwise only the leaves this list brought in.
	gceChanged := slices.ContainsFunc(props, func(p committedProposal) bool {
		return p.proposal.ProposalType == ProposalTypeGroupContextExtensions
	})
	if gceChanged {
		if err := checkGroupSupport(tree, ctx.Extensions); err != nil {
			return nil, err
		}
	} else {
		for _, l := range append(slices.Clone(eff.added), eff.updated...) {
			if err := checkLeafSupports(tree.leafNode(l), ctx.Extensions); err != nil {
				return nil, fmt.Errorf("%w: leaf %d: %v", ErrInvalidProposal, l, err)
			}
		}
	}
	return eff, nil
}

// checkGroupSupport checks that every member supports the GroupContext
// extensions and the required_capabilities among them (Sections 11.1,
// 12.1.7, 13.4).
func checkGroupSupport(tree *ratchetTree, exts []Extension) error {
	for l := leafIndex(0); uint32(l) < tree.size(); l++ {
		ln := tree.leafNode(l)
		if ln == nil {
			continue
		}
		if err := checkLeafSupports(ln, exts); err != nil {
			return fmt.Errorf("%w: leaf %d: %v", ErrInvalidProposal, l, err)
		}
	}
	return nil
}

// isDefaultExtension reports whether t is one of the extension types of
// RFC 9420, which every client supports without listing them (Section 7.2).
func isDefaultExtension(t ExtensionType) bool {
	return t >= ExtensionTypeApplicationID && t <= ExtensionTypeExternalSenders
}

func isDefaultProposal(t ProposalType) bool {
	return t >= ProposalTypeAdd && t <= ProposalTypeGroupContextExtensions
}

// checkLeafSupports checks one leaf against the GroupContext extensions:
// it must support each non-default extension and everything listed in
// required_capabilities (Section 11.1).
func checkLeafSupports(ln *LeafNode, exts []Extension) error {
	caps := &ln.Capabilities
	for _, e := range exts {
		if !isDefaultExtension(e.ExtensionType) && !slices.Contains(caps.Extensions, e.ExtensionType) {
			return fmt.Errorf("extension %d not supported", e.ExtensionType)
		}
	}
	data, ok := findExtension(exts, ExtensionTypeRequiredCapabilities)
	if !ok {
		return nil
	}
	var rc requiredCapabilities
	if err := unmarshal(data, &rc); err != nil {
		return errors.New("malformed required_capabilities")
	}
	for _, t := range rc.ExtensionTypes {
		if !isDefaultExtension(t) && !slices.Contains(caps.Extensions, t) {
			return fmt.Errorf("required extension %d not supported", t)
		}
	}
	for _, t := range rc.ProposalTypes {
		if !isDefaultProposal(t) && !slices.Contains(caps.Proposals, t) {
			return fmt.Errorf("required proposal %d not supported", t)
		}
	}
	for _, t := range rc.CredentialTypes {
		if !slices.Contains(caps.Credentials, t) {
			return fmt.Errorf("required credential %d not supported", t)
		}
	}
	return nil
}

// validateKeyPackage makes the checks of Section 10.1 on a KeyPackage that
// is to be added to this group. own is true for KeyPackages this member
// adds, whose lifetime is always checked (Section 7.3).
func (g *Group) validateKeyPackage(kp *KeyPackage, own bool) error {
	if err := g.verifyKeyPackage(kp); err != nil {
		return err
	}
	return g.validateKeyPackageContent(kp, own, g.cur.ctx.Extensions)
}

// validateKeyPackageContent is validateKeyPackage without the version,
// suite and signature checks, for a group whose extensions will be exts.
func (g *Group) validateKeyPackageContent(kp *KeyPackage, own bool, exts []Extension) error {
	if bytes.Equal(kp.InitKey, kp.LeafNode.EncryptionKey) {
		return fmt.Errorf("%w: init key equals the encryption key", ErrInvalidLeafNode)
	}
	if own || !g.cfg.SkipLifetimeCheck {
		if err := checkLifetime(&kp.LeafNode, &g.cfg); err != nil {
			return err
		}
	}
	return g.checkLeafCompat(&kp.LeafNode, exts)
}

// checkLifetime checks the lifetime of a KeyPackage's leaf (Section 7.3):
// it covers the current time, and its total length is at most
// Config.MaxLeafLifetime, the maximum the RFC requires applications to set.
func checkLifetime(ln *LeafNode, c *Config) error {
	now := c.now().Unix()
	lt := ln.Lifetime
	if now < 0 || uint64(now) < lt.NotBefore || uint64(now) > lt.NotAfter {
		return fmt.Errorf("%w: lifetime does not cover the current time", ErrInvalidLeafNode)
	}
	if c.MaxLeafLifetime >= 0 && lt.NotAfter-lt.NotBefore > uint64(c.MaxLeafLifetime/time.Second) {
		return fmt.Errorf("%w: lifetime longer than %v", ErrInvalidLeafNode, c.MaxLeafLifetime)
	}
	return nil
}

// validateLeafNode makes the checks of Section 7.3 on a LeafNode from an
// Update or a Commit path, for leaf l: signature, source-specific fields,
// and compatibility with the group. The uniqueness of its keys is checked
// by the caller on the new tree.
func (g *Group) validateLeafNode(ln *LeafNode, l leafIndex, exts []Extension, update bool) error {
	if !ln.verifySignature(g.s, g.cur.ctx.GroupID, uint32(l)) {
		return fmt.Errorf("%w: bad leaf signature", ErrInvalidLeafNode)
	}
	want := LeafNodeSourceCommit
	if update {
		want = LeafNodeSourceUpdate
	}
	if ln.LeafNodeSource != want {
		return fmt.Errorf("%w: wrong leaf node source", ErrInvalidLeafNode)
	}
	return g.checkLeafCompat(ln, exts)
}

// checkLeafCompat checks that a leaf fits the group (Section 7.3): the
// application accepts its credential for its signature key (Section
// 5.3.1), its extensions are in its capabilities, it supports the group's
// extensions and required capabilities, it supports the credential types
// in use, and every member supports its credential type.
func (g *Group) checkLeafCompat(ln *LeafNode, exts []Extension) error {
	if err := g.cfg.validateCredential(&ln.Credential, ln.SignatureKey); err != nil {
		return err
	}
	for _, e := range ln.Extensions {
		if !isDefaultExtension(e.ExtensionType) && !slices.Contains(ln.Capabilities.Extensions, e.ExtensionType) {
			return fmt.Errorf("%w: leaf extension %d not in its capabilities", ErrInvalidLeafNode, e.ExtensionType)
		}
	}
	if hasDuplicateExtensions(ln.Extensions) {
		return fmt.Errorf("%w: duplicate leaf extensions", ErrInvalidLeafNode)
	}
	if err := checkLeafSupports(ln, exts); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidLeafNode, err)
	}
	if !slices.Contains(ln.Capabilities.Credentials, ln.Credential.CredentialType) {
		return fmt.Errorf("%w: credential type not in its capabilities", ErrInvalidLeafNode)
	}
	return g.checkCredentialTypes(ln)
}

// credentialSummary is what the credential checks of Section 7.3 need to
// know about a tree: the credential types in use, and the types that every
// member supports. A summary is never changed once made.
type credentialSummary struct {
	inUse          []CredentialType // in the order of the first leaf using each
	firstLeaf      []leafIndex      // that first leaf, for each type of inUse
	supportedByAll []CredentialType
}

// credentials returns the credential summary of the current tree. The tree
// keeps it, and the trees of later epochs carry it over while their
// changes cannot alter it (see afterLeafChange), so a large group computes
// it again only after a change such as a removal.
func (g *Group) credentials() *credentialSummary {
	t := g.cur.tree
	if t.creds == nil {
		t.creds = summarizeCredentials(t)
	}
	return t.creds
}

// nextTree returns a copy of the current tree for a Commit to change. The
// credential summary is computed first, so that the new epoch's tree
// carries it over (or drops it) with the Commit's changes.
func (g *Group) nextTree() *ratchetTree {
	g.credentials()
	return g.cur.tree.clone()
}

// summarizeCredentials computes the credential summary of t from its
// leaves.
func summarizeCredentials(t *ratchetTree) *credentialSummary {
	cs := &credentialSummary{}
	first := true
	var last []CredentialType
	for l := leafIndex(0); uint32(l) < t.size(); l++ {
		m := t.leafNode(l)
		if m == nil {
			continue
		}
		if !slices.Contains(cs.inUse, m.Credential.CredentialType) {
			cs.inUse = append(cs.inUse, m.Credential.CredentialType)
			cs.firstLeaf = append(cs.firstLeaf, l)
		}
		if first {
			cs.supportedByAll = slices.Clone(m.Capabilities.Credentials)
			first = false
			last = m.Capabilities.Credentials
			continue
		}
		// Most members list the same credential types; a list equal to
		// the last one intersected cannot narrow the intersection.
		if slices.Equal(m.Capabilities.Credentials, last) {
			continue
		}
		last = m.Capabilities.Credentials
		cs.supportedByAll = slices.DeleteFunc(cs.supportedByAll, func(ct CredentialType) bool {
			return !slices.Contains(m.Capabilities.Credentials, ct)
		})
	}
	return cs
}

// afterLeafChange returns the summary of the tree once leaf l changed from
// was to now (nil for a blank leaf), or nil when it is to be computed again
// from the tree. A leaf that keeps its credential type and the credential
// types it supports changes nothing; a new leaf of a type in use adds a
// possibly earlier first leaf and narrows what every member supports; any
// other change, a removal among them, drops the summary.
func (cs *credentialSummary) afterLeafChange(l leafIndex, was, now *LeafNode) *credentialSummary {
	if cs == nil || now == nil {
		return nil
	}
	ct := now.Credential.CredentialType
	if was != nil {
		if was.Credential.CredentialType == ct && slices.Equal(was.Capabilities.Credentials, now.Capabilities.Credentials) {
			return cs
		}
		return nil
	}
	i := slices.Index(cs.inUse, ct)
	if i < 0 {
		return nil
	}
	next := &credentialSummary{
		inUse:     slices.Clone(cs.inUse),
		firstLeaf: slices.Clone(cs.firstLeaf),
		supportedByAll: slices.DeleteFunc(slices.Clone(cs.supportedByAll), func(t CredentialType) bool {
			return !slices.Contains(now.Capabilities.Credentials, t)
		}),
	}
	if l < next.firstLeaf[i] {
		next.firstLeaf[i] = l
		// Keep inUse in the order of first leaves.
		for ; i > 0 && next.firstLeaf[i-1] > l; i-- {
			next.firstLeaf[i-1], next.firstLeaf[i] = next.firstLeaf[i], next.firstLeaf[i-1]
			next.inUse[i-1], next.inUse[i] = next.inUse[i], next.inUse[i-1]
		}
	}
	return next
}

// checkCredentialTypes checks that every member supports the leaf's
// credential type and that the leaf supports every type in use.
func (g *Group) checkCredentialTypes(ln *LeafNode) error {
	cs := g.credentials()
	if !slices.Contains(cs.supportedByAll, ln.Credential.CredentialType) {
		return fmt.Errorf("%w: a member does not support the credential type", ErrInvalidLeafNode)
	}
	for _, ct := range cs.inUse {
		if !slices.Contains(ln.Capabilities.Credentials, ct) {
			return fmt.Errorf("%w: credential type %d in use is not supported", ErrInvalidLeafNode, ct)
		}
	}
	return nil
}

// checkNewKeysUnique checks that the keys introduced into tree by a Commit
// (new leaves and path nodes) appear nowhere else in it (Section 7.3 and
// 12.4.2). nodes lists the nodes whose keys are new.
func checkNewKeysUnique(tree *ratchetTree, nodes []nodeIndex) error {
	if len(nodes) == 0 {
		return nil
	}
	enc := make(map[string]nodeIndex, len(nodes))
	sig := make(map[string]nodeIndex)
	for _, x := range nodes {
		n := tree.node(x)
		if n.blank() {
			continue
		}
		k := string(n.encryptionKey())
		if _, dup := enc[k]; dup {
			return fmt.Errorf("%w: repeated encryption key", ErrInvalidCommit)
		}
		enc[k] = x
		if n.Leaf != nil {
			sig[string(n.Leaf.SignatureKey)] = x
		}
	}
	// The scan of the whole tree only reads it and the two maps. It
	// compares the key tags of each node first and looks up a node's key
	// only when its tag may be one of the new keys', so it reads the
	// pages' tag arrays and few keys. A large tree is scanned on all CPUs;
	// the error is that of the first node in tree order that repeats a new
	// key.
	encF, sigF := newTagFilter(enc), newTagFilter(sig)
	pages, width := tree.pages, tree.width()
	return parallelChunks(len(pages), minParallelKeyScan/treePageSize, func(lo, hi int) error {
		for pi := lo; pi < hi; pi++ {
			p := pages[pi]
			n := min(treePageSize, width-pi*treePageSize)
			for j, kt := range p.keyTags[:n] {
				if kt == 0 {
					continue // blank
				}
				x := nodeIndex(pi*treePageSize + j)
				if encF.mayHold(uint32(kt >> 32)) {
					if y, ok := enc[string(p.nodes[j].encryptionKey())]; ok && y != x {
						return fmt.Errorf("%w: encryption key of node %d already in the tree", ErrInvalidCommit, y)
					}
				}
				if st := uint32(kt); st != 0 && sigF.mayHold(st) {
					if y, ok := sig[string(p.nodes[j].Leaf.SignatureKey)]; ok && y != x {
						return fmt.Errorf("%w: signature key of node %d already in the tree", ErrInvalidCommit, y)
					}
				}
			}
		}
		return nil
	})
}

// tagFilter is a Bloom filter with one hash over the key tags of a set of
// keys: mayHold is true for the tag of every key in the set and, for other
// keys, about once in 64.
type tagFilter struct {
	bits  []uint64
	shift uint
}

func newTagFilter(keys map[string]nodeIndex) tagFilter {
	lg := uint(10) // at least 1024 bits
	for 1<<lg < 64*len(keys) {
		lg++
	}
	f := tagFilter{bits: make([]uint64, 1<<(lg-6)), shift: 64 - lg}
	for k := range keys {
		i := f.index(keyTag([]byte(k)))
		f.bits[i>>6] |= 1 << (i & 63)
	}
	return f
}

func (f tagFilter) index(tag uint32) uint64 {
	return (uint64(tag) * 0x9e3779b97f4a7c15) >> f.shift
}

func (f tagFilter) mayHold(tag uint32) bool {
	i := f.index(tag)
	return f.bits[(i>>6)&uint64(len(f.bits)-1)]&(1<<(i&63)) != 0
}

// proposalRef computes the ProposalRef of a proposal sent in ac (Section
// 5.2).
func proposalRef(s suite, ac *authenticatedContent) []byte {
	return makeProposalRef(s, marshal(ac))
}

// maxPendingProposals bounds the proposals cached in one epoch, so that a
// member that floods the group cannot grow the others' state without
// limit. A saved state holds at most this many (state.go).
const maxPendingProposals = maxStateProposals

// checkProposalRoom refuses a new proposal when the epoch already caches
// maxPendingProposals; a Commit makes room.
func (g *Group) checkProposalRoom() error {
	if len(g.proposals) >= maxPendingProposals {
		return fmt.Errorf("%w: %d proposals already pending in this epoch", ErrInvalidProposal, len(g.proposals))
	}
	return nil
}

// cacheProposal stores a received or sent proposal for the current epoch.
func (g *Group) cacheProposal(ac *authenticatedContent, updatePriv []byte) []byte {
	ref := proposalRef(g.s, ac)
	if g.findProposal(ref) == nil {
		g.proposals = append(g.proposals, cachedProposal{
			ref:        ref,
			proposal:   *ac.Content.Proposal,
			sender:     ac.Content.Sender,
			updatePriv: updatePriv,
		})
	}
	return ref
}

// Proposal creation (Section 12.1).

// ProposeAdd returns a proposal message to add the owner of keyPackage.
func (g *Group) ProposeAdd(keyPackage []byte) ([]byte, error) {
	kp, err := parseKeyPackage(keyPackage)
	if err != nil {
		return nil, err
	}
	if err := g.validateKeyPackage(kp, true); err != nil {
		return nil, err
	}
	return g.sendProposal(&Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: *kp}}, nil)
}

// ProposeRemove returns a proposal message to remove the member at leaf.
func (g *Group) ProposeRemove(leaf uint32) ([]byte, error) {
	if g.cur.tree.leafNode(leafIndex(leaf)) == nil {
		return nil, fmt.Errorf("%w: no member at leaf %d", ErrInvalidProposal, leaf)
	}
	return g.sendProposal(&Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: leaf}}, nil)
}

// ProposeUpdate returns a proposal message that replaces this member's
// leaf encryption key (Section 12.1.2).
func (g *Group) ProposeUpdate() ([]byte, error) {
	old := g.cur.tree.leafNode(g.own)
	priv, pub, err := g.s.hpkeGenerateKeyPair()
	if err != nil {
		return nil, err
	}
	ln := *old
	ln.EncryptionKey = pub
	ln.LeafNodeSource = LeafNodeSourceUpdate
	ln.Lifetime = Lifetime{}
	ln.ParentHash = nil
	if err := ln.sign(g.s, g.sigPriv, g.cur.ctx.GroupID, uint32(g.own)); err != nil {
		return nil, err
	}
	return g.sendProposal(&Proposal{ProposalType: ProposalTypeUpdate, Update: &Update{LeafNode: ln}}, priv)
}

// ProposeExternalPSK returns a proposal message that injects the external
// PSK with the given id (which must be in [Config.ExternalPSKs]).
func (g *Group) ProposeExternalPSK(id []byte) ([]byte, error) {
	if _, ok := g.cfg.ExternalPSKs[string(id)]; !ok {
		return nil, fmt.Errorf("%w: external psk %x", ErrMissingPSK, id)
	}
	nonce := make([]byte, g.s.hashLen())
	if _, err := randRead(nonce); err != nil {
		return nil, err
	}
	psk := PreSharedKeyID{PSKType: PSKTypeExternal, PSKID: bytes.Clone(id), PSKNonce: nonce}
	return g.sendProposal(&Proposal{ProposalType: ProposalTypePSK, PreSharedKey: &PreSharedKey{PSK: psk}}, nil)
}

// ProposeGroupContextExtensions returns a proposal message that replaces
// the group's extensions (Section 12.1.7).
func (g *Group) ProposeGroupContextExtensions(exts []Extension) ([]byte, error) {
	return g.sendProposal(&Proposal{ProposalType: ProposalTypeGroupContextExtensions,
		GroupContextExtensions: &GroupContextExtensions{Extensions: slices.Clone(exts)}}, nil)
}

// sendProposal frames, signs and protects an own proposal, and caches it
// so that a later Commit (by anyone) can include it by reference.
func (g *Group) sendProposal(p *Proposal, updatePriv []byte) ([]byte, error) {
	if err := g.checkCanSend(); err != nil {
		return nil, err
	}
	if err := g.checkProposalRoom(); err != nil {
		return nil, err
	}
	sender := Sender{SenderType: SenderTypeMember, LeafIndex: uint32(g.own)}
	if p.ProposalType != ProposalTypeUpdate {
		if err := g.validateSingleProposal(p, sender); err != nil {
			return nil, err
		}
	}
	if err := g.checkProposalPolicy(sender, p); err != nil {
		return nil, err
	}
	fc := &framedContent{
		GroupID:     g.cur.ctx.GroupID,
		Epoch:       g.cur.ctx.Epoch,
		Sender:      sender,
		ContentType: ContentTypeProposal,
		Proposal:    p,
	}
	msg, ac, err := g.protectHandshake(fc)
	if err != nil {
		return nil, err
	}
	g.cacheProposal(ac, updatePriv)
	return msg, nil
}

// PendingProposal is a proposal received or sent in the current epoch
// that no Commit has included yet.
type PendingProposal struct {
	// Ref is the proposal's ProposalRef (Section 5.2).
	Ref      []byte
	Sender   Sender
	Proposal Proposal
}

// PendingProposals returns the proposals pending in the current epoch, in
// the order they arrived. Until a Commit ends the epoch, [Group.Protect]
// refuses to send (Section 12.4). A Commit by this member includes those
// that are valid and fit together, and reports the others in
// [CommitResult.Dropped].
func (g *Group) PendingProposals() []PendingProposal {
	out := make([]PendingProposal, len(g.proposals))
	for i := range g.proposals {
		cp := &g.proposals[i]
		out[i] = PendingProposal{Ref: bytes.Clone(cp.ref), Sender: cp.sender}
		// A deep copy, so that the caller cannot change the cache. (Every
		// cached proposal was decoded or built to encode, so it decodes.)
		if err := unmarshal(marshal(&cp.proposal), &out[i].Proposal); err != nil {
			out[i].Proposal = Proposal{ProposalType: cp.proposal.ProposalType}
		}
	}
	return out
}

// DiscardProposals drops the pending proposals with the given refs and
// reports how many it dropped; unknown refs are ignored. This member then
// holds them invalid, as Section 12.2 lets an application do with
// proposals it does not authorize: a Commit from another member that
// includes one of them is rejected.
func (g *Group) DiscardProposals(refs ...[]byte) int {
	n := 0
	g.proposals = slices.DeleteFunc(g.proposals, func(cp cachedProposal) bool {
		for _, r := range refs {
			if bytes.Equal(cp.ref, r) {
				clear(cp.updatePriv)
				n++
				return true
			}
		}
		return false
	})
	return n
}

// ClearPendingProposals drops every pending proposal, as
// [Group.DiscardProposals] does.
func (g *Group) ClearPendingProposals() {
	for i := range g.proposals {
		clear(g.proposals[i].updatePriv)
	}
	g.proposals = nil
}
