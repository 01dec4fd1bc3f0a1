package mls

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
func (g *Group) resolveProposals(c *Commit, committer Sender) ([]committedProposal, error) {
	out := make([]committedProposal, 0, len(c.Proposals))
	for i := range c.Proposals {
		por := &c.Proposals[i]
		switch por.Type {
		case ProposalOrRefTypeProposal:
			out = append(out, committedProposal{proposal: por.Proposal, sender: committer})
		case ProposalOrRefTypeReference:
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

// validateProposals checks a proposal list against Section 12.2 and each
// proposal against Section 12.1, for a Commit by committer (a member, or
// for an external Commit the joiner). It does not change anything.
func (g *Group) validateProposals(props []committedProposal, committer Sender, external bool) error {
	tree := g.cur.tree
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidProposal}, args...)...)
	}
	if external {
		var inits, removes int
		for _, p := range props {
			if p.byRef {
				return bad("external commit includes a proposal by reference")
			}
			switch p.proposal.ProposalType {
			case ProposalTypeExternalInit:
				inits++
			case ProposalTypeRemove:
				removes++
			case ProposalTypePSK:
			default:
				return bad("external commit includes a %d proposal", p.proposal.ProposalType)
			}
		}
		if inits != 1 || removes > 1 {
			return bad("external commit needs one ExternalInit and at most one Remove")
		}
	}
	// The KeyPackage signatures of a large Add list dominate the cost of
	// validation; they are independent, so check them in parallel.
	var adds []*KeyPackage
	for i := range props {
		if pr := &props[i].proposal; pr.ProposalType == ProposalTypeAdd && pr.Add != nil {
			adds = append(adds, &pr.Add.KeyPackage)
		}
	}
	err := parallelFor(len(adds), func(i int) error {
		kp := adds[i]
		if kp.Version != ProtocolVersionMLS10 || kp.CipherSuite != g.s.id() {
			return fmt.Errorf("%w: key package version or cipher suite differs from the group's", ErrInvalidLeafNode)
		}
		if err := kp.verifySignatures(g.s); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidLeafNode, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var memberKeys map[string]bool // signature keys in the tree, built on first Add
	touched := make(map[leafIndex]bool)
	addKeys := make(map[string]bool)
	var pskIDs [][]byte
	var gce, reinit int
	removedSig := make(map[string]bool)
	for _, p := range props {
		if p.proposal.ProposalType == ProposalTypeRemove && p.proposal.Remove != nil {
			if ln := tree.leafNode(leafIndex(p.proposal.Remove.Removed)); ln != nil {
				removedSig[string(ln.SignatureKey)] = true
			}
		}
	}
	for _, p := range props {
		pr := &p.proposal
		// Proposals from non-members: only Add from new_member_proposal
		// or external senders reach here; both are checked like any Add.
		switch pr.ProposalType {
		case ProposalTypeAdd:
			if pr.Add == nil {
				return bad("empty add")
			}
			kp := &pr.Add.KeyPackage
			if err := g.validateKeyPackageContent(kp, false); err != nil {
				return err
			}
			sk := string(kp.LeafNode.SignatureKey)
			if addKeys[sk] {
				return bad("two adds for the same client")
			}
			addKeys[sk] = true
			if memberKeys == nil {
				memberKeys = tree.signatureKeys()
			}
			if !removedSig[sk] && memberKeys[sk] {
				return bad("add of a client already in the group")
			}
		case ProposalTypeUpdate:
			if pr.Update == nil || p.sender.SenderType != SenderTypeMember {
				return bad("update not sent by a member")
			}
			l := leafIndex(p.sender.LeafIndex)
			if !external && committer.SenderType == SenderTypeMember && l == leafIndex(committer.LeafIndex) {
				return bad("commit includes an update by the committer")
			}
			if touched[l] {
				return bad("several updates or removes for leaf %d", l)
			}
			touched[l] = true
			old := tree.leafNode(l)
			if old == nil {
				return bad("update from blank leaf %d", l)
			}
			ln := &pr.Update.LeafNode
			if ln.LeafNodeSource != LeafNodeSourceUpdate {
				return fmt.Errorf("%w: update leaf source is not update", ErrInvalidLeafNode)
			}
			if bytes.Equal(ln.EncryptionKey, old.EncryptionKey) {
				return fmt.Errorf("%w: update keeps the encryption key", ErrInvalidLeafNode)
			}
			if err := g.validateLeafNode(ln, l, g.cur.ctx.Extensions, true); err != nil {
				return err
			}
		case ProposalTypeRemove:
			if pr.Remove == nil {
				return bad("empty remove")
			}
			l := leafIndex(pr.Remove.Removed)
			if tree.leafNode(l) == nil {
				return bad("remove of blank leaf %d", l)
			}
			if !external && committer.SenderType == SenderTypeMember && l == leafIndex(committer.LeafIndex) {
				return bad("commit removes the committer")
			}
			if touched[l] {
				return bad("several updates or removes for leaf %d", l)
			}
			touched[l] = true
		case ProposalTypePSK:
			if pr.PreSharedKey == nil {
				return bad("empty psk")
			}
			id := &pr.PreSharedKey.PSK
			if len(id.PSKNonce) != g.s.hashLen() {
				return bad("psk nonce has the wrong length")
			}
			if id.PSKType == PSKTypeResumption && id.Usage != ResumptionPSKUsageApplication {
				return bad("resumption psk with usage %d in a commit", id.Usage)
			}
			enc := marshal(id)
			for _, o := range pskIDs {
				if bytes.Equal(o, enc) {
					return bad("psk listed twice")
				}
			}
			pskIDs = append(pskIDs, enc)
		case ProposalTypeGroupContextExtensions:
			gce++
			if gce > 1 {
				return bad("several group context extensions proposals")
			}
			if pr.GroupContextExtensions == nil || hasDuplicateExtensions(pr.GroupContextExtensions.Extensions) {
				return bad("group context extensions with duplicates")
			}
		case ProposalTypeReInit:
			reinit++
		case ProposalTypeExternalInit:
			if !external {
				return bad("external init in a regular commit")
			}
		default:
			return bad("unsupported proposal type %d", pr.ProposalType)
		}
	}
	if reinit > 0 && len(props) != 1 {
		return bad("reinit together with other proposals")
	}
	return nil
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
	var rc RequiredCapabilities
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

// signatureKeys returns the set of the members' signature keys.
func (t *ratchetTree) signatureKeys() map[string]bool {
	keys := make(map[string]bool, t.memberCount())
	for l := leafIndex(0); uint32(l) < t.size(); l++ {
		if ln := t.leafNode(l); ln != nil {
			keys[string(ln.SignatureKey)] = true
		}
	}
	return keys
}

// parallelFor runs f(0), ..., f(n-1) on up to GOMAXPROCS goroutines and
// returns the first error. Every goroutine it starts has finished when it
// returns.
func parallelFor(n int, f func(i int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n/8) // small jobs run inline
	if workers <= 1 {
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// validateKeyPackage makes the checks of Section 10.1 on a KeyPackage that
// is to be added to this group. own is true for KeyPackages this member
// adds, whose lifetime is always checked (Section 7.3).
func (g *Group) validateKeyPackage(kp *KeyPackage, own bool) error {
	if kp.Version != ProtocolVersionMLS10 || kp.CipherSuite != g.s.id() {
		return fmt.Errorf("%w: key package version or cipher suite differs from the group's", ErrInvalidLeafNode)
	}
	if err := kp.verifySignatures(g.s); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidLeafNode, err)
	}
	return g.validateKeyPackageContent(kp, own)
}

// validateKeyPackageContent is validateKeyPackage without the version,
// suite and signature checks.
func (g *Group) validateKeyPackageContent(kp *KeyPackage, own bool) error {
	if bytes.Equal(kp.InitKey, kp.LeafNode.EncryptionKey) {
		return fmt.Errorf("%w: init key equals the encryption key", ErrInvalidLeafNode)
	}
	if own || !g.cfg.SkipLifetimeCheck {
		if err := checkLifetime(&kp.LeafNode, &g.cfg); err != nil {
			return err
		}
	}
	return g.checkLeafCompat(&kp.LeafNode, g.cur.ctx.Extensions)
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

// checkLeafCompat checks that a leaf fits the group (Section 7.3): its
// extensions are in its capabilities, it supports the group's extensions
// and required capabilities, it supports the credential types in use, and
// every member supports its credential type.
func (g *Group) checkLeafCompat(ln *LeafNode, exts []Extension) error {
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
// member supports.
type credentialSummary struct {
	inUse          []CredentialType
	supportedByAll []CredentialType
}

// credentials returns the credential summary of the current tree, computed
// once per epoch.
func (g *Group) credentials() *credentialSummary {
	if g.creds != nil && g.credsTree == g.cur.tree {
		return g.creds
	}
	t := g.cur.tree
	cs := &credentialSummary{}
	first := true
	for l := leafIndex(0); uint32(l) < t.size(); l++ {
		m := t.leafNode(l)
		if m == nil {
			continue
		}
		if !slices.Contains(cs.inUse, m.Credential.CredentialType) {
			cs.inUse = append(cs.inUse, m.Credential.CredentialType)
		}
		if first {
			cs.supportedByAll = slices.Clone(m.Capabilities.Credentials)
			first = false
			continue
		}
		cs.supportedByAll = slices.DeleteFunc(cs.supportedByAll, func(ct CredentialType) bool {
			return !slices.Contains(m.Capabilities.Credentials, ct)
		})
	}
	g.creds, g.credsTree = cs, t
	return cs
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
	for i := range tree.nodes {
		x := nodeIndex(i)
		n := tree.nodes[i]
		if n.blank() {
			continue
		}
		if y, ok := enc[string(n.encryptionKey())]; ok && y != x {
			return fmt.Errorf("%w: encryption key of node %d already in the tree", ErrInvalidCommit, y)
		}
		if n.Leaf != nil {
			if y, ok := sig[string(n.Leaf.SignatureKey)]; ok && y != x {
				return fmt.Errorf("%w: signature key of node %d already in the tree", ErrInvalidCommit, y)
			}
		}
	}
	return nil
}

// proposalRef computes the ProposalRef of a proposal sent in ac (Section
// 5.2).
func proposalRef(s suite, ac *AuthenticatedContent) []byte {
	return makeProposalRef(s, marshal(ac))
}

// cacheProposal stores a received or sent proposal for the current epoch.
func (g *Group) cacheProposal(ac *AuthenticatedContent, updatePriv []byte) []byte {
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

// validateSingleProposal checks a received proposal on its own (Section
// 12.1), before caching it. List rules are checked at commit time.
func (g *Group) validateSingleProposal(p *Proposal, sender Sender) error {
	switch p.ProposalType {
	case ProposalTypeExternalInit:
		return fmt.Errorf("%w: external init sent as a proposal", ErrInvalidProposal)
	case ProposalTypeUpdate:
		if sender.SenderType != SenderTypeMember {
			return fmt.Errorf("%w: update from a non-member", ErrInvalidProposal)
		}
	}
	if sender.SenderType == SenderTypeNewMemberProposal && p.ProposalType != ProposalTypeAdd {
		return fmt.Errorf("%w: new member proposals must be adds", ErrInvalidProposal)
	}
	return g.validateProposals([]committedProposal{{proposal: *p, sender: sender}}, Sender{SenderType: SenderTypeExternal}, false)
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
	sender := Sender{SenderType: SenderTypeMember, LeafIndex: uint32(g.own)}
	if p.ProposalType != ProposalTypeUpdate {
		if err := g.validateSingleProposal(p, sender); err != nil {
			return nil, err
		}
	}
	fc := &FramedContent{
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
