package mls

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"
)

// This file serializes a Group's complete state, so that an application
// can store it after every change and restore it exactly. Secrets that
// RFC 9420 says to delete (Section 9.2: consumed ratchet keys, spent tree
// secrets, the secrets of epochs outside the window) are gone from the
// Group before it is serialized and so never written.
//
// The format is versioned: a leading byte names the version, and the rest
// uses the TLS presentation language of Section 2.1 throughout. It holds
// private keys; store it as a secret.
//
// A state file is input like any other: it may be corrupted on disk or
// written by someone hostile. RestoreGroup therefore checks every field
// before it is used, cheaply enough to run on every restore: lengths of
// keys, nonces and secrets are exactly the suite's, indices lie inside
// their trees, lists are in the canonical order MarshalBinary writes (so a
// restored state re-encodes to the same bytes), widths and counts are
// bounded before anything is allocated for them, and the parts agree with
// each other (own leaf, private keys and public tree, secret tree and
// ratchet tree, epochs). What it cannot check without the cost of the
// operation itself is the value of a secret or a key that has the right
// shape (a flipped bit in a ratchet secret restores, and the message it
// should decrypt then fails to), and the signatures and hashes of the
// tree, which were checked when the tree was received; none of those can
// make the engine panic or allocate, only fail.

// Version 2 is version 1 followed by a CRC-32C (Castagnoli) of every
// byte before it. The checksum catches accidental corruption (a bad disk
// sector, a truncated copy) that would otherwise restore into a member
// that silently fails to decrypt; it is no defence against a hostile
// file, whose author can recompute it, which is what the field checks of
// RestoreGroup are for. Version 1 states (without the checksum) are still
// read.
const (
	stateVersion   = 2
	stateVersionV1 = 1
)

var stateCRC = crc32.MakeTable(crc32.Castagnoli)

var errState = errors.New("mls: malformed group state")

// MarshalBinary encodes the group state, secrets included.
func (g *Group) MarshalBinary() ([]byte, error) {
	var b builder
	b.u8(stateVersion)
	b.u16(uint16(g.s.id()))
	b.u32(uint32(g.own))
	b.vec(g.sigPriv)
	b.u8(boolByte(g.removed))
	marshalEpochKeys(&b, g.cur)
	marshalEpochSecrets(&b, g.keys)
	marshalPrivateTree(&b, g.priv)
	b.vec(g.confTag)
	b.vecFunc(func(b *builder) {
		for _, p := range g.proposals {
			b.vec(p.ref)
			p.proposal.marshal(b)
			p.sender.marshal(b)
			b.vec(p.updatePriv)
		}
	})
	b.vecFunc(func(b *builder) {
		for _, e := range g.past {
			marshalPastEpochKeys(b, e)
		}
	})
	b.vecFunc(func(b *builder) {
		for _, r := range g.resumption {
			b.u64(r.epoch)
			b.vec(r.psk)
		}
	})
	b.optional(g.pending != nil, func(b *builder) {
		p := g.pending
		b.vec(p.message)
		p.ctx.marshal(b)
		b.vec(p.tree.encode())
		marshalEpochSecrets(b, p.keys)
		marshalPrivateTree(b, p.priv)
		b.vec(p.confTag)
	})
	b.u32(crc32.Checksum(b.bytes(), stateCRC))
	return b.bytes(), nil
}

