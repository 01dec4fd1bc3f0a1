package mls

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// This file joins groups: from a Welcome (RFC 9420, Section 12.4.3.1) and
// by external Commit (Section 12.4.3.2).

// JoinOptions are the optional inputs of [Join].
type JoinOptions struct {
	// RatchetTree is the group's tree (the ratchet_tree extension
	// encoding) when the Welcome does not carry it.
	RatchetTree []byte

	// FetchTree, if set, is called when the Welcome's GroupInfo carries
	// no ratchet_tree extension and RatchetTree is nil: the tree is then
	// "provided out of band" (Section 12.4.3.3), and FetchTree gets it
	// by the tree_hash of the GroupContext (Section 7.8), which only a
	// joiner who can open the Welcome learns. Whatever it returns is
	// checked against that hash like a tree in the Welcome, so its source
	// need not be trusted. An error it returns is returned by [Join],
	// wrapped.
	FetchTree func(treeHash []byte) ([]byte, error)
}

// Join processes a Welcome for the KeyPackage of bundle and returns the
// member's group state (Section 12.4.3.1). opts may be nil.
func Join(welcome []byte, bundle *KeyPackageBundle, opts *JoinOptions, cfg *Config) (*Group, error) {
	var m mlsMessage
	if err := unmarshal(welcome, &m); err != nil || m.WireFormat != WireFormatWelcome {
		return nil, fmt.Errorf("%w: not a welcome message", ErrInvalidWelcome)
	}
	if opts == nil {
		opts = &JoinOptions{}
	}
	return joinWelcome(m.Welcome, bundle, opts.RatchetTree, opts.FetchTree, cfg)
}

func joinWelcome(w *welcomeMessage, bundle *KeyPackageBundle, treeData []byte, fetch func([]byte) ([]byte, error), cfg *Config) (*Group, error) {
	c := cfg.withDefaults()
	s := bundle.s
	// Steps 1 and 2 of Section 12.4.3.1: our GroupSecrets, the PSKs, and
	// the GroupInfo.
	j, err := openWelcome(w, &bundle.kp, bundle.initPriv, func(ids []PreSharedKeyID) ([][]byte, error) {
		out := make([][]byte, len(ids))
		for i, id := range ids {
			v, ok := c.ExternalPSKs[string(id.PSKID)]
			if id.PSKType != PSKTypeExternal || !ok {
				return nil, fmt.Errorf("%w: %x", ErrMissingPSK, marshal(&id))
			}
			out[i] = v
		}
		return out, nil
	})
	switch {
	case errors.Is(err, errNoWelcomeForUs), errors.Is(err, errWelcomeSuite):
		return nil, fmt.Errorf("%w: %v", ErrNotForUs, err)
	case errors.Is(err, ErrMissingPSK):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalidWelcome, err)
	}
	gi := &j.groupInfo
	if treeData, err = fetchTree(gi, treeData, fetch); err != nil {
		return nil, err
	}
	g, tree, err := newGroupFromInfo(s, gi, treeData, c, func(signerKey []byte) bool {
		return j.verifySigner(signerKey) == nil
	})
	if err != nil {
		return nil, err
	}

	// Find our leaf: the one identical to the KeyPackage's leaf.
	own, ok := findLeaf(tree, &bundle.kp.LeafNode)
	if !ok {
		return nil, fmt.Errorf("%w: own leaf not in the tree", ErrInvalidWelcome)
	}
	g.own = own
	g.sigPriv = bytes.Clone(bundle.sigPriv)
	g.priv = newPrivateTree(own, bytes.Clone(bundle.encPriv), bundle.kp.LeafNode.EncryptionKey)
	if ps := j.groupSecrets.PathSecret; ps != nil {
		signer := leafIndex(gi.Signer)
		x := commonAncestor(own.node(), signer.node())
		if err := g.priv.implantPathSecret(tree, signer, x, ps.PathSecret); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidWelcome, err)
		}
	}

	// Step 4: the epoch secrets and the confirmation tag.
	keys, _, err := j.epoch()
	if errors.Is(err, errBadConfirmationTag) {
		return nil, ErrInvalidConfirmationTag
	} else if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidWelcome, err)
	}
	if err := g.installEpoch(gi.GroupContext, tree, keys, gi.ConfirmationTag); err != nil {
		return nil, err
	}
	return g, nil
}

// fetchTree returns treeData, or the tree fetch returns for gi's tree_hash
// when gi carries no ratchet_tree extension and treeData is nil (Section
// 12.4.3.3: the tree "can be provided out of band"). newGroupFromInfo
// checks it against the tree_hash.
func fetchTree(gi *GroupInfo, treeData []byte, fetch func([]byte) ([]byte, error)) ([]byte, error) {
	if treeData != nil || fetch == nil {
		return treeData, nil
	}
	if _, ok := findExtension(gi.Extensions, ExtensionTypeRatchetTree); ok {
		return nil, nil
	}
	tree, err := fetch(bytes.Clone(gi.GroupContext.TreeHash))
	if err != nil {
		return nil, fmt.Errorf("mls: fetching the ratchet tree: %w", err)
	}
	if tree == nil {
		tree = []byte{}
	}
	return tree, nil
}

