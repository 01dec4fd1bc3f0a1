package mls

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
)

// This file creates Commits and Welcomes (RFC 9420, Section 12.4.1 and
// 12.4.3.1). A created Commit is pending: the group moves to the new epoch
// only when the caller confirms that the Delivery Service accepted it
// ([Group.ConfirmCommit]), or stays where it is when the Commit was
// rejected ([Group.DiscardCommit]).

// CommitOptions says what a Commit changes. Proposals received in the
// current epoch are always included by reference, except those that are
// invalid for this committer (its own Updates).
type CommitOptions struct {
	// Add lists KeyPackages (MLSMessage or bare encoding) of members to
	// add.
	Add [][]byte
	// Remove lists the leaf indices of members to remove.
	Remove []uint32
	// ExternalPSKs lists ids of external PSKs (in [Config.ExternalPSKs])
	// to inject.
	ExternalPSKs [][]byte
	// Extensions, when not nil, replaces the GroupContext extensions.
	Extensions []Extension
	// OmitPath leaves the UpdatePath out when no proposal requires one
	// (Section 12.4). By default every Commit carries a path, which gives
	// post-compromise security for the committer.
	OmitPath bool
}

// CommitResult is a created Commit.
type CommitResult struct {
	// Commit is the MLSMessage to send to the group.
	Commit []byte
	// Welcome is the MLSMessage for the added members, nil when the
	// Commit adds nobody.
	Welcome []byte
}

// pendingCommit is the state the group moves to when its Commit is
// confirmed.
type pendingCommit struct {
	message []byte
	ctx     GroupContext
	tree    *ratchetTree
	keys    *epochSecrets
	priv    *privateTree
	confTag []byte
}

// AddMembers commits the addition of the members whose KeyPackages are
// given, together with the proposals pending in this epoch.
func (g *Group) AddMembers(keyPackages ...[]byte) (*CommitResult, error) {
	return g.Commit(CommitOptions{Add: keyPackages})
}

// RemoveMembers commits the removal of the members at the given leaves.
func (g *Group) RemoveMembers(leaves ...uint32) (*CommitResult, error) {
	return g.Commit(CommitOptions{Remove: leaves})
}

// SelfUpdate commits a fresh path for this member (an "empty" Commit,
// Section 12.4), together with the proposals pending in this epoch.
func (g *Group) SelfUpdate() (*CommitResult, error) {
	return g.Commit(CommitOptions{})
}