// RestoreGroup decodes a state written by [Group.MarshalBinary]. cfg is
// the configuration to use from now on (it is not part of the state).
// A corrupted or inconsistent state is refused with an error; decoding
// never panics, and allocates in proportion to the size of data.
func RestoreGroup(data []byte, cfg *Config) (*Group, error) {
	c := cfg.withDefaults()
	if len(data) == 0 {
		return nil, errState
	}
	switch v := data[0]; v {
	case stateVersion:
		n := len(data) - 4
		if n < 1 || binary.BigEndian.Uint32(data[n:]) != crc32.Checksum(data[:n], stateCRC) {
			return nil, fmt.Errorf("%w: checksum mismatch", errState)
		}
		data = data[:n]
	case stateVersionV1:
	default:
		return nil, fmt.Errorf("mls: unsupported group state version %d", v)
	}
	p := newParser(data[1:])
	v1 := data[0] == stateVersionV1
	var cs uint16
	if !p.u16(&cs) {
		return nil, errState
	}
	s, err := suiteFor(CipherSuite(cs))
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: c, s: s}
	var own uint32
	var removed uint8
	if !p.u32(&own) || !p.vec(&g.sigPriv) || !p.u8(&removed) || removed > 1 {
		return nil, errState
	}
	if own >= maxTreeLeaves || len(g.sigPriv) != s.privateKeyLen() {
		return nil, errState
	}
	g.own, g.removed = leafIndex(own), removed == 1
	if g.cur, err = unmarshalEpochKeys(p, s, &c, false, v1); err != nil {
		return nil, err
	}
	if g.keys, err = unmarshalEpochSecrets(p, s); err != nil {
		return nil, err
	}
	// The current epoch's protection shares these with the schedule, so
	// the state holds them twice; the copies must agree.
	if !bytes.Equal(g.keys.senderDataSecret, g.cur.prot.senderDataSecret) || !bytes.Equal(g.keys.membershipKey, g.cur.prot.membershipKey) {
		return nil, errState
	}
	g.keys.senderDataSecret = g.cur.prot.senderDataSecret
	g.keys.membershipKey = g.cur.prot.membershipKey
	if g.priv, err = unmarshalPrivateTree(p, s, g.own); err != nil {
		return nil, err
	}
	if !p.vec(&g.confTag) {
		return nil, errState
	}
	ok := p.vecList(func(p *parser) bool {
		var cp cachedProposal
		if !p.vec(&cp.ref) || !cp.proposal.unmarshal(p) || !cp.sender.unmarshal(p) || !p.vec(&cp.updatePriv) {
			return false
		}
		if len(cp.updatePriv) == 0 {
			cp.updatePriv = nil
		}
		g.proposals = append(g.proposals, cp)
		return len(g.proposals) <= maxStateProposals
	})
	if !ok {
		return nil, errState
	}
	ok = p.vecList(func(p *parser) bool {
		e, err := unmarshalEpochKeys(p, s, &c, true, v1)
		if err != nil {
			return false
		}
		g.past = append(g.past, e)
		return len(g.past) <= max(maxStatePastEpochs, c.MaxPastEpochs)
	})
	if !ok {
		return nil, errState
	}
	ok = p.vecList(func(p *parser) bool {
		var r resumptionPSK
		if !p.u64(&r.epoch) || !p.vec(&r.psk) {
			return false
		}
		g.resumption = append(g.resumption, r)
		return len(g.resumption) <= maxResumptionPSKs
	})
	if !ok {
		return nil, errState
	}
	_, ok = p.optional(func(p *parser) bool {
		pc := &pendingCommit{}
		var treeData []byte
		if !p.vec(&pc.message) || !pc.ctx.unmarshal(p) || !p.vec(&treeData) {
			return false
		}
		if pc.tree, err = decodeRatchetTree(s, treeData); err != nil {
			return false
		}
		if pc.keys, err = unmarshalEpochSecrets(p, s); err != nil {
			return false
		}
		if pc.priv, err = unmarshalPrivateTree(p, s, g.own); err != nil {
			return false
		}
		if !p.vec(&pc.confTag) {
			return false
		}
		g.pending = pc
		return true
	})
	if !ok || !p.empty() {
		return nil, errState
	}
	if err := g.checkRestored(); err != nil {
		return nil, err
	}
	g.interim = interimTranscriptHash(s, g.cur.ctx.ConfirmedTranscriptHash, g.confTag)
	// A Config may keep fewer past epochs than the one the state was
	// written with.
	for len(g.past) > g.cfg.MaxPastEpochs {
		g.past[0].wipe()
		g.past = g.past[1:]
	}
	return g, nil
}