// newGroupFromInfo checks a GroupInfo and the ratchet tree it describes
// (Section 12.4.3.1, shared by joins from a Welcome and external joins)
// and returns a Group with the common fields set.
//
// verifyGI checks the GroupInfo signature with the signer's signature key
// from the tree (Section 12.4.3.1, step 3 of a join from a Welcome); it is
// called once, possibly on another goroutine.
func newGroupFromInfo(s suite, gi *GroupInfo, treeData []byte, c Config, verifyGI func(signerKey []byte) bool) (*Group, *ratchetTree, error) {
	ctx := &gi.GroupContext
	if ctx.Version != ProtocolVersionMLS10 || ctx.CipherSuite != s.id() {
		return nil, nil, fmt.Errorf("%w: group version or cipher suite differs", ErrInvalidWelcome)
	}
	if data, ok := findExtension(gi.Extensions, ExtensionTypeRatchetTree); ok {
		treeData = data
	}
	if treeData == nil {
		return nil, nil, fmt.Errorf("%w: no ratchet tree", ErrInvalidWelcome)
	}
	tree, err := decodeRatchetTree(s, treeData)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidWelcome, err)
	}
	signer := tree.leafNode(leafIndex(gi.Signer))
	if signer == nil {
		return nil, nil, fmt.Errorf("%w: group info signature", ErrInvalidSignature)
	}
	// Section 12.4.3.1: the GroupInfo signature, the tree hash, and
	// "Verify the integrity of the ratchet tree". The GroupInfo signature
	// (over a GroupInfo that may carry the whole tree), the tree hashes of
	// the subtrees, the structure of the tree and the leaf signatures
	// (Section 7.3) are independent of each other, and run together on
	// all CPUs; the leaf signatures dominate the cost of a join. Their
	// failures are reported in the order of the checks below, so the
	// error does not depend on the schedule.
	roots := tree.hashSubtreeRoots()
	const giItem, hashItems = 0, 1
	structItem := hashItems + len(roots)
	leafItems := structItem + 1
	var giErr, structErr error
	sigErr := parallelFor(leafItems+int(tree.size()), minParallelNodes, func(i int) error {
		switch {
		case i == giItem:
			if !verifyGI(signer.SignatureKey) {
				giErr = errGroupInfoSignature
				return giErr
			}
		case i < structItem:
			tree.hash(roots[i-hashItems])
		case i == structItem:
			structErr = tree.validateStructure()
		default:
			l := uint32(i - leafItems)
			ln := tree.node(leafIndex(l).node()).Leaf
			if ln != nil && !ln.verifySignature(s, ctx.GroupID, l) {
				return fmt.Errorf("%w: bad signature on leaf %d", errInvalidTree, l)
			}
		}
		return nil
	})
	if giErr != nil {
		return nil, nil, fmt.Errorf("%w: group info signature", ErrInvalidSignature)
	}
	if !bytes.Equal(tree.treeHash(), ctx.TreeHash) {
		return nil, nil, fmt.Errorf("%w: tree hash mismatch", ErrInvalidWelcome)
	}
	// Section 13.4: no extension list may hold a type twice.
	if hasDuplicateExtensions(ctx.Extensions) || hasDuplicateExtensions(gi.Extensions) {
		return nil, nil, fmt.Errorf("%w: duplicate group extensions", ErrInvalidWelcome)
	}
	if structErr != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidWelcome, structErr)
	}
	if sigErr != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidWelcome, sigErr)
	}
	// Section 7.9.2, on a tree whose hashes are all computed.
	if err := tree.verifyParentHashes(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidWelcome, err)
	}
	g := &Group{cfg: c, s: s}
	// Section 7.3 for every leaf: group compatibility and lifetimes.
	g.cur = &epochKeys{ctx: ctx, tree: tree}
	for l := leafIndex(0); uint32(l) < tree.size(); l++ {
		ln := tree.leafNode(l)
		if ln == nil {
			continue
		}
		if err := g.checkLeafCompat(ln, ctx.Extensions); err != nil {
			return nil, nil, fmt.Errorf("%w: leaf %d: %w", ErrInvalidWelcome, l, err)
		}
		if ln.LeafNodeSource == LeafNodeSourceKeyPackage && !c.SkipLifetimeCheck {
			if err := checkLifetime(ln, &c); err != nil {
				return nil, nil, fmt.Errorf("%w: leaf %d: %v", ErrInvalidWelcome, l, err)
			}
		}
	}
	if err := checkTreeCredentials(tree); err != nil {
		return nil, nil, err
	}
	g.cur = nil
	return g, tree, nil
}

