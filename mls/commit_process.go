package mls

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// This file processes incoming messages (RFC 9420, Section 6) and Commits
// (Section 12.4.2). Processing is all-or-nothing: every check runs against
// copies of the tree and context, and the group moves to the new epoch
// only after the confirmation tag has verified. A message that fails any
// check leaves the group as it was (the one exception, inherent to
// Section 9.2, is that the ratchet key of a PrivateMessage that decrypted
// and carries its sender's valid signature is consumed even when a later
// check of its Commit or proposal fails).

// MessageKind says what a processed message was.
type MessageKind int

const (
	// KindApplication is application data.
	KindApplication MessageKind = iota + 1
	// KindProposal is a proposal, now cached for a later Commit.
	KindProposal
	// KindCommit is a Commit; the group is in the epoch it created.
	KindCommit
)

// Received is a processed message.
type Received struct {
	Kind MessageKind
	// Epoch is the epoch the message was sent in.
	Epoch uint64
	// Sender is the sending member's leaf index (for members), and
	// SenderIdentity its did: string. For external commits Sender is the
	// joiner's new leaf.
	Sender         uint32
	SenderIdentity string
	// Data is the application data (KindApplication).
	Data []byte
	// AuthenticatedData is the message's authenticated_data.
	AuthenticatedData []byte
	// Removed is set when a Commit removed this member.
	Removed bool
	// ProposalRef is the ProposalRef of a KindProposal (Section 5.2), as
	// listed by [Group.PendingProposals].
	ProposalRef []byte
}

// Process handles one incoming MLSMessage carrying a PublicMessage or a
// PrivateMessage: application data from the current or a recent epoch, a
// proposal, or a Commit from another member. On error the group state is
// unchanged.
func (g *Group) Process(data []byte) (*Received, error) {
	var m mlsMessage
	if err := unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	var (
		groupID []byte
		epoch   uint64
		ct      ContentType
	)
	switch m.WireFormat {
	case WireFormatPublicMessage:
		groupID, epoch, ct = m.PublicMessage.Content.GroupID, m.PublicMessage.Content.Epoch, m.PublicMessage.Content.ContentType
	case WireFormatPrivateMessage:
		groupID, epoch, ct = m.PrivateMessage.GroupID, m.PrivateMessage.Epoch, m.PrivateMessage.ContentType
	default:
		return nil, errors.New("mls: not a group message")
	}
	if !bytes.Equal(groupID, g.cur.ctx.GroupID) {
		return nil, ErrWrongGroup
	}
	if g.pending != nil && bytes.Equal(data, g.pending.message) {
		// Our own Commit came back from the Delivery Service.
		if err := g.ConfirmCommit(); err != nil {
			return nil, err
		}
		return &Received{Kind: KindCommit, Epoch: epoch, Sender: uint32(g.own), SenderIdentity: g.identityAt(g.cur.tree, g.own)}, nil
	}
	// Handshake messages must be from the current epoch; application
	// messages may come from a window of past epochs (Section 15.3).
	ek := g.cur
	if ct == ContentTypeApplication {
		var err error
		if ek, err = g.epochFor(epoch); err != nil {
			return nil, err
		}
	} else if epoch != g.cur.ctx.Epoch {
		return nil, fmt.Errorf("%w: handshake message for epoch %d (current %d)", ErrWrongEpoch, epoch, g.cur.ctx.Epoch)
	} else if g.removed {
		// A removed member may still read late application messages of
		// the epochs it held, but follows the group no further.
		return nil, ErrRemoved
	} else if ct == ContentTypeProposal {
		// Before decryption, so that a refused proposal consumes no key.
		if err := g.checkProposalRoom(); err != nil {
			return nil, err
		}
	}

	var ac *authenticatedContent
	var err error
	switch m.WireFormat {
	case WireFormatPublicMessage:
		ac, err = ek.prot.unprotectPublic(m.PublicMessage, g.signerKeyFor(ek))
	case WireFormatPrivateMessage:
		ac, err = ek.prot.unprotectPrivate(m.PrivateMessage, g.signerKeyFor(ek))
	}
	if err != nil {
		return nil, mapProtectError(err)
	}
	fc := &ac.Content
	if fc.Sender.SenderType == SenderTypeMember && leafIndex(fc.Sender.LeafIndex) == g.own && ct != ContentTypeApplication {
		return nil, fmt.Errorf("%w: own handshake message", ErrInvalidCommit)
	}
	rec := &Received{Epoch: epoch, AuthenticatedData: fc.AuthenticatedData}
	if fc.Sender.SenderType == SenderTypeMember {
		rec.Sender = fc.Sender.LeafIndex
		rec.SenderIdentity = g.identityAt(ek.tree, leafIndex(fc.Sender.LeafIndex))
	}
	switch fc.ContentType {
	case ContentTypeApplication:
		rec.Kind = KindApplication
		rec.Data = fc.ApplicationData
		return rec, nil
	case ContentTypeProposal:
		if err := g.validateSingleProposal(fc.Proposal, fc.Sender); err != nil {
			return nil, err
		}
		if fc.Sender.SenderType != SenderTypeMember {
			if err := g.checkExternalProposal(fc.Proposal, fc.Sender, fc.AuthenticatedData); err != nil {
				return nil, err
			}
		} else if err := g.checkProposalPolicy(fc.Sender, fc.Proposal); err != nil {
			return nil, err
		}
		rec.Kind = KindProposal
		rec.ProposalRef = bytes.Clone(g.cacheProposal(ac, nil))
		return rec, nil
	case ContentTypeCommit:
		rec.Kind = KindCommit
		newLeaf, err := g.processCommit(ac)
		if err != nil {
			return nil, err
		}
		if fc.Sender.SenderType == SenderTypeNewMemberCommit {
			rec.Sender = uint32(newLeaf)
			rec.SenderIdentity = g.identityAt(g.cur.tree, newLeaf)
		}
		rec.Removed = g.removed
		return rec, nil
	}
	return nil, errors.New("mls: invalid content type")
}

