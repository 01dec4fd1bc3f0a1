package mls

import (
	"bytes"
	"fmt"
)

// This file checks proposals (RFC 9420, Section 12.1) and proposal lists
// (Section 12.2). A proposalList grows one proposal at a time: each
// proposal is checked on its own and against those already in the list,
// and joins only if both hold, so the list is valid at every step. A
// member processing a Commit runs the Commit's proposals through one and
// rejects the Commit at the first that does not fit; a member creating a
// Commit offers it the cached proposals one by one and leaves out those
// that do not fit (Section 12.4: include the valid proposals "as long as
// this results in a valid proposal list").
//
// Removes are offered first, then a GroupContextExtensions proposal, then
// the rest, whatever their order in the Commit: an Add may bring back a
// client that the same Commit removes, and the new extensions are the
// ones that Adds and Updates must support (Section 12.3). Every other
// rule is symmetric, so the outcome does not depend on the order within
// those groups.

// proposalList is a proposal list under construction or under check.
type proposalList struct {
	g         *Group
	committer Sender
	external  bool // an external Commit (Section 12.2, second list)
	// single is set for one proposal checked when it is received: the
	// rules that need the whole Commit wait until one includes it.
	single bool
	// creating is set for the list of a Commit this member creates. It
	// adds the checks that receivers make only on the new tree (unique
	// encryption keys), so that no receiver can reject what was chosen.
	creating bool

	exts  []Extension // GroupContext extensions in effect for the list
	props []committedProposal

	removed map[leafIndex]bool // leaves of Removes
	touched map[leafIndex]bool // leaves of Updates and Removes
	creds   map[string]bool    // credentials of Adds and Updates
	sigKeys map[string]bool    // signature keys of Adds and Updates
	encKeys map[string]bool    // encryption keys of Adds and Updates
	psks    map[string]bool    // encoded PreSharedKeyIDs
	gce     bool
	reinit  bool
	inits   int
	removes int
}

func (g *Group) newProposalList(committer Sender, external bool) *proposalList {
	return &proposalList{
		g:         g,
		committer: committer,
		external:  external,
		exts:      g.cur.ctx.Extensions,
		removed:   make(map[leafIndex]bool),
		touched:   make(map[leafIndex]bool),
		creds:     make(map[string]bool),
		sigKeys:   make(map[string]bool),
		encKeys:   make(map[string]bool),
		psks:      make(map[string]bool),
	}
}

func invalidProposal(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidProposal}, args...)...)
}

// add appends p to the list if it is valid on its own and with the
// proposals already in the list. On error the list is unchanged. The
// signatures of an Add's KeyPackage must have been checked
// (verifyAddSignatures).
func (l *proposalList) add(p committedProposal) error {
	pr := &p.proposal
	if err := l.checkSenderAndForm(&p); err != nil {
		return err
	}
	var err error
	switch pr.ProposalType {
	case ProposalTypeAdd:
		err = l.checkAdd(pr.Add)
	case ProposalTypeUpdate:
		err = l.checkUpdate(leafIndex(p.sender.LeafIndex), pr.Update)
	case ProposalTypeRemove:
		err = l.checkRemove(leafIndex(pr.Remove.Removed))
	case ProposalTypePSK:
		err = l.checkPSK(&pr.PreSharedKey.PSK)
	case ProposalTypeReInit:
		err = l.checkReInit(pr.ReInit)
	case ProposalTypeExternalInit:
		err = l.checkExternalInit()
	case ProposalTypeGroupContextExtensions:
		err = l.checkGroupContextExtensions(pr.GroupContextExtensions)
	default:
		err = invalidProposal("unsupported proposal type %d", pr.ProposalType)
	}
	if err != nil {
		return err
	}
	l.record(&p)
	l.props = append(l.props, p)
	return nil
}