// findLeaf returns the leaf of t whose LeafNode is identical to ln.
func findLeaf(t *ratchetTree, ln *LeafNode) (leafIndex, bool) {
	want := marshal(ln)
	for l := leafIndex(0); uint32(l) < t.size(); l++ {
		if n := t.leafNode(l); n != nil && bytes.Equal(n.SignatureKey, ln.SignatureKey) && bytes.Equal(marshal(n), want) {
			return l, true
		}
	}
	return 0, false
}

// JoinExternal joins a group by external Commit (Section 12.4.3.2) from a
// GroupInfo MLSMessage carrying external_pub. The member's identity and
// keys come from bundle (its init key is not used). It returns the
// member's group state, already in the new epoch, and the Commit to send;
// if the Delivery Service rejects the Commit, drop the returned Group.
// treeData is the ratchet tree when the GroupInfo does not carry it.
func JoinExternal(groupInfo []byte, bundle *KeyPackageBundle, treeData []byte, cfg *Config) (*Group, []byte, error) {
	return JoinExternalWith(groupInfo, bundle, &ExternalJoinOptions{RatchetTree: treeData}, cfg)
}

// ExternalJoinOptions are the choices of [JoinExternalWith].
type ExternalJoinOptions struct {
	// RatchetTree is the ratchet tree when the GroupInfo does not carry
	// it.
	RatchetTree []byte
	// FetchTree, if set, gets the ratchet tree when the GroupInfo does
	// not carry it and RatchetTree is nil, as [JoinOptions.FetchTree].
	FetchTree func(treeHash []byte) ([]byte, error)
	// AuthenticatedData goes in the Commit's authenticated_data (Section
	// 6.1): signed by the joiner, seen by every member's
	// [Config.ExternalPolicy] (as [ExternalRequest].AuthenticatedData),
	// for instance to show what authorizes the join.
	AuthenticatedData []byte
	// Extensions, if set, is called with the GroupContext extensions of
	// the (verified) GroupInfo and returns those the Commit sets with a
	// GroupContextExtensions proposal (Section 12.1.7), which members admit
	// only when their [Config.ExternalCommitExtensions] is set (a
	// departure from Section 12.4.3.2). An error fails the join.
	Extensions func(current []Extension) ([]Extension, error)
}

// JoinExternalWith is [JoinExternal] with the choices of opts (which may
// be nil).
func JoinExternalWith(groupInfo []byte, bundle *KeyPackageBundle, opts *ExternalJoinOptions, cfg *Config) (*Group, []byte, error) {
	if opts == nil {
		opts = &ExternalJoinOptions{}
	}
	if len(opts.AuthenticatedData) > maxVectorLen {
		return nil, nil, fmt.Errorf("mls: authenticated data longer than %d bytes", maxVectorLen)
	}
	tree := opts.RatchetTree
	if tree == nil && opts.FetchTree != nil {
		var m mlsMessage
		if err := unmarshal(groupInfo, &m); err != nil || m.WireFormat != WireFormatGroupInfo {
			return nil, nil, fmt.Errorf("%w: not a group info message", ErrInvalidWelcome)
		}
		var err error
		if tree, err = fetchTree(m.GroupInfo, nil, opts.FetchTree); err != nil {
			return nil, nil, err
		}
	}
	return joinExternal(groupInfo, bundle, tree, cfg, resyncLeaf, opts.AuthenticatedData, opts.Extensions)
}

// resyncLeaf finds an old appearance of the joiner's identity in t, which
// an external Commit removes (Section 12.4.3.2, "resync").
func resyncLeaf(t *ratchetTree, own *LeafNode) (leafIndex, bool) {
	for l := leafIndex(0); uint32(l) < t.size(); l++ {
		if ln := t.leafNode(l); ln != nil && sameClient(&ln.Credential, &own.Credential) {
			return l, true
		}
	}
	return 0, false
}

// sameClient reports whether two credentials name the same client: the
// same BasicCredential identity, or otherwise the same credential.
func sameClient(a, b *Credential) bool {
	if a.CredentialType != b.CredentialType {
		return false
	}
	if a.CredentialType == CredentialTypeBasic {
		return bytes.Equal(a.Identity, b.Identity)
	}
	return bytes.Equal(marshal(a), marshal(b))
}