func (g *Group) identityAt(t *ratchetTree, l leafIndex) string {
	if ln := t.leafNode(l); ln != nil && ln.Credential.CredentialType == CredentialTypeBasic {
		return string(ln.Credential.Identity)
	}
	return ""
}

// signerKeyFor returns the function that finds a sender's signature key
// in an epoch (Section 6.1).
func (g *Group) signerKeyFor(ek *epochKeys) signerKey {
	return func(fc *framedContent) ([]byte, error) {
		switch fc.Sender.SenderType {
		case SenderTypeMember:
			ln := ek.tree.leafNode(leafIndex(fc.Sender.LeafIndex))
			if ln == nil {
				return nil, fmt.Errorf("%w: leaf %d", ErrUnknownSender, fc.Sender.LeafIndex)
			}
			return ln.SignatureKey, nil
		case SenderTypeNewMemberCommit:
			if fc.Commit == nil || fc.Commit.Path == nil {
				return nil, fmt.Errorf("%w: external commit without path", ErrInvalidCommit)
			}
			return fc.Commit.Path.LeafNode.SignatureKey, nil
		case SenderTypeNewMemberProposal:
			if fc.Proposal == nil || fc.Proposal.ProposalType != ProposalTypeAdd || fc.Proposal.Add == nil {
				return nil, fmt.Errorf("%w: new member proposal is not an add", ErrInvalidProposal)
			}
			return fc.Proposal.Add.KeyPackage.LeafNode.SignatureKey, nil
		case SenderTypeExternal:
			data, ok := findExtension(ek.ctx.Extensions, ExtensionTypeExternalSenders)
			if !ok {
				return nil, fmt.Errorf("%w: no external senders", ErrUnknownSender)
			}
			var es externalSenders
			if err := unmarshal(data, &es); err != nil || int(fc.Sender.SenderIndex) >= len(es.Senders) {
				return nil, fmt.Errorf("%w: external sender %d", ErrUnknownSender, fc.Sender.SenderIndex)
			}
			return es.Senders[fc.Sender.SenderIndex].SignatureKey, nil
		}
		return nil, ErrUnknownSender
	}
}

// mapProtectError turns the errors of message protection into the
// exported ones.
func mapProtectError(err error) error {
	switch {
	case errors.Is(err, errBadSignature):
		return fmt.Errorf("%w: %v", ErrInvalidSignature, err)
	case errors.Is(err, errBadMembershipTag):
		return fmt.Errorf("%w: %v", ErrInvalidMembershipTag, err)
	case errors.Is(err, errWrongGroup):
		return fmt.Errorf("%w: %v", ErrWrongGroup, err)
	case errors.Is(err, errWrongEpoch):
		return fmt.Errorf("%w: %v", ErrWrongEpoch, err)
	case errors.Is(err, errGenerationConsumed):
		return fmt.Errorf("%w: %v", ErrReplay, err)
	case errors.Is(err, ErrUnknownSender), errors.Is(err, ErrInvalidCommit), errors.Is(err, ErrInvalidProposal):
		return err
	}
	return fmt.Errorf("%w: %v", ErrDecrypt, err)
}