// checkSenderAndForm checks the rules that hold for any proposal type:
// its body is present, the sender may send it, a ReInit stands alone, and
// an external Commit holds only what Section 12.2 allows it.
func (l *proposalList) checkSenderAndForm(p *committedProposal) error {
	pr := &p.proposal
	if !proposalBodyPresent(pr) {
		return invalidProposal("proposal of type %d without a body", pr.ProposalType)
	}
	switch p.sender.SenderType {
	case SenderTypeMember:
	case SenderTypeNewMemberProposal:
		// Section 12.1.8: a new member may only propose to add itself.
		if pr.ProposalType != ProposalTypeAdd {
			return invalidProposal("new member proposals must be adds")
		}
	case SenderTypeExternal:
		// Section 12.1.8: the types an external sender may propose.
		switch pr.ProposalType {
		case ProposalTypeAdd, ProposalTypeRemove, ProposalTypePSK, ProposalTypeReInit, ProposalTypeGroupContextExtensions:
		default:
			return invalidProposal("proposal type %d from an external sender", pr.ProposalType)
		}
	case SenderTypeNewMemberCommit:
		if !l.external || p.byRef {
			return invalidProposal("proposal from a new member commit sender")
		}
	default:
		return invalidProposal("proposal from sender type %d", p.sender.SenderType)
	}
	// Section 12.2: a ReInit together with any other proposal.
	if l.reinit || (pr.ProposalType == ProposalTypeReInit && len(l.props) > 0) {
		return invalidProposal("reinit together with other proposals")
	}
	if l.external {
		if p.byRef {
			return invalidProposal("external commit includes a proposal by reference")
		}
		switch pr.ProposalType {
		case ProposalTypeExternalInit, ProposalTypePSK:
		case ProposalTypeGroupContextExtensions:
			// Not in Section 12.2's list for external Commits: only where
			// the application asks for it (Config.ExternalCommitExtensions).
			if !l.g.cfg.ExternalCommitExtensions {
				return invalidProposal("external commit includes a %d proposal", pr.ProposalType)
			}
		case ProposalTypeRemove:
			if l.removes > 0 {
				return invalidProposal("external commit with more than one remove")
			}
		default:
			return invalidProposal("external commit includes a %d proposal", pr.ProposalType)
		}
	}
	return nil
}

func proposalBodyPresent(p *Proposal) bool {
	switch p.ProposalType {
	case ProposalTypeAdd:
		return p.Add != nil
	case ProposalTypeUpdate:
		return p.Update != nil
	case ProposalTypeRemove:
		return p.Remove != nil
	case ProposalTypePSK:
		return p.PreSharedKey != nil
	case ProposalTypeReInit:
		return p.ReInit != nil
	case ProposalTypeExternalInit:
		return p.ExternalInit != nil
	case ProposalTypeGroupContextExtensions:
		return p.GroupContextExtensions != nil
	}
	return true // unknown types are refused by add
}

// checkAdd checks an Add (Sections 12.1.1 and 12.2): a valid KeyPackage,
// for a client neither added twice nor already in the group (unless the
// list removes it). A client is its credential, compared by its whole
// encoding (one credential, one leaf), or its signature key.
func (l *proposalList) checkAdd(a *Add) error {
	kp := &a.KeyPackage
	if err := l.g.validateKeyPackageContent(kp, false, l.exts); err != nil {
		return err
	}
	ln := &kp.LeafNode
	cred := credentialKey(&ln.Credential)
	if l.creds[cred] {
		return fmt.Errorf("%w: %w: two adds of the same credential", ErrInvalidProposal, ErrInvalidCredential)
	}
	if l.sigKeys[string(ln.SignatureKey)] {
		return invalidProposal("two adds or updates with the same signature key")
	}
	if l.creating {
		if err := l.checkNewEncryptionKey(ln.EncryptionKey); err != nil {
			return err
		}
	}
	if l.single {
		return nil
	}
	idx := l.g.memberIndex()
	if m, ok := idx.creds[cred]; ok && !l.removed[m] {
		return fmt.Errorf("%w: %w: add of a client already in the group (leaf %d)", ErrInvalidProposal, ErrInvalidCredential, m)
	}
	if m, ok := idx.sigKeys[string(ln.SignatureKey)]; ok && !l.removed[m] {
		return invalidProposal("add of a signature key already in the group (leaf %d)", m)
	}
	return nil
}