// Bounds on the lists of a saved state, checked while decoding, so that
// a state cannot make RestoreGroup build more than a Group holds: past
// epochs are at most Config.MaxPastEpochs (more are dropped after
// decoding, the oldest first), and no epoch caches more proposals than
// this.
const (
	maxStatePastEpochs = 1 << 10
	maxStateProposals  = 1 << 16
)

// checkRestored checks that the decoded parts of a state agree with each
// other (see the comment at the top of this file). Each check is linear in
// the size of the state, without cryptography.
func (g *Group) checkRestored() error {
	s := g.s
	bad := func(what string) error { return fmt.Errorf("%w: %s", errState, what) }
	cur := g.cur
	if uint32(g.own) >= cur.tree.size() {
		return bad("own leaf outside the tree")
	}
	if !g.removed {
		if cur.tree.leafNode(g.own) == nil {
			return bad("own leaf is blank")
		}
		if _, ok := g.priv.keyFor(cur.tree, g.own.node()); !ok {
			return bad("no private key for the own leaf")
		}
	}
	if err := g.priv.consistent(cur.tree); err != nil {
		return bad("private keys do not match the tree")
	}
	if err := checkRestoredTree(cur.tree); err != nil {
		return err
	}
	if len(g.confTag) != s.hashLen() || len(cur.prot.membershipKey) != s.hashLen() {
		return bad("confirmation tag or membership key length")
	}
	// The current epoch's schedule: everything but the secrets the
	// secret tree and the protection took over.
	for _, f := range [][]byte{g.keys.exporterSecret, g.keys.externalSecret, g.keys.confirmationKey,
		g.keys.resumptionPSK, g.keys.epochAuthenticator, g.keys.initSecret} {
		if f == nil {
			return bad("missing epoch secret")
		}
	}
	if g.keys.encryptionSecret != nil {
		return bad("encryption secret held twice")
	}
	epoch := cur.ctx.Epoch
	for i, e := range g.past {
		if !sameGroup(e.ctx, cur.ctx) || e.ctx.Epoch >= epoch || (i > 0 && e.ctx.Epoch <= g.past[i-1].ctx.Epoch) {
			return bad("past epochs out of order")
		}
		if e.prot.membershipKey != nil {
			return bad("past epoch with a membership key")
		}
	}
	for i, r := range g.resumption {
		if r.epoch >= epoch || (i > 0 && r.epoch <= g.resumption[i-1].epoch) || len(r.psk) != s.hashLen() {
			return bad("resumption PSKs out of order")
		}
	}
	for _, cp := range g.proposals {
		if len(cp.ref) != s.hashLen() {
			return bad("proposal reference length")
		}
		if cp.updatePriv != nil && len(cp.updatePriv) != s.privateKeyLen() {
			return bad("update private key length")
		}
	}
	if pc := g.pending; pc != nil {
		if !sameGroup(&pc.ctx, cur.ctx) || pc.ctx.Epoch != epoch+1 || epoch == math.MaxUint64 {
			return bad("pending commit for another epoch")
		}
		if len(pc.message) == 0 || len(pc.confTag) != s.hashLen() {
			return bad("pending commit message or tag")
		}
		if uint32(g.own) >= pc.tree.size() || pc.tree.leafNode(g.own) == nil {
			return bad("own leaf of the pending commit")
		}
		if err := pc.priv.consistent(pc.tree); err != nil {
			return bad("pending private keys do not match the tree")
		}
		if err := checkRestoredTree(pc.tree); err != nil {
			return err
		}
		if pc.keys.encryptionSecret == nil || pc.keys.senderDataSecret == nil || pc.keys.membershipKey == nil {
			return bad("missing pending epoch secret")
		}
	}
	return nil
}

// sameGroup reports whether two GroupContexts are of the same group.
func sameGroup(a, b *GroupContext) bool {
	return a.CipherSuite == b.CipherSuite && string(a.GroupID) == string(b.GroupID)
}