// processCommit applies a verified Commit from another member or an
// external joiner, following the receiver's steps of RFC 9420 §12.4.2
// ("Processing a Commit") in order. Process has done the first three
// before it comes here: the epoch check, unprotecting the message
// (membership MAC or decryption) and the signature (§6.1). It returns the
// committer's leaf. Nothing of g changes unless every check passes, or the
// Commit removes this member.
func (g *Group) processCommit(ac *authenticatedContent) (leafIndex, error) {
	in := &incomingCommit{ac: ac, fc: &ac.Content, c: ac.Content.Commit}
	steps := []func(*incomingCommit) error{
		g.checkCommitSender,       // who may commit, and how
		g.checkCommitProposals,    // §12.2, and whether a path is required
		g.checkCommitterSuccessor, // §5.3.1 and §12.2 for the committer's new leaf
		g.applyCommitProposals,    // §12.1, then the psk_secret (§8.4)
		g.commitInitSecret,        // §8, or §8.3 for an external Commit
		g.applyCommitPath,         // the path: validated, merged, decrypted (§7.5, §7.6)
		g.newCommitContext,        // the tree hash and the transcript hashes (§8.2)
	}
	for _, step := range steps {
		if err := step(in); err != nil {
			return 0, err
		}
	}
	if in.eff.removedSelf {
		return in.committer, g.acceptRemoval(in)
	}
	return in.committer, g.enterCommitEpoch(in)
}

// incomingCommit is the state of one Commit being processed: what each
// step of processCommit finds, for the steps after it. Nothing in it is
// part of the group until enterCommitEpoch installs it.
type incomingCommit struct {
	ac       *authenticatedContent
	fc       *framedContent
	c        *commitContent
	external bool // a new member's external Commit (§12.4.3.2)

	props []committedProposal
	// replaced is the leaf an external Commit's Remove takes the place
	// of (a resync, §12.4.3.2).
	replaced leafIndex
	resync   bool

	tree      *ratchetTree // the new ratchet tree
	gc        GroupContext // the new GroupContext
	eff       *proposalEffects
	pskSecret []byte
	init      *initSecret

	committer    leafIndex
	priv         *privateTree // this member's private keys in the new tree
	commitSecret []byte       // nil without a path: the all-zero vector
	confirmed    []byte       // the new confirmed_transcript_hash
}

// checkCommitSender admits Commits from members and, as PublicMessages
// only, from new members joining by external Commit (§12.4.3.2).
func (g *Group) checkCommitSender(in *incomingCommit) error {
	in.external = in.fc.Sender.SenderType == SenderTypeNewMemberCommit
	if !in.external && in.fc.Sender.SenderType != SenderTypeMember {
		return fmt.Errorf("%w: commit from sender type %d", ErrInvalidCommit, in.fc.Sender.SenderType)
	}
	if in.external && in.ac.WireFormat != WireFormatPublicMessage {
		return fmt.Errorf("%w: external commit must be a PublicMessage", ErrInvalidCommit)
	}
	return nil
}

// checkCommitProposals is §12.4.2's "Verify that the proposals vector is
// valid according to the rules in Section 12.2", the application's rules
// included, and "Verify that the path value is populated if the proposals
// vector contains any Update or Remove proposals, or if it's empty"; an
// external Commit always has a path (§12.4.3.2).
func (g *Group) checkCommitProposals(in *incomingCommit) error {
	props, err := g.resolveProposals(in.c, in.fc.Sender)
	if err != nil {
		return err
	}
	if err := g.validateProposals(props, in.fc.Sender, in.external); err != nil {
		return err
	}
	if !in.external {
		// Section 12.4.2: the proposals must be valid, which includes
		// the application's rules (Section 12.2).
		if err := g.checkCommitPolicy(leafIndex(in.fc.Sender.LeafIndex), props); err != nil {
			return err
		}
	}
	if (pathRequired(props) || in.external) && in.c.Path == nil {
		return fmt.Errorf("%w: path required", ErrInvalidCommit)
	}
	in.props = props
	return nil
}