// Commit creates a Commit covering the pending proposals and those in
// opts. The group does not change until [Group.ConfirmCommit].
func (g *Group) Commit(opts CommitOptions) (*CommitResult, error) {
	if err := g.checkCanSend(); err != nil {
		return nil, err
	}
	committer := Sender{SenderType: SenderTypeMember, LeafIndex: uint32(g.own)}
	var props []committedProposal
	var por []ProposalOrRef
	// Section 12.4: include the proposals received in this epoch, except
	// those that would make the list invalid (Section 12.2): the
	// committer's own Updates, its removal, and further Updates or Removes
	// of a leaf already covered, where a Remove wins over an Update.
	touched := make(map[uint32]bool)
	for _, r := range opts.Remove {
		touched[r] = true
	}
	lastUpdate := make(map[uint32]int) // the most recent Update of each leaf wins
	for i, cp := range g.proposals {
		if cp.proposal.ProposalType == ProposalTypeUpdate {
			lastUpdate[cp.sender.LeafIndex] = i
		}
	}
	for pass := range 2 {
		for i, cp := range g.proposals {
			isRemove := cp.proposal.ProposalType == ProposalTypeRemove
			if (pass == 0) != isRemove {
				continue
			}
			switch cp.proposal.ProposalType {
			case ProposalTypeRemove:
				l := cp.proposal.Remove.Removed
				if l == uint32(g.own) || touched[l] || g.cur.tree.leafNode(leafIndex(l)) == nil {
					continue
				}
				touched[l] = true
			case ProposalTypeUpdate:
				l := cp.sender.LeafIndex
				if cp.sender == committer || touched[l] || lastUpdate[l] != i {
					continue
				}
				touched[l] = true
			}
			props = append(props, committedProposal{proposal: cp.proposal, sender: cp.sender, byRef: true, ref: cp.ref})
			por = append(por, ProposalOrRef{Type: ProposalOrRefTypeReference, Reference: cp.ref})
		}
	}
	var inline []Proposal
	if opts.Extensions != nil {
		inline = append(inline, Proposal{ProposalType: ProposalTypeGroupContextExtensions,
			GroupContextExtensions: &GroupContextExtensions{Extensions: slices.Clone(opts.Extensions)}})
	}
	for _, r := range opts.Remove {
		inline = append(inline, Proposal{ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: r}})
	}
	for _, data := range opts.Add {
		kp, err := parseKeyPackage(data)
		if err != nil {
			return nil, err
		}
		// Section 7.3: the lifetime of a KeyPackage this member adds is
		// always checked; the rest is validated with the proposal list.
		if err := checkLifetime(&kp.LeafNode, &g.cfg); err != nil {
			return nil, err
		}
		inline = append(inline, Proposal{ProposalType: ProposalTypeAdd, Add: &Add{KeyPackage: *kp}})
	}
	for _, id := range opts.ExternalPSKs {
		if _, ok := g.cfg.ExternalPSKs[string(id)]; !ok {
			return nil, fmt.Errorf("%w: external psk %x", ErrMissingPSK, id)
		}
		nonce := make([]byte, g.s.hashLen())
		if _, err := randRead(nonce); err != nil {
			return nil, err
		}
		inline = append(inline, Proposal{ProposalType: ProposalTypePSK, PreSharedKey: &PreSharedKey{
			PSK: PreSharedKeyID{PSKType: PSKTypeExternal, PSKID: bytes.Clone(id), PSKNonce: nonce}}})
	}
	for _, p := range inline {
		props = append(props, committedProposal{proposal: p, sender: committer})
		por = append(por, ProposalOrRef{Type: ProposalOrRefTypeProposal, Proposal: p})
	}
	if err := g.validateProposals(props, committer, false); err != nil {
		return nil, err
	}

	// Section 12.3: apply the proposals to copies of the tree and context.
	tree := g.cur.tree.clone()
	ctx := *g.cur.ctx
	ctx.Extensions = slices.Clone(ctx.Extensions)
	eff, err := g.applyProposals(props, tree, &ctx)
	if err != nil {
		return nil, err
	}
	if eff.reinit != nil {
		return nil, errors.New("mls: reinit commits are not supported")
	}
	pskSecret, err := g.pskSecret(eff.psks)
	if err != nil {
		return nil, err
	}
	ctx.Epoch++

	commit := &Commit{Proposals: por}
	priv := g.priv.clone()
	var commitSecret []byte
	var path *updatePathResult
	if pathRequired(props) || !opts.OmitPath {
		oldConfirmed := g.cur.ctx.ConfirmedTranscriptHash
		path, err = tree.generateUpdatePath(g.priv, nil, g.sigPriv, ctx.GroupID, eff.added, func(treeHash []byte) ([]byte, error) {
			pc := ctx
			pc.TreeHash = treeHash
			pc.ConfirmedTranscriptHash = oldConfirmed
			return marshal(&pc), nil
		})
		if err != nil {
			return nil, err
		}
		commit.Path = path.path
		commitSecret = path.commitSecret
		priv = path.priv
	}
	ctx.TreeHash = bytes.Clone(tree.treeHash())

	// Section 12.4.1: sign with the old GroupContext, then derive the new
	// epoch from the transcript.
	fc := &FramedContent{
		GroupID:     ctx.GroupID,
		Epoch:       g.cur.ctx.Epoch,
		Sender:      committer,
		ContentType: ContentTypeCommit,
		Commit:      commit,
	}
	ac, err := g.signContent(g.handshakeWireFormat(), fc, g.cur.ctx)
	if err != nil {
		return nil, err
	}
	confirmed, err := confirmedTranscriptHash(g.s, g.interim, ac)
	if err != nil {
		return nil, err
	}
	ctx.ConfirmedTranscriptHash = confirmed
	init, err := newInitSecret(g.s, bytes.Clone(g.keys.initSecret))
	if err != nil {
		return nil, err
	}
	js, err := init.joiner(commitSecret, &ctx)
	if err != nil {
		return nil, err
	}
	joinerSecret := js.bytes()
	ms, err := js.withPSK(pskSecret)
	if err != nil {
		return nil, err
	}
	welcomeSecret, err := ms.welcomeSecret()
	if err != nil {
		return nil, err
	}
	keys, err := ms.epoch(&ctx)
	if err != nil {
		return nil, err
	}
	confTag := keys.confirmationTag(confirmed)
	ac.Auth.ConfirmationTag = confTag

	msg, err := g.encodeContent(ac)
	if err != nil {
		return nil, err
	}
	res := &CommitResult{Commit: msg}
	if len(eff.added) > 0 {
		res.Welcome, err = g.makeWelcome(&ctx, tree, keys, confTag, joinerSecret, welcomeSecret, eff, path)
		if err != nil {
			return nil, err
		}
	}
	clear(joinerSecret)
	clear(welcomeSecret)
	g.pending = &pendingCommit{message: msg, ctx: ctx, tree: tree, keys: keys, priv: priv, confTag: confTag}
	return res, nil
}