// checkRestoredTree makes the checks of validateStructure that later
// operations rely on to stay inside the tree: the unmerged_leaves lists.
// Keys and signatures were checked when the tree was received.
func checkRestoredTree(t *ratchetTree) error {
	for x := nodeIndex(1); int(x) < t.width(); x += 2 {
		if t.node(x).Parent == nil {
			continue
		}
		if err := t.checkUnmergedLeaves(nodeIndex(x)); err != nil {
			return fmt.Errorf("%w: %v", errState, err)
		}
	}
	return nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func marshalEpochKeys(b *builder, e *epochKeys) {
	marshalEpochKeysWithTree(b, e, e.tree.encode())
}

// marshalPastEpochKeys writes a past epoch. Such an epoch is only used to
// read late application messages, which needs nothing of its tree but the
// senders' signature keys and credentials, so only those are kept: leaves
// with every other field empty, and blank parents.
func marshalPastEpochKeys(b *builder, e *epochKeys) {
	marshalEpochKeysWithTree(b, e, sendersOnlyTree(e.tree))
}

func marshalEpochKeysWithTree(b *builder, e *epochKeys, tree []byte) {
	e.ctx.marshal(b)
	b.vec(tree)
	b.vec(e.prot.senderDataSecret)
	b.vec(e.prot.membershipKey)
	marshalSecretTree(b, e.prot.tree)
}

// sendersOnlyTree encodes t in the ratchet_tree format with each leaf
// reduced to its signature key and credential.
func sendersOnlyTree(t *ratchetTree) []byte {
	last := -1
	for l := range int(t.size()) {
		if t.leafNode(leafIndex(l)) != nil {
			last = l
		}
	}
	var b builder
	b.vecFunc(func(b *builder) {
		for x := 0; x <= 2*last; x++ {
			var ln *LeafNode
			if x%2 == 0 {
				ln = t.node(nodeIndex(x)).Leaf
			}
			b.optional(ln != nil, func(b *builder) {
				treeNode{Leaf: &LeafNode{
					SignatureKey:   ln.SignatureKey,
					Credential:     ln.Credential,
					LeafNodeSource: LeafNodeSourceUpdate,
				}}.marshal(b)
			})
		}
	})
	return b.bytes()
}

// unmarshalEpochKeys reads an epoch written by marshalEpochKeys, or by
// marshalPastEpochKeys when past is set. A past epoch holds no handshake
// ratchets; version 1 states still had them, and they are wiped.
func unmarshalEpochKeys(p *parser, s suite, c *Config, past, v1 bool) (*epochKeys, error) {
	ctx := new(GroupContext)
	var treeData, sds, mk []byte
	if !ctx.unmarshal(p) || !p.vec(&treeData) || !p.vec(&sds) || !p.vec(&mk) {
		return nil, errState
	}
	if ctx.CipherSuite != s.id() || len(ctx.GroupID) == 0 || hasDuplicateExtensions(ctx.Extensions) {
		return nil, errState
	}
	if len(sds) != s.hashLen() || (len(mk) != s.hashLen() && !(past && len(mk) == 0)) {
		return nil, errState
	}
	if len(mk) == 0 {
		mk = nil
	}
	tree, err := decodeRatchetTree(s, treeData)
	if err != nil {
		return nil, errState
	}
	st, err := unmarshalSecretTree(p, s, c.limits(), past && !v1)
	if err != nil {
		return nil, err
	}
	// A past epoch's tree keeps only its leaves up to the last member, so
	// it may be narrower than the secret tree (whose width is bounded by
	// unmarshalSecretTree); it is only used to look up senders, and is not
	// widened.
	if st.nLeaves != tree.size() && !(past && st.nLeaves > tree.size()) {
		return nil, errState
	}
	if past && v1 {
		st.keepApplicationOnly()
	}
	return &epochKeys{ctx: ctx, tree: tree, prot: &epochProtection{
		s:                s,
		gc:               ctx,
		membershipKey:    mk,
		senderDataSecret: sds,
		tree:             st,
		paddingSize:      c.Padding,
	}}, nil
}

// epochSecrets fields in a fixed order; consumed ones are written empty.
func epochSecretFields(e *epochSecrets) []*[]byte {
	return []*[]byte{&e.senderDataSecret, &e.encryptionSecret, &e.exporterSecret, &e.externalSecret,
		&e.confirmationKey, &e.membershipKey, &e.resumptionPSK, &e.epochAuthenticator, &e.initSecret}
}

func marshalEpochSecrets(b *builder, e *epochSecrets) {
	for _, f := range epochSecretFields(e) {
		b.vec(*f)
	}
}

func unmarshalEpochSecrets(p *parser, s suite) (*epochSecrets, error) {
	e := &epochSecrets{s: s}
	for _, f := range epochSecretFields(e) {
		if !p.vec(f) {
			return nil, errState
		}
		if len(*f) == 0 {
			*f = nil
		} else if len(*f) != s.hashLen() {
			return nil, errState
		}
	}
	return e, nil
}

func marshalPrivateTree(b *builder, pt *privateTree) {
	keys := slices.Sorted(maps.Keys(pt.keys))
	b.vecFunc(func(b *builder) {
		for _, x := range keys {
			b.u32(uint32(x))
			b.vec(pt.keys[x].priv)
			b.vec(pt.keys[x].pub)
		}
	})
}

// unmarshalPrivateTree reads the private keys in the increasing node
// order marshalPrivateTree writes. Whether they match the tree is checked
// by checkRestored.
func unmarshalPrivateTree(p *parser, s suite, self leafIndex) (*privateTree, error) {
	pt := &privateTree{self: self, keys: make(map[nodeIndex]hpkeKeyPair)}
	next := uint32(0)
	ok := p.vecList(func(p *parser) bool {
		var x uint32
		var kp hpkeKeyPair
		if !p.u32(&x) || !p.vec(&kp.priv) || !p.vec(&kp.pub) {
			return false
		}
		if x < next || x >= nodeWidth(maxTreeLeaves) || len(kp.priv) != s.privateKeyLen() {
			return false
		}
		next = x + 1
		pt.keys[nodeIndex(x)] = kp
		return true
	})
	if !ok {
		return nil, errState
	}
	return pt, nil
}

// marshalSecretTree writes the not yet consumed part of a secret tree
// (Section 9.2): the node secrets still held and each reached leaf's two
// ratchets with their retained keys.
func marshalSecretTree(b *builder, t *secretTree) {
	b.u32(t.nLeaves)
	nodes := slices.Sorted(maps.Keys(t.nodes))
	b.vecFunc(func(b *builder) {
		for _, x := range nodes {
			b.u32(uint32(x))
			b.vec(t.nodes[x])
		}
	})
	leaves := slices.Sorted(maps.Keys(t.leaves))
	b.vecFunc(func(b *builder) {
		for _, l := range leaves {
			b.u32(l)
			marshalHashRatchet(b, &t.leaves[l].handshake)
			marshalHashRatchet(b, &t.leaves[l].application)
		}
	})
}

func marshalHashRatchet(b *builder, r *hashRatchet) {
	b.vec(r.secret)
	b.u32(r.gen)
	b.vecFunc(func(b *builder) {
		for _, g := range r.order {
			k := r.skipped[g]
			b.u32(k.generation)
			b.vec(k.key)
			b.vec(k.nonce)
		}
	})
}

// unmarshalSecretTree reads a secret tree written by marshalSecretTree;
// applicationOnly is set for the tree of a past epoch, which holds no
// handshake ratchets.
// The width is a power of two no larger than any ratchet tree, nodes and
// leaves come in increasing order inside it, every secret, key and nonce
// has the suite's length, and the held node secrets form the frontier
// the lazy derivation of secretTree keeps.
func unmarshalSecretTree(p *parser, s suite, limits secretTreeLimits, applicationOnly bool) (*secretTree, error) {
	var n uint32
	if !p.u32(&n) || n == 0 || n > maxTreeLeaves || n&(n-1) != 0 {
		return nil, errState
	}
	t := &secretTree{s: s, nLeaves: n, limits: limits.withDefaults(), applicationOnly: applicationOnly,
		nodes: make(map[nodeIndex][]byte), leaves: make(map[uint32]*leafRatchets)}
	// The held secrets and the reached leaves must be as leafRatchetsFor
	// leaves them (Section 9): no held secret lies below another one, and
	// no reached leaf lies below or at a held secret. The subtrees of a
	// binary tree are nested or disjoint, so for the held secrets, read in
	// increasing order, it is enough that each subtree starts after the
	// previous one ends.
	end := -1
	next := uint32(0)
	ok := p.vecList(func(p *parser) bool {
		var x uint32
		var secret []byte
		if !p.u32(&x) || !p.vec(&secret) || x < next || x >= 2*n-1 || len(secret) != s.hashLen() {
			return false
		}
		span := 1<<level(nodeIndex(x)) - 1
		if int(x)-span <= end {
			return false
		}
		next, end = x+1, int(x)+span
		t.nodes[nodeIndex(x)] = secret
		return true
	})
	if !ok {
		return nil, errState
	}
	next = 0
	ok = p.vecList(func(p *parser) bool {
		var l uint32
		lr := &leafRatchets{}
		if !p.u32(&l) || l < next || l >= n || t.heldAtOrAbove(leafIndex(l).node()) ||
			!unmarshalHashRatchet(p, s, &lr.handshake, t.limits) || !unmarshalHashRatchet(p, s, &lr.application, t.limits) {
			return false
		}
		if applicationOnly && (lr.handshake.secret != nil || len(lr.handshake.order) > 0) {
			return false // a past epoch keeps no handshake keys
		}
		next = l + 1
		t.leaves[l] = lr
		return true
	})
	if !ok {
		return nil, errState
	}
	return t, nil
}

// heldAtOrAbove reports whether the secret of x or of one of its ancestors
// is held.
func (t *secretTree) heldAtOrAbove(x nodeIndex) bool {
	r := root(t.nLeaves)
	for {
		if _, ok := t.nodes[x]; ok {
			return true
		}
		if x == r {
			return false
		}
		x = parent(x)
	}
}

// unmarshalHashRatchet reads a ratchet written by marshalHashRatchet: its
// secret (empty once exhausted) and its retained keys, in increasing
// generation order below the ratchet's next generation. A Config that
// retains fewer keys than the one the state was written with drops the
// oldest.
func unmarshalHashRatchet(p *parser, s suite, r *hashRatchet, limits secretTreeLimits) bool {
	r.s = s
	if !p.vec(&r.secret) || !p.u32(&r.gen) {
		return false
	}
	switch len(r.secret) {
	case 0:
		r.secret = nil
	case s.hashLen():
	default:
		return false
	}
	ok := p.vecList(func(p *parser) bool {
		var k ratchetKey
		if !p.u32(&k.generation) || !p.vec(&k.key) || !p.vec(&k.nonce) {
			return false
		}
		if len(k.key) != s.aeadKeyLen() || len(k.nonce) != s.aeadNonceLen() {
			return false
		}
		if n := len(r.order); n > 0 && k.generation <= r.order[n-1] {
			return false
		}
		if r.secret != nil && k.generation >= r.gen {
			return false
		}
		if r.skipped == nil {
			r.skipped = make(map[uint32]ratchetKey)
		}
		r.skipped[k.generation] = k
		r.order = append(r.order, k.generation)
		return true
	})
	if !ok {
		return false
	}
	for len(r.order) > limits.MaxRetainedKeys {
		r.wipeSkipped(r.order[0])
		r.order = r.order[1:]
	}
	return true
}