// checkCommitterSuccessor checks the credential of the committer's new
// leaf against the one it replaces.
func (g *Group) checkCommitterSuccessor(in *incomingCommit) error {
	c := in.c
	if in.external {
		// Section 12.2: the one Remove an external Commit may hold removes
		// an old appearance of the joiner, so the new leaf must meet the
		// criteria of an Update of the removed leaf: the same credential,
		// or an allowed successor (Section 5.3.1).
		for _, p := range in.props {
			if p.proposal.ProposalType != ProposalTypeRemove {
				continue
			}
			in.replaced, in.resync = leafIndex(p.proposal.Remove.Removed), true
			old := g.cur.tree.leafNode(in.replaced)
			if old == nil {
				return fmt.Errorf("%w: external commit removes a blank leaf", ErrInvalidProposal)
			}
			if err := g.cfg.checkSuccessor(&old.Credential, &c.Path.LeafNode.Credential); err != nil {
				return fmt.Errorf("%w: external commit removes another client: %w", ErrInvalidProposal, err)
			}
		}
	} else if c.Path != nil {
		// Section 5.3.1: a committer's new leaf keeps its credential, or
		// presents an allowed successor.
		if old := g.cur.tree.leafNode(leafIndex(in.fc.Sender.LeafIndex)); old != nil {
			if err := g.cfg.checkSuccessor(&old.Credential, &c.Path.LeafNode.Credential); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyCommitProposals is §12.4.2's "Create the new ratchet tree and
// GroupContext by applying the list of proposals to the old ratchet tree
// and GroupContext" (§12.1), on copies. A ReInit is refused. It derives
// the psk_secret (§8.4) from the PreSharedKey proposals in their order,
// which fails for a PSK that is not available, and moves the new
// GroupContext to the next epoch.
func (g *Group) applyCommitProposals(in *incomingCommit) error {
	in.tree = g.nextTree()
	in.gc = *g.cur.ctx
	in.gc.Extensions = slices.Clone(in.gc.Extensions)
	eff, err := g.applyProposals(in.props, in.tree, &in.gc)
	if err != nil {
		return err
	}
	if eff.reinit != nil {
		return fmt.Errorf("%w: reinit is not supported", ErrInvalidCommit)
	}
	in.eff = eff
	if in.pskSecret, err = g.pskSecret(eff.psks); err != nil {
		return err
	}
	in.gc.Epoch++
	return nil
}

// commitInitSecret is the init_secret the new epoch derives from: the
// previous epoch's, or for an external Commit the one its ExternalInit
// proposal's KEM output gives (Section 8.3).
func (g *Group) commitInitSecret(in *incomingCommit) error {
	if in.external {
		extPriv, _, err := g.keys.externalKeyPair()
		if err != nil {
			return err
		}
		in.init, err = externalInitReceiver(g.s, extPriv, in.eff.externalInit.KEMOutput)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommit, err)
		}
		return nil
	}
	var err error
	in.init, err = newInitSecret(g.s, bytes.Clone(g.keys.initSecret))
	return err
}

// applyCommitPath is §12.4.2's "If the path value is populated, validate
// it and apply it to the tree": an external joiner gets its leaf, the
// LeafNode is validated (§7.3, source commit), its encryption key must
// differ from the committer's current one, no public key of the path may
// be in the tree already, the path is merged (§7.5) and, unless the
// Commit removes this member, its path secret is decrypted under the
// provisional GroupContext to give the commit_secret (§7.6). Without a
// path the commit_secret stays the all-zero vector (nil here). Last, the
// keys of added and updated leaves must be new to the tree too.
func (g *Group) applyCommitPath(in *incomingCommit) error {
	c, tree := in.c, in.tree
	in.committer = leafIndex(in.fc.Sender.LeafIndex)
	in.priv = g.priv.clone()
	if in.eff.updatedSelf != nil {
		// Our own Update was committed: our leaf now holds its key.
		in.priv = newPrivateTree(g.own, in.eff.updatedSelf.updatePriv, in.eff.updatedSelf.proposal.Update.LeafNode.EncryptionKey)
	}
	if c.Path != nil {
		if in.external {
			ln := c.Path.LeafNode
			in.committer = tree.addLeaf(&ln)
		}
		if err := g.validateLeafNode(&c.Path.LeafNode, in.committer, in.gc.Extensions, false); err != nil {
			return err
		}
		// One credential, one leaf: a joiner's credential, or one that a
		// member's leaf changed to, is nowhere else in the tree.
		if in.external || !sameCredential(&g.cur.tree.leafNode(in.committer).Credential, &c.Path.LeafNode.Credential) {
			if err := checkCredentialUnique(tree, in.committer, &c.Path.LeafNode.Credential); err != nil {
				return err
			}
		}
		if !in.external {
			if old := g.cur.tree.leafNode(in.committer); old != nil && bytes.Equal(old.EncryptionKey, c.Path.LeafNode.EncryptionKey) {
				return fmt.Errorf("%w: committer kept its encryption key", ErrInvalidCommit)
			}
		}
		if err := tree.mergeUpdatePath(in.committer, c.Path); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommit, err)
		}
		fdp, _ := tree.filteredDirectPath(in.committer)
		if err := checkNewKeysUnique(tree, append(fdp, in.committer.node())); err != nil {
			return err
		}
		if !in.eff.removedSelf {
			pc := in.gc
			pc.TreeHash = tree.treeHash()
			var err error
			in.commitSecret, in.priv, err = tree.decryptUpdatePath(in.priv, in.committer, c.Path, in.eff.added, marshal(&pc))
			if err != nil {
				return fmt.Errorf("%w: %v", ErrInvalidCommit, err)
			}
		}
	}
	return checkNewKeysUnique(tree, append(leafNodes(in.eff.added), leafNodes(in.eff.updated)...))
}