// ConfirmCommit moves the group to the epoch of its pending Commit, once
// the Delivery Service has accepted it.
func (g *Group) ConfirmCommit() error {
	p := g.pending
	if p == nil {
		return ErrNoPendingCommit
	}
	if err := g.installEpoch(p.ctx, p.tree, p.keys, p.confTag); err != nil {
		return err
	}
	g.setPrivate(p.priv)
	g.pending = nil
	return nil
}

// DiscardCommit drops the pending Commit, for instance when the Delivery
// Service rejected it because another Commit for the epoch came first.
// The group stays in its current epoch.
func (g *Group) DiscardCommit() {
	if g.pending != nil {
		g.pending.keys.wipe()
		g.pending.priv.wipeReplaced(g.priv)
		clear(g.pending.keys.senderDataSecret)
		clear(g.pending.keys.membershipKey)
		g.pending = nil
	}
}

// HasPendingCommit reports whether an own Commit awaits confirmation.
func (g *Group) HasPendingCommit() bool { return g.pending != nil }

// makeWelcome builds the Welcome for the members added by a Commit
// (Section 12.4.3.1).
func (g *Group) makeWelcome(ctx *GroupContext, tree *ratchetTree, keys *epochSecrets, confTag, joinerSecret, welcomeSecret []byte, eff *proposalEffects, path *updatePathResult) ([]byte, error) {
	gi, err := g.makeGroupInfo(ctx, tree, keys, confTag, false)
	if err != nil {
		return nil, err
	}
	encGI, err := sealGroupInfo(g.s, welcomeSecret, gi)
	if err != nil {
		return nil, err
	}
	w := &Welcome{CipherSuite: g.s.id(), EncryptedGroupInfo: encGI}
	w.Secrets = make([]EncryptedGroupSecrets, len(eff.added))
	// One HPKE encryption per new member, independent of each other.
	err = parallelFor(len(eff.added), func(i int) error {
		gs := GroupSecrets{JoinerSecret: joinerSecret, PSKs: eff.psks}
		if path != nil {
			if ps, ok := path.pathSecretFor(eff.added[i]); ok {
				gs.PathSecret = &PathSecret{PathSecret: ps.secret}
			}
		}
		egs, err := sealGroupSecrets(g.s, eff.addedKPs[i], &gs, encGI)
		w.Secrets[i] = egs
		return err
	})
	if err != nil {
		return nil, err
	}
	return marshal(&MLSMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatWelcome, Welcome: w}), nil
}

