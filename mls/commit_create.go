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

// CommitOptions says what a Commit changes and how it is sent. The
// proposals cached in the current epoch are included by reference as long
// as they are valid and fit with the rest (Section 12.4); those left out
// are listed in [CommitResult.Dropped].
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

	// WireFormat is how this Commit is sent: WireFormatPublicMessage or
	// WireFormatPrivateMessage. Zero means the group's default,
	// [Config.PublicHandshake].
	WireFormat WireFormat
	// Tree says whether the Welcome of this Commit carries the ratchet
	// tree (Section 12.4.3.3). TreeDefault means the group's default,
	// [Config.OutOfBandTree].
	Tree TreeDelivery

	// testOnlyLeaf, when set, is the template of the committer's new leaf
	// in the UpdatePath (tests build hostile Commits with it).
	testOnlyLeaf *LeafNode
}

// TreeDelivery says how the members a Commit adds get the ratchet tree.
type TreeDelivery uint8

const (
	// TreeDefault follows [Config.OutOfBandTree].
	TreeDefault TreeDelivery = iota
	// TreeInBand puts the tree in the Welcome's GroupInfo, in the
	// ratchet_tree extension.
	TreeInBand
	// TreeOutOfBand leaves the tree out; joiners pass it to [Join] in
	// [JoinOptions.RatchetTree] (from [Group.RatchetTree]).
	TreeOutOfBand
)

// CommitResult is a created Commit.
type CommitResult struct {
	// Commit is the MLSMessage to send to the group.
	Commit []byte
	// Welcome is the MLSMessage for the added members, nil when the
	// Commit adds nobody.
	Welcome []byte
	// RatchetTree is the ratchet tree of the new epoch (the
	// ratchet_tree extension encoding) when the Welcome leaves it out
	// ([TreeOutOfBand]), nil otherwise: the committer provides it out of
	// band (Section 12.4.3.3), before the Welcome goes out, and the
	// joiner checks it against the tree_hash it finds in the Welcome.
	RatchetTree []byte
	// TreeHash is the tree_hash of the new epoch's GroupContext (Section
	// 7.8), the name [JoinOptions.FetchTree] is given for RatchetTree;
	// set with it.
	TreeHash []byte
	// Dropped lists the proposals pending in the epoch that the Commit
	// leaves out, with the reason for each. They stay pending (see
	// [Group.PendingProposals]) until the epoch ends.
	Dropped []DroppedProposal
}

// DroppedProposal is a pending proposal that a Commit left out.
type DroppedProposal struct {
	// Ref is the proposal's ProposalRef (Section 5.2).
	Ref    []byte
	Type   ProposalType
	Sender Sender
	// Err says why: the proposal is invalid (Section 12.1), breaks the
	// proposal list (Section 12.2), or was superseded.
	Err error
}