// newCommitContext is §12.4.2's "Update the confirmed and interim
// transcript hashes using the new Commit, and generate the new
// GroupContext" (§8.2): the new tree's hash and the confirmed transcript
// hash go into it.
func (g *Group) newCommitContext(in *incomingCommit) error {
	in.gc.TreeHash = bytes.Clone(in.tree.treeHash())
	confirmed, err := confirmedTranscriptHash(g.s, g.interim, in.ac)
	if err != nil {
		return err
	}
	in.gc.ConfirmedTranscriptHash = confirmed
	in.confirmed = confirmed
	return nil
}

// acceptRemoval ends this member's part in the group for a Commit that
// removes it: it cannot follow into the new epoch (§12.4.2, last note)
// and keeps its old state only to read late messages.
func (g *Group) acceptRemoval(in *incomingCommit) error {
	if in.external {
		// A removed member cannot check the confirmation tag, so the
		// policy decides on what it has.
		if err := g.checkExternalCommit(in.tree, in.gc.Extensions, in.committer, in.replaced, in.resync, in.fc.AuthenticatedData); err != nil {
			return err
		}
	}
	g.removed = true
	g.proposals = nil
	g.DiscardCommit()
	return nil
}

// enterCommitEpoch is the end of §12.4.2: derive the new epoch's secrets
// from the init_secret, commit_secret and psk_secret (§8), verify the
// confirmation tag with its confirmation_key, let the application decide
// on an authentic external Commit (§12.4.3.2), and only then make the new
// GroupContext, tree and keys the group's current state.
func (g *Group) enterCommitEpoch(in *incomingCommit) error {
	keys, err := deriveEpoch(g.s, in.init, in.commitSecret, in.pskSecret, &in.gc)
	if err != nil {
		return err
	}
	if !keys.verifyConfirmationTag(in.confirmed, in.ac.Auth.ConfirmationTag) {
		keys.wipe()
		return ErrInvalidConfirmationTag
	}
	if in.external {
		// Section 12.4.3.2: whether members accept an external Commit is
		// the application's decision; it sees only authentic ones.
		if err := g.checkExternalCommit(in.tree, in.gc.Extensions, in.committer, in.replaced, in.resync, in.fc.AuthenticatedData); err != nil {
			keys.wipe()
			return err
		}
	}
	g.DiscardCommit()
	prunePrivate(in.priv, in.tree)
	if err := g.installEpoch(in.gc, in.tree, keys, in.ac.Auth.ConfirmationTag); err != nil {
		return err
	}
	g.setPrivate(in.priv)
	return nil
}

func leafNodes(ls []leafIndex) []nodeIndex {
	out := make([]nodeIndex, len(ls))
	for i, l := range ls {
		out[i] = l.node()
	}
	return out
}

// prunePrivate deletes the private keys whose public keys are no longer in
// the tree (forward secrecy, Section 9.2 and 7.4).
func prunePrivate(p *privateTree, t *ratchetTree) {
	for x, k := range p.keys {
		if _, ok := p.keyFor(t, x); !ok {
			clear(k.priv)
			delete(p.keys, x)
		}
	}
}