// joinExternal is JoinExternal with the choice of the leaf to remove left
// to resync, so that tests can build hostile external Commits.
func joinExternal(groupInfo []byte, bundle *KeyPackageBundle, treeData []byte, cfg *Config, resync func(*ratchetTree, *LeafNode) (leafIndex, bool), ad []byte, setExts func([]Extension) ([]Extension, error)) (*Group, []byte, error) {
	c := cfg.withDefaults()
	s := bundle.s
	var m mlsMessage
	if err := unmarshal(groupInfo, &m); err != nil || m.WireFormat != WireFormatGroupInfo {
		return nil, nil, fmt.Errorf("%w: not a group info message", ErrInvalidWelcome)
	}
	gi := m.GroupInfo
	g, tree, err := newGroupFromInfo(s, gi, treeData, c, func(signerKey []byte) bool {
		return gi.verifySignature(s, signerKey)
	})
	if err != nil {
		return nil, nil, err
	}
	extData, ok := findExtension(gi.Extensions, ExtensionTypeExternalPub)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no external_pub", ErrInvalidWelcome)
	}
	var ep ExternalPub
	if err := unmarshal(extData, &ep); err != nil {
		return nil, nil, fmt.Errorf("%w: malformed external_pub", ErrInvalidWelcome)
	}
	kemOutput, init, err := externalInitSender(s, ep.ExternalPub)
	if err != nil {
		return nil, nil, err
	}
	oldCtx := gi.GroupContext
	interim := interimTranscriptHash(s, oldCtx.ConfirmedTranscriptHash, gi.ConfirmationTag)

	ctx := oldCtx
	ctx.Extensions = slices.Clone(ctx.Extensions)
	ctx.Epoch++
	props := []proposalOrRef{{Type: porProposal, Proposal: Proposal{
		ProposalType: ProposalTypeExternalInit, ExternalInit: &ExternalInit{KEMOutput: kemOutput}}}}
	// Resync: replace an old appearance of the same identity.
	ownLeaf := bundle.kp.LeafNode
	if l, ok := resync(tree, &ownLeaf); ok {
		props = append(props, proposalOrRef{Type: porProposal, Proposal: Proposal{
			ProposalType: ProposalTypeRemove, Remove: &Remove{Removed: uint32(l)}}})
		if err := tree.removeLeaf(l); err != nil {
			return nil, nil, err
		}
	}
	if setExts != nil {
		exts, err := setExts(cloneExtensions(oldCtx.Extensions))
		if err != nil {
			return nil, nil, err
		}
		props = append(props, proposalOrRef{Type: porProposal, Proposal: Proposal{
			ProposalType: ProposalTypeGroupContextExtensions, GroupContextExtensions: &GroupContextExtensions{Extensions: slices.Clone(exts)}}})
		ctx.Extensions = slices.Clone(exts)
	}
	// The joiner takes the leftmost blank leaf; its leaf content comes
	// from the KeyPackage (the path overwrites key, source and signature).
	placeholder := ownLeaf
	own := tree.addLeaf(&placeholder)
	priv := newPrivateTree(own, bytes.Clone(bundle.encPriv), ownLeaf.EncryptionKey)
	path, err := tree.generateUpdatePath(priv, &ownLeaf, bundle.sigPriv, ctx.GroupID, nil, func(treeHash []byte) ([]byte, error) {
		pc := ctx
		pc.TreeHash = treeHash
		return marshal(&pc), nil
	})
	if err != nil {
		return nil, nil, err
	}
	ctx.TreeHash = bytes.Clone(tree.treeHash())
	commit := &commitContent{Proposals: props, Path: path.path}
	fc := &framedContent{
		GroupID:           ctx.GroupID,
		Epoch:             oldCtx.Epoch,
		Sender:            Sender{SenderType: SenderTypeNewMemberCommit},
		AuthenticatedData: bytes.Clone(ad),
		ContentType:       ContentTypeCommit,
		Commit:            commit,
	}
	ac, err := signFramedContent(s, bundle.sigPriv, WireFormatPublicMessage, fc, &oldCtx)
	if err != nil {
		return nil, nil, err
	}
	confirmed, err := confirmedTranscriptHash(s, interim, ac)
	if err != nil {
		return nil, nil, err
	}
	ctx.ConfirmedTranscriptHash = confirmed
	keys, err := deriveEpoch(s, init, path.commitSecret, nil, &ctx)
	if err != nil {
		return nil, nil, err
	}
	ac.Auth.ConfirmationTag = keys.confirmationTag(confirmed)
	pm := &publicMessage{Content: ac.Content, Auth: ac.Auth}
	msg := marshal(&mlsMessage{Version: ProtocolVersionMLS10, WireFormat: WireFormatPublicMessage, PublicMessage: pm})

	g.own = own
	g.sigPriv = bytes.Clone(bundle.sigPriv)
	g.priv = path.priv
	if err := g.installEpoch(ctx, tree, keys, ac.Auth.ConfirmationTag); err != nil {
		return nil, nil, err
	}
	return g, msg, nil
}