// checkUpdate checks an Update from the member at leaf (Sections 12.1.2,
// 7.3 and 12.2): a valid leaf for an Update that keeps the member's
// credential (or one [Config.ValidateSuccessor] allows), not from the
// committer, and the only Update or Remove of its leaf.
func (l *proposalList) checkUpdate(leaf leafIndex, u *Update) error {
	if l.committer.SenderType == SenderTypeMember && leaf == leafIndex(l.committer.LeafIndex) {
		return invalidProposal("commit includes an update by the committer")
	}
	if l.touched[leaf] {
		return invalidProposal("several updates or removes for leaf %d", leaf)
	}
	old := l.g.cur.tree.leafNode(leaf)
	if old == nil {
		return invalidProposal("update from blank leaf %d", leaf)
	}
	ln := &u.LeafNode
	if ln.LeafNodeSource != LeafNodeSourceUpdate {
		return fmt.Errorf("%w: update leaf source is not update", ErrInvalidLeafNode)
	}
	if bytes.Equal(ln.EncryptionKey, old.EncryptionKey) {
		return fmt.Errorf("%w: update keeps the encryption key", ErrInvalidLeafNode)
	}
	if err := l.g.validateLeafNode(ln, leaf, l.exts, true); err != nil {
		return err
	}
	if err := l.g.cfg.checkSuccessor(&old.Credential, &ln.Credential); err != nil {
		return err
	}
	if !sameCredential(&old.Credential, &ln.Credential) {
		cred := credentialKey(&ln.Credential)
		if l.creds[cred] {
			return fmt.Errorf("%w: %w: update to a credential the list adds", ErrInvalidProposal, ErrInvalidCredential)
		}
		if m, ok := l.g.memberIndex().creds[cred]; ok && m != leaf {
			return fmt.Errorf("%w: %w: leaf %d holds the same credential", ErrInvalidLeafNode, ErrInvalidCredential, m)
		}
	}
	if !bytes.Equal(ln.SignatureKey, old.SignatureKey) {
		if m, ok := l.g.memberIndex().sigKeys[string(ln.SignatureKey)]; ok || l.sigKeys[string(ln.SignatureKey)] {
			return invalidProposal("update to a signature key already in the group (leaf %d)", m)
		}
	}
	if l.creating {
		return l.checkNewEncryptionKey(ln.EncryptionKey)
	}
	return nil
}

// checkRemove checks a Remove (Sections 12.1.3 and 12.2): of a member,
// not of the committer, and the only Update or Remove of its leaf.
func (l *proposalList) checkRemove(leaf leafIndex) error {
	if l.g.cur.tree.leafNode(leaf) == nil {
		return invalidProposal("remove of blank leaf %d", leaf)
	}
	if l.committer.SenderType == SenderTypeMember && leaf == leafIndex(l.committer.LeafIndex) {
		return invalidProposal("commit removes the committer")
	}
	if l.touched[leaf] {
		return invalidProposal("several updates or removes for leaf %d", leaf)
	}
	return nil
}

// checkPSK checks a PreSharedKey proposal (Sections 12.1.4 and 12.2). A
// member creating a Commit also needs the PSK's value (Section 12.4.2).
func (l *proposalList) checkPSK(id *PreSharedKeyID) error {
	if len(id.PSKNonce) != l.g.s.hashLen() {
		return invalidProposal("psk nonce has the wrong length")
	}
	if id.PSKType == PSKTypeResumption && id.Usage != ResumptionPSKUsageApplication {
		return invalidProposal("resumption psk with usage %d in a commit", id.Usage)
	}
	if l.psks[string(marshal(id))] {
		return invalidProposal("psk listed twice")
	}
	if l.creating {
		if _, err := l.g.lookupPSK(id); err != nil {
			return err
		}
	}
	return nil
}

// checkReInit checks a ReInit (Section 12.1.5). This package cannot carry
// out a reinitialization, so a member never commits one.
func (l *proposalList) checkReInit(r *ReInit) error {
	if r.Version < l.g.cur.ctx.Version {
		return invalidProposal("reinit to an older protocol version")
	}
	if l.creating {
		return invalidProposal("reinit commits are not supported")
	}
	return nil
}

// checkExternalInit checks an ExternalInit (Sections 12.1.6 and 12.2): it
// belongs in an external Commit only, once.
func (l *proposalList) checkExternalInit() error {
	if !l.external {
		return invalidProposal("external init in a regular commit")
	}
	if l.inits > 0 {
		return invalidProposal("external commit with more than one external init")
	}
	return nil
}