// pendingCommit is the state the group moves to when its Commit is
// confirmed.
type pendingCommit struct {
	message []byte
	ctx     GroupContext
	tree    *ratchetTree
	treeEnc []byte // tree encoded, when the Commit needed it; else nil
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

// Commit creates a Commit covering the proposals in opts and the pending
// proposals that fit with them. The group does not change until
// [Group.ConfirmCommit].
//
// The proposals of opts must be valid: when one is not, Commit fails.
// A pending proposal never makes it fail: one that is invalid, or that
// conflicts with opts or with a proposal chosen before it, is left out
// and reported in [CommitResult.Dropped].
func (g *Group) Commit(opts CommitOptions) (*CommitResult, error) {
	if err := g.checkCanSend(); err != nil {
		return nil, err
	}
	wf, err := opts.wireFormat(&g.cfg)
	if err != nil {
		return nil, err
	}
	inline, err := g.inlineProposals(&opts)
	if err != nil {
		return nil, err
	}
	props, dropped, err := g.chooseProposals(inline, true)
	if err != nil {
		return nil, err
	}
	res, err := g.createCommit(props, &opts, wf)
	if err != nil && len(props) > len(inline) {
		// Every pending proposal that was chosen passed the checks of
		// Sections 12.1 and 12.2, so this should not happen; but a Commit
		// includes pending proposals only "as long as this results in a
		// valid proposal list" (Section 12.4), so when the Commit cannot
		// be made with them it is made without them.
		reason := fmt.Errorf("%w: the commit cannot be made with it: %v", ErrInvalidProposal, err)
		props, _, _ = g.chooseProposals(inline, false)
		if res, err = g.createCommit(props, &opts, wf); err != nil {
			return nil, err
		}
		dropped = dropped[:0]
		for _, cp := range g.proposals {
			dropped = append(dropped, droppedProposal(&cp, reason))
		}
	}
	if err != nil {
		return nil, err
	}
	res.Dropped = dropped
	return res, nil
}

func (o *CommitOptions) wireFormat(c *Config) (WireFormat, error) {
	switch o.WireFormat {
	case 0:
		if c.PublicHandshake {
			return WireFormatPublicMessage, nil
		}
		return WireFormatPrivateMessage, nil
	case WireFormatPublicMessage, WireFormatPrivateMessage:
		return o.WireFormat, nil
	}
	return 0, fmt.Errorf("mls: a commit cannot be sent with wire format %d", o.WireFormat)
}

func (o *CommitOptions) treeInBand(c *Config) (bool, error) {
	switch o.Tree {
	case TreeDefault:
		return !c.OutOfBandTree, nil
	case TreeInBand:
		return true, nil
	case TreeOutOfBand:
		return false, nil
	}
	return false, fmt.Errorf("mls: unknown tree delivery %d", o.Tree)
}

// inlineProposals returns the proposals that opts asks for, to be sent by
// value.
func (g *Group) inlineProposals(opts *CommitOptions) ([]Proposal, error) {
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
	return inline, nil
}

// chooseProposals builds the proposal list of an own Commit (Section
// 12.4): the inline proposals, which must all be valid, and, when
// withPending is set, the pending proposals that fit, offered in the
// order of Section 12.2's preferences: Removes before Updates of the same
// leaf, the most recent Update of a leaf before earlier ones, and the
// proposals that came by reference after the committer's own. It returns
// the list and the pending proposals left out.
func (g *Group) chooseProposals(inline []Proposal, withPending bool) ([]committedProposal, []DroppedProposal, error) {
	committer := Sender{SenderType: SenderTypeMember, LeafIndex: uint32(g.own)}
	own := make([]committedProposal, len(inline))
	for i, p := range inline {
		own[i] = committedProposal{proposal: p, sender: committer}
	}
	if err := g.verifyAddSignatures(own); err != nil {
		return nil, nil, err
	}
	l := g.newProposalList(committer, false)
	l.creating = true
	var dropped []DroppedProposal
	// The pending proposals in the order they are offered: as received,
	// but Updates from the newest, so that the most recent Update of a
	// leaf that fits wins it and the earlier ones then conflict with it.
	var order []*cachedProposal
	if withPending {
		order = make([]*cachedProposal, 0, len(g.proposals))
		for i := range g.proposals {
			if g.proposals[i].proposal.ProposalType != ProposalTypeUpdate {
				order = append(order, &g.proposals[i])
			}
		}
		for i := len(g.proposals) - 1; i >= 0; i-- {
			if g.proposals[i].proposal.ProposalType == ProposalTypeUpdate {
				order = append(order, &g.proposals[i])
			}
		}
	}
	// The application's policy on the caller's proposals (Section 12.2),
	// then on each pending proposal offered on top of those chosen.
	if err := g.checkCommitPolicy(g.own, own); err != nil {
		return nil, nil, err
	}
	var chosen []committedProposal // kept only for the policy
	if g.cfg.CommitPolicy != nil {
		chosen = slices.Clone(own)
	}
	for phase := range 3 {
		for _, p := range own {
			if validatePhase(p.proposal.ProposalType) != phase {
				continue
			}
			if err := l.add(p); err != nil {
				return nil, nil, err
			}
		}
		for _, cp := range order {
			if validatePhase(cp.proposal.ProposalType) != phase {
				continue
			}
			if cp.proposal.ProposalType == ProposalTypeUpdate && cp.sender == committer {
				// Section 12.2: the committer's own Updates are replaced by
				// its UpdatePath.
				dropped = append(dropped, droppedProposal(cp, invalidProposal("update by the committer, superseded by its commit")))
				continue
			}
			cand := committedProposal{proposal: cp.proposal, sender: cp.sender, byRef: true, ref: cp.ref}
			if g.cfg.CommitPolicy != nil {
				if err := g.checkCommitPolicy(g.own, append(slices.Clone(chosen), cand)); err != nil {
					dropped = append(dropped, droppedProposal(cp, err))
					continue
				}
			}
			if err := l.add(cand); err != nil {
				dropped = append(dropped, droppedProposal(cp, err))
				continue
			}
			if g.cfg.CommitPolicy != nil {
				chosen = append(chosen, cand)
			}
		}
	}
	return l.props, dropped, nil
}

func droppedProposal(cp *cachedProposal, err error) DroppedProposal {
	return DroppedProposal{Ref: bytes.Clone(cp.ref), Type: cp.proposal.ProposalType, Sender: cp.sender, Err: err}
}

// createCommit creates the Commit of a validated proposal list (Section
// 12.4.1) and makes it pending.
func (g *Group) createCommit(props []committedProposal, opts *CommitOptions, wf WireFormat) (*CommitResult, error) {
	inBand, err := opts.treeInBand(&g.cfg)
	if err != nil {
		return nil, err
	}
	committer := Sender{SenderType: SenderTypeMember, LeafIndex: uint32(g.own)}
	por := make([]proposalOrRef, len(props))
	for i, p := range props {
		if p.byRef {
			por[i] = proposalOrRef{Type: porReference, Reference: p.ref}
		} else {
			por[i] = proposalOrRef{Type: porProposal, Proposal: p.proposal}
		}
	}

	// Section 12.3: apply the proposals to copies of the tree and context.
	tree := g.nextTree()
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

	commit := &commitContent{Proposals: por}
	priv := g.priv.clone()
	var commitSecret []byte
	var path *updatePathResult
	if pathRequired(props) || !opts.OmitPath {
		oldConfirmed := g.cur.ctx.ConfirmedTranscriptHash
		path, err = tree.generateUpdatePath(g.priv, opts.testOnlyLeaf, g.sigPriv, ctx.GroupID, eff.added, func(treeHash []byte) ([]byte, error) {
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
	fc := &framedContent{
		GroupID:     ctx.GroupID,
		Epoch:       g.cur.ctx.Epoch,
		Sender:      committer,
		ContentType: ContentTypeCommit,
		Commit:      commit,
	}
	ac, err := g.signContent(wf, fc, g.cur.ctx)
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
	var treeEnc []byte // the new epoch's tree, encoded once for all its uses
	if len(eff.added) > 0 {
		treeEnc = tree.encode()
		inWelcome := treeEnc
		if !inBand {
			inWelcome = nil
			res.RatchetTree, res.TreeHash = bytes.Clone(treeEnc), bytes.Clone(ctx.TreeHash)
		}
		res.Welcome, err = g.makeWelcome(&ctx, inWelcome, keys, confTag, joinerSecret, welcomeSecret, eff, path)
		if err != nil {
			return nil, err
		}
	}
	clear(joinerSecret)
	clear(welcomeSecret)
	g.pending = &pendingCommit{message: msg, ctx: ctx, tree: tree, treeEnc: treeEnc, keys: keys, priv: priv, confTag: confTag}
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
	g.cur.treeEnc = p.treeEnc
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
func (g *Group) makeWelcome(ctx *GroupContext, treeEnc []byte, keys *epochSecrets, confTag, joinerSecret, welcomeSecret []byte, eff *proposalEffects, path *updatePathResult) ([]byte, error) {
	gi, err := g.makeGroupInfo(ctx, treeEnc, keys, confTag, false)
	if err != nil {
		return nil, err
	}
	encGI, err := sealGroupInfo(g.s, welcomeSecret, gi)
	if err != nil {
		return nil, err
	}
	w := &welcomeMessage{CipherSuite: g.s.id(), EncryptedGroupInfo: encGI}
	w.Secrets = make([]encryptedGroupSecrets, len(eff.added))
	// One HPKE encryption per new member, independent of each other.
	err = parallelFor(len(eff.added), minParallelHPKE, func(i int) error {
		gs := welcomeSecrets{JoinerSecret: joinerSecret, PSKs: eff.psks}
		if path != nil {
			if ps, ok := path.pathSecretFor(eff.added[i]); ok {
				gs.PathSecret = &pathSecretMsg{PathSecret: ps.secret}
			}
		}
		egs, err := sealGroupSecrets(g.s, eff.addedKPs[i], &gs, encGI)
		w.Secrets[i] = egs
		return err
	})
	if err != nil {
		return nil, err
	}
	return marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatWelcome, Welcome: w}), nil
}

// makeGroupInfo builds and signs the GroupInfo of an epoch (Section
// 12.4.3), with the ratchet_tree extension holding treeEnc (the epoch's
// encoded tree) unless that is nil, and with external_pub when external is
// set.
func (g *Group) makeGroupInfo(ctx *GroupContext, treeEnc []byte, keys *epochSecrets, confTag []byte, external bool) (*GroupInfo, error) {
	gi := &GroupInfo{GroupContext: *ctx, ConfirmationTag: confTag, Signer: uint32(g.own)}
	if treeEnc != nil {
		gi.Extensions = append(gi.Extensions, Extension{ExtensionType: ExtensionTypeRatchetTree, ExtensionData: treeEnc})
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
	return g.GroupInfoWith(GroupInfoOptions{})
}

// GroupInfoOptions are the choices of [Group.GroupInfoWith].
type GroupInfoOptions struct {
	// Tree says whether the GroupInfo carries the ratchet tree in the
	// ratchet_tree extension (Section 12.4.3.3); TreeDefault follows
	// [Config.OutOfBandTree]. A joiner by external Commit from a
	// GroupInfo without it needs the tree from [Group.RatchetTree], in
	// [ExternalJoinOptions].
	Tree TreeDelivery
}

// GroupInfoWith is [Group.GroupInfo] with the choices of opts.
func (g *Group) GroupInfoWith(opts GroupInfoOptions) ([]byte, error) {
	inBand, err := (&CommitOptions{Tree: opts.Tree}).treeInBand(&g.cfg)
	if err != nil {
		return nil, err
	}
	var treeEnc []byte
	if inBand {
		treeEnc = g.cur.encodedTree()
	}
	gi, err := g.makeGroupInfo(g.cur.ctx, treeEnc, g.keys, g.confTag, true)
	if err != nil {
		return nil, err
	}
	return marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatGroupInfo, GroupInfo: gi}), nil
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
func (g *Group) protectHandshake(fc *framedContent) ([]byte, *authenticatedContent, error) {
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
func (g *Group) encodeContent(ac *authenticatedContent) ([]byte, error) {
	m := &mlsMessage{Version: ProtocolVersionMLS10, WireFormat: ac.WireFormat}
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
