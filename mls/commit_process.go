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
	var m MLSMessage
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

	var ac *AuthenticatedContent
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
	return func(fc *FramedContent) ([]byte, error) {
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
			var es ExternalSenders
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
// external joiner (Section 12.4.2). It returns the committer's leaf.
func (g *Group) processCommit(ac *AuthenticatedContent) (leafIndex, error) {
	fc := &ac.Content
	c := fc.Commit
	external := fc.Sender.SenderType == SenderTypeNewMemberCommit
	if !external && fc.Sender.SenderType != SenderTypeMember {
		return 0, fmt.Errorf("%w: commit from sender type %d", ErrInvalidCommit, fc.Sender.SenderType)
	}
	if external && ac.WireFormat != WireFormatPublicMessage {
		return 0, fmt.Errorf("%w: external commit must be a PublicMessage", ErrInvalidCommit)
	}
	props, err := g.resolveProposals(c, fc.Sender)
	if err != nil {
		return 0, err
	}
	if err := g.validateProposals(props, fc.Sender, external); err != nil {
		return 0, err
	}
	if !external {
		// Section 12.4.2: the proposals must be valid, which includes
		// the application's rules (Section 12.2).
		if err := g.checkCommitPolicy(leafIndex(fc.Sender.LeafIndex), props); err != nil {
			return 0, err
		}
	}
	if (pathRequired(props) || external) && c.Path == nil {
		return 0, fmt.Errorf("%w: path required", ErrInvalidCommit)
	}
	var resync bool
	var replaced leafIndex
	if external {
		// Section 12.2: the one Remove an external Commit may hold removes
		// an old appearance of the joiner, so the new leaf must meet the
		// criteria of an Update of the removed leaf: the same credential,
		// or an allowed successor (Section 5.3.1).
		for _, p := range props {
			if p.proposal.ProposalType != ProposalTypeRemove {
				continue
			}
			replaced, resync = leafIndex(p.proposal.Remove.Removed), true
			old := g.cur.tree.leafNode(replaced)
			if old == nil {
				return 0, fmt.Errorf("%w: external commit removes a blank leaf", ErrInvalidProposal)
			}
			if err := g.cfg.checkSuccessor(&old.Credential, &c.Path.LeafNode.Credential); err != nil {
				return 0, fmt.Errorf("%w: external commit removes another client: %w", ErrInvalidProposal, err)
			}
		}
	} else if c.Path != nil {
		// Section 5.3.1: a committer's new leaf keeps its credential, or
		// presents an allowed successor.
		if old := g.cur.tree.leafNode(leafIndex(fc.Sender.LeafIndex)); old != nil {
			if err := g.cfg.checkSuccessor(&old.Credential, &c.Path.LeafNode.Credential); err != nil {
				return 0, err
			}
		}
	}

	tree := g.cur.tree.clone()
	ctx := *g.cur.ctx
	ctx.Extensions = slices.Clone(ctx.Extensions)
	eff, err := g.applyProposals(props, tree, &ctx)
	if err != nil {
		return 0, err
	}
	if eff.reinit != nil {
		return 0, fmt.Errorf("%w: reinit is not supported", ErrInvalidCommit)
	}
	pskSecret, err := g.pskSecret(eff.psks)
	if err != nil {
		return 0, err
	}
	ctx.Epoch++

	// The init secret: from the previous epoch, or for an external Commit
	// from the ExternalInit proposal (Section 8.3).
	var init *initSecret
	if external {
		extPriv, _, err := g.keys.externalKeyPair()
		if err != nil {
			return 0, err
		}
		init, err = externalInitReceiver(g.s, extPriv, eff.externalInit.KEMOutput)
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrInvalidCommit, err)
		}
	} else {
		init, err = newInitSecret(g.s, bytes.Clone(g.keys.initSecret))
		if err != nil {
			return 0, err
		}
	}

	committer := leafIndex(fc.Sender.LeafIndex)
	priv := g.priv.clone()
	if eff.updatedSelf != nil {
		// Our own Update was committed: our leaf now holds its key.
		priv = newPrivateTree(g.own, eff.updatedSelf.updatePriv, eff.updatedSelf.proposal.Update.LeafNode.EncryptionKey)
	}
	var commitSecret []byte
	if c.Path != nil {
		if external {
			ln := c.Path.LeafNode
			committer = tree.addLeaf(&ln)
		}
		if err := g.validateLeafNode(&c.Path.LeafNode, committer, ctx.Extensions, false); err != nil {
			return 0, err
		}
		// One credential, one leaf: a joiner's credential, or one that a
		// member's leaf changed to, is nowhere else in the tree.
		if external || !sameCredential(&g.cur.tree.leafNode(committer).Credential, &c.Path.LeafNode.Credential) {
			if err := checkCredentialUnique(tree, committer, &c.Path.LeafNode.Credential); err != nil {
				return 0, err
			}
		}
		if !external {
			if old := g.cur.tree.leafNode(committer); old != nil && bytes.Equal(old.EncryptionKey, c.Path.LeafNode.EncryptionKey) {
				return 0, fmt.Errorf("%w: committer kept its encryption key", ErrInvalidCommit)
			}
		}
		if err := tree.mergeUpdatePath(committer, c.Path); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrInvalidCommit, err)
		}
		fdp, _ := tree.filteredDirectPath(committer)
		if err := checkNewKeysUnique(tree, append(fdp, committer.node())); err != nil {
			return 0, err
		}
		if !eff.removedSelf {
			pc := ctx
			pc.TreeHash = tree.treeHash()
			commitSecret, priv, err = tree.decryptUpdatePath(priv, committer, c.Path, eff.added, marshal(&pc))
			if err != nil {
				return 0, fmt.Errorf("%w: %v", ErrInvalidCommit, err)
			}
		}
	}
	if err := checkNewKeysUnique(tree, append(leafNodes(eff.added), leafNodes(eff.updated)...)); err != nil {
		return 0, err
	}
	ctx.TreeHash = bytes.Clone(tree.treeHash())
	confirmed, err := confirmedTranscriptHash(g.s, g.interim, ac)
	if err != nil {
		return 0, err
	}
	ctx.ConfirmedTranscriptHash = confirmed

	if eff.removedSelf {
		if external {
			// A removed member cannot check the confirmation tag, so the
			// policy decides on what it has.
			if err := g.checkExternalCommit(tree, ctx.Extensions, committer, replaced, resync, fc.AuthenticatedData); err != nil {
				return 0, err
			}
		}
		// We cannot follow into the new epoch. Section 12.4.2: the
		// member keeps its old state only to read late messages.
		g.removed = true
		g.proposals = nil
		g.DiscardCommit()
		return committer, nil
	}

	keys, err := deriveEpoch(g.s, init, commitSecret, pskSecret, &ctx)
	if err != nil {
		return 0, err
	}
	if !keys.verifyConfirmationTag(confirmed, ac.Auth.ConfirmationTag) {
		keys.wipe()
		return 0, ErrInvalidConfirmationTag
	}
	if external {
		// Section 12.4.3.2: whether members accept an external Commit is
		// the application's decision; it sees only authentic ones.
		if err := g.checkExternalCommit(tree, ctx.Extensions, committer, replaced, resync, fc.AuthenticatedData); err != nil {
			keys.wipe()
			return 0, err
		}
	}
	g.DiscardCommit()
	prunePrivate(priv, tree)
	if err := g.installEpoch(ctx, tree, keys, ac.Auth.ConfirmationTag); err != nil {
		return 0, err
	}
	g.setPrivate(priv)
	return committer, nil
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