// checkGroupContextExtensions checks a GroupContextExtensions proposal
// (Sections 12.1.7 and 12.2): the only one in the list, with distinct
// extension types, supported by every member that stays (Section 11.1),
// and with each new external sender's credential validated (Section
// 5.3.1).
func (l *proposalList) checkGroupContextExtensions(gce *GroupContextExtensions) error {
	if l.gce {
		return invalidProposal("several group context extensions proposals")
	}
	if hasDuplicateExtensions(gce.Extensions) {
		return invalidProposal("group context extensions with duplicates")
	}
	tree := l.g.cur.tree
	for m := leafIndex(0); uint32(m) < tree.size(); m++ {
		ln := tree.leafNode(m)
		if ln == nil || l.removed[m] {
			continue
		}
		if err := checkLeafSupports(ln, gce.Extensions); err != nil {
			return invalidProposal("leaf %d: %v", m, err)
		}
	}
	for _, p := range l.props {
		if p.proposal.ProposalType == ProposalTypeAdd {
			if err := checkLeafSupports(&p.proposal.Add.KeyPackage.LeafNode, gce.Extensions); err != nil {
				return invalidProposal("added leaf: %v", err)
			}
		}
	}
	return l.g.validateExternalSenders(gce.Extensions)
}

// checkNewEncryptionKey checks that a leaf's encryption key appears
// neither in the tree nor elsewhere in the list (Section 7.3). Receivers
// check this on the new tree (checkNewKeysUnique); the committer checks it
// up front, against every node of the current tree, which is stricter.
func (l *proposalList) checkNewEncryptionKey(key []byte) error {
	if _, ok := l.g.memberIndex().encKeys[string(key)]; ok || l.encKeys[string(key)] {
		return fmt.Errorf("%w: encryption key already in use", ErrInvalidLeafNode)
	}
	return nil
}

// record updates the list's state for p, which passed its checks.
func (l *proposalList) record(p *committedProposal) {
	pr := &p.proposal
	switch pr.ProposalType {
	case ProposalTypeAdd:
		ln := &pr.Add.KeyPackage.LeafNode
		l.creds[credentialKey(&ln.Credential)] = true
		l.sigKeys[string(ln.SignatureKey)] = true
		l.encKeys[string(ln.EncryptionKey)] = true
	case ProposalTypeUpdate:
		ln := &pr.Update.LeafNode
		l.touched[leafIndex(p.sender.LeafIndex)] = true
		l.creds[credentialKey(&ln.Credential)] = true
		l.sigKeys[string(ln.SignatureKey)] = true
		l.encKeys[string(ln.EncryptionKey)] = true
	case ProposalTypeRemove:
		l.touched[leafIndex(pr.Remove.Removed)] = true
		l.removed[leafIndex(pr.Remove.Removed)] = true
		l.removes++
	case ProposalTypePSK:
		l.psks[string(marshal(&pr.PreSharedKey.PSK))] = true
	case ProposalTypeReInit:
		l.reinit = true
	case ProposalTypeExternalInit:
		l.inits++
	case ProposalTypeGroupContextExtensions:
		l.gce = true
		l.exts = pr.GroupContextExtensions.Extensions
	}
}

// validatePhase orders the proposals of a list for checking: Removes,
// then a GroupContextExtensions proposal, then the rest (see the top of
// this file).
func validatePhase(t ProposalType) int {
	switch t {
	case ProposalTypeRemove:
		return 0
	case ProposalTypeGroupContextExtensions:
		return 1
	}
	return 2
}

// validateProposals checks the proposal list of a Commit by committer (a
// member, or for an external Commit the joiner) against Sections 12.1 and
// 12.2. It does not change anything.
func (g *Group) validateProposals(props []committedProposal, committer Sender, external bool) error {
	if err := g.verifyAddSignatures(props); err != nil {
		return err
	}
	l := g.newProposalList(committer, external)
	for phase := range 3 {
		for _, p := range props {
			if validatePhase(p.proposal.ProposalType) != phase {
				continue
			}
			if err := l.add(p); err != nil {
				return err
			}
		}
	}
	if external && l.inits != 1 {
		return invalidProposal("external commit needs one ExternalInit and at most one Remove")
	}
	return nil
}