// makeGroupInfo builds and signs the GroupInfo of an epoch (Section
// 12.4.3), with the ratchet_tree extension unless the tree goes out of
// band, and with external_pub when external is set.
func (g *Group) makeGroupInfo(ctx *GroupContext, tree *ratchetTree, keys *epochSecrets, confTag []byte, external bool) (*GroupInfo, error) {
	gi := &GroupInfo{GroupContext: *ctx, ConfirmationTag: confTag, Signer: uint32(g.own)}
	if !g.cfg.OutOfBandTree {
		gi.Extensions = append(gi.Extensions, Extension{ExtensionType: ExtensionTypeRatchetTree, ExtensionData: tree.encode()})
	}
	if external {
		_, pub, err := keys.externalKeyPair()
		if err != nil {
			return nil, err
		}
		gi.Extensions = append(gi.Extensions, Extension{ExtensionType: ExtensionTypeExternalPub, ExtensionData: marshal(&ExternalPub{ExternalPub: pub})})
	}
	if err := gi.sign(g.s, g.sigPriv); err != nil {
		return nil, err
	}
	return gi, nil
}

// GroupInfo returns a signed GroupInfo MLSMessage for the current epoch
// with the external_pub extension, which lets a new member join by
// external Commit (Section 12.4.3.2).
func (g *Group) GroupInfo() ([]byte, error) {
	gi, err := g.makeGroupInfo(g.cur.ctx, g.cur.tree, g.keys, g.confTag, true)
	if err != nil {
		return nil, err
	}
	return marshal(&MLSMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatGroupInfo, GroupInfo: gi}), nil
}

// pskSecret looks up the PSKs named by ids and derives psk_secret (Section
// 8.4); nil when there are none.
func (g *Group) pskSecret(ids []PreSharedKeyID) ([]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	psks := make([][]byte, len(ids))
	for i := range ids {
		v, err := g.lookupPSK(&ids[i])
		if err != nil {
			return nil, err
		}
		psks[i] = v
	}
	return pskSecret(g.s, ids, psks)
}

func (g *Group) lookupPSK(id *PreSharedKeyID) ([]byte, error) {
	switch id.PSKType {
	case PSKTypeExternal:
		if v, ok := g.cfg.ExternalPSKs[string(id.PSKID)]; ok {
			return v, nil
		}
	case PSKTypeResumption:
		if bytes.Equal(id.PSKGroupID, g.cur.ctx.GroupID) {
			if id.PSKEpoch == g.cur.ctx.Epoch {
				return g.keys.resumptionPSK, nil
			}
			for _, r := range g.resumption {
				if r.epoch == id.PSKEpoch {
					return r.psk, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("%w: %x", ErrMissingPSK, marshal(id))
}

// handshakeWireFormat is the wire format of own proposals and commits.
func (g *Group) handshakeWireFormat() WireFormat {
	if g.cfg.PublicHandshake {
		return WireFormatPublicMessage
	}
	return WireFormatPrivateMessage
}

// protectHandshake signs and protects an own proposal.
func (g *Group) protectHandshake(fc *FramedContent) ([]byte, *AuthenticatedContent, error) {
	ac, err := g.signContent(g.handshakeWireFormat(), fc, g.cur.ctx)
	if err != nil {
		return nil, nil, err
	}
	msg, err := g.encodeContent(ac)
	if err != nil {
		return nil, nil, err
	}
	return msg, ac, nil
}

// encodeContent protects ac with the current epoch's keys and wraps it in
// an MLSMessage.
func (g *Group) encodeContent(ac *AuthenticatedContent) ([]byte, error) {
	m := &MLSMessage{Version: ProtocolVersionMLS10, WireFormat: ac.WireFormat}
	switch ac.WireFormat {
	case WireFormatPublicMessage:
		pm, err := g.cur.prot.protectPublic(ac)
		if err != nil {
			return nil, err
		}
		m.PublicMessage = pm
	case WireFormatPrivateMessage:
		pm, err := g.cur.prot.protectPrivate(ac)
		if err != nil {
			return nil, err
		}
		m.PrivateMessage = pm
	default:
		return nil, errors.New("mls: internal error: bad wire format")
	}
	return marshal(m), nil
}

func randRead(b []byte) (int, error) { return rand.Read(b) }