// verifyAddSignatures checks the version, suite and signatures of the
// KeyPackages that props add by value (Section 10.1); those included by
// reference were checked when they were received. They dominate the cost
// of validating a large Add list and are independent, so they are checked
// in parallel.
func (g *Group) verifyAddSignatures(props []committedProposal) error {
	var adds []*KeyPackage
	for i := range props {
		if pr := &props[i].proposal; pr.ProposalType == ProposalTypeAdd && pr.Add != nil && !props[i].byRef {
			adds = append(adds, &pr.Add.KeyPackage)
		}
	}
	return parallelFor(len(adds), minParallelSignatures, func(i int) error {
		return g.verifyKeyPackage(adds[i])
	})
}

// verifyKeyPackage makes the cryptographic checks of Section 10.1: version,
// suite, and both signatures.
func (g *Group) verifyKeyPackage(kp *KeyPackage) error {
	if kp.Version != ProtocolVersionMLS10 || kp.CipherSuite != g.s.id() {
		return fmt.Errorf("%w: key package version or cipher suite differs from the group's", ErrInvalidLeafNode)
	}
	if err := kp.verifySignatures(g.s); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidLeafNode, err)
	}
	return nil
}

// validateSingleProposal checks a proposal when it is received or sent
// (Section 12.1), before caching it. The list rules that need the whole
// Commit are checked when a Commit includes it.
func (g *Group) validateSingleProposal(p *Proposal, sender Sender) error {
	cp := committedProposal{proposal: *p, sender: sender}
	if err := g.verifyAddSignatures([]committedProposal{cp}); err != nil {
		return err
	}
	l := g.newProposalList(Sender{}, false)
	l.single = true
	return l.add(cp)
}

// validateExternalSenders checks every external sender that exts brings
// in: its signature key must be well-formed for the suite (Section 5.1.1),
// and the application validates its credential (Section 5.3.1: "When an
// external_senders extension is added to the group", or updated).
func (g *Group) validateExternalSenders(exts []Extension) error {
	data, ok := findExtension(exts, ExtensionTypeExternalSenders)
	if !ok {
		return nil
	}
	if old, ok := findExtension(g.cur.ctx.Extensions, ExtensionTypeExternalSenders); ok && bytes.Equal(old, data) {
		return nil
	}
	var es externalSenders
	if err := unmarshal(data, &es); err != nil {
		return invalidProposal("malformed external_senders")
	}
	for i := range es.Senders {
		if err := g.s.checkSignaturePublicKey(es.Senders[i].SignatureKey); err != nil {
			return fmt.Errorf("%w: external sender %d: %w", ErrInvalidProposal, i, err)
		}
	}
	if g.cfg.ValidateCredential == nil {
		return nil
	}
	for i := range es.Senders {
		if err := g.cfg.validateCredential(&es.Senders[i].Credential, es.Senders[i].SignatureKey); err != nil {
			return fmt.Errorf("%w: external sender %d: %w", ErrInvalidProposal, i, err)
		}
	}
	return nil
}

// memberIndex is what the uniqueness rules (Sections 7.3 and 12.2) need
// to know about the current tree: which leaf holds each credential and
// signature key, and which encryption keys its nodes hold.
type memberIndex struct {
	creds   map[string]leafIndex
	sigKeys map[string]leafIndex
	encKeys map[string]nodeIndex
}

// memberIndex returns the index of the current tree, built once per epoch
// on first use.
func (g *Group) memberIndex() *memberIndex {
	t := g.cur.tree
	if g.index != nil && g.indexTree == t {
		return g.index
	}
	n := int(t.memberCount())
	idx := &memberIndex{
		creds:   make(map[string]leafIndex, n),
		sigKeys: make(map[string]leafIndex, n),
		encKeys: make(map[string]nodeIndex, 2*n),
	}
	for i := range t.width() {
		x := nodeIndex(i)
		nd := t.node(x)
		if nd.blank() {
			continue
		}
		idx.encKeys[string(nd.encryptionKey())] = x
		if nd.Leaf != nil {
			l := leafIndex(x / 2)
			idx.creds[credentialKey(&nd.Leaf.Credential)] = l
			idx.sigKeys[string(nd.Leaf.SignatureKey)] = l
		}
	}
	g.index, g.indexTree = idx, t
	return idx
}
