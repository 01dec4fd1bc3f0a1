package mls

import (
	"errors"
	"fmt"
	"maps"
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

const stateVersion = 1

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
	return b.bytes(), nil
}

// RestoreGroup decodes a state written by [Group.MarshalBinary]. cfg is
// the configuration to use from now on (it is not part of the state).
func RestoreGroup(data []byte, cfg *Config) (*Group, error) {
	c := cfg.withDefaults()
	p := newParser(data)
	var v uint8
	var cs uint16
	if !p.u8(&v) {
		return nil, errState
	}
	if v != stateVersion {
		return nil, fmt.Errorf("mls: unsupported group state version %d", v)
	}
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
	g.own, g.removed = leafIndex(own), removed == 1
	if g.cur, err = unmarshalEpochKeys(p, s, &c); err != nil {
		return nil, err
	}
	if g.keys, err = unmarshalEpochSecrets(p, s); err != nil {
		return nil, err
	}
	// The current epoch's protection shares these with the schedule.
	g.keys.senderDataSecret = g.cur.prot.senderDataSecret
	g.keys.membershipKey = g.cur.prot.membershipKey
	if g.priv, err = unmarshalPrivateTree(p, g.own); err != nil {
		return nil, err
	}
	if !p.vec(&g.confTag) {
		return nil, errState
	}
	g.interim = interimTranscriptHash(s, g.cur.ctx.ConfirmedTranscriptHash, g.confTag)
	ok := p.vecList(func(p *parser) bool {
		var cp cachedProposal
		if !p.vec(&cp.ref) || !cp.proposal.unmarshal(p) || !cp.sender.unmarshal(p) || !p.vec(&cp.updatePriv) {
			return false
		}
		if len(cp.updatePriv) == 0 {
			cp.updatePriv = nil
		}
		g.proposals = append(g.proposals, cp)
		return true
	})
	if !ok {
		return nil, errState
	}
	ok = p.vecList(func(p *parser) bool {
		e, err := unmarshalEpochKeys(p, s, &c)
		if err != nil {
			return false
		}
		g.past = append(g.past, e)
		return true
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
		return true
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
		if pc.priv, err = unmarshalPrivateTree(p, g.own); err != nil {
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
	return g, nil
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
				ln = t.nodes[x].Leaf
			}
			b.optional(ln != nil, func(b *builder) {
				Node{Leaf: &LeafNode{
					SignatureKey:   ln.SignatureKey,
					Credential:     ln.Credential,
					LeafNodeSource: LeafNodeSourceUpdate,
				}}.marshal(b)
			})
		}
	})
	return b.bytes()
}

func unmarshalEpochKeys(p *parser, s suite, c *Config) (*epochKeys, error) {
	ctx := new(GroupContext)
	var treeData, sds, mk []byte
	if !ctx.unmarshal(p) || !p.vec(&treeData) || !p.vec(&sds) || !p.vec(&mk) {
		return nil, errState
	}
	tree, err := decodeRatchetTree(s, treeData)
	if err != nil {
		return nil, errState
	}
	st, err := unmarshalSecretTree(p, s, c.limits())
	if err != nil {
		return nil, err
	}
	if tree.size() < st.nLeaves {
		// A past epoch's tree keeps only its leaves; restore its width.
		tree.resize(st.nLeaves)
	}
	if st.nLeaves != tree.size() {
		return nil, errState
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

func unmarshalPrivateTree(p *parser, self leafIndex) (*privateTree, error) {
	pt := &privateTree{self: self, keys: make(map[nodeIndex]hpkeKeyPair)}
	ok := p.vecList(func(p *parser) bool {
		var x uint32
		var kp hpkeKeyPair
		if !p.u32(&x) || !p.vec(&kp.priv) || !p.vec(&kp.pub) {
			return false
		}
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

func unmarshalSecretTree(p *parser, s suite, limits secretTreeLimits) (*secretTree, error) {
	var n uint32
	if !p.u32(&n) || n == 0 || n&(n-1) != 0 {
		return nil, errState
	}
	t := &secretTree{s: s, nLeaves: n, limits: limits.withDefaults(),
		nodes: make(map[nodeIndex][]byte), leaves: make(map[uint32]*leafRatchets)}
	ok := p.vecList(func(p *parser) bool {
		var x uint32
		var secret []byte
		if !p.u32(&x) || !p.vec(&secret) || x >= 2*n-1 {
			return false
		}
		t.nodes[nodeIndex(x)] = secret
		return true
	})
	if !ok {
		return nil, errState
	}
	ok = p.vecList(func(p *parser) bool {
		var l uint32
		lr := &leafRatchets{}
		if !p.u32(&l) || l >= n || !unmarshalHashRatchet(p, s, &lr.handshake) || !unmarshalHashRatchet(p, s, &lr.application) {
			return false
		}
		t.leaves[l] = lr
		return true
	})
	if !ok {
		return nil, errState
	}
	return t, nil
}

func unmarshalHashRatchet(p *parser, s suite, r *hashRatchet) bool {
	r.s = s
	if !p.vec(&r.secret) || !p.u32(&r.gen) {
		return false
	}
	if len(r.secret) == 0 {
		r.secret = nil
	}
	return p.vecList(func(p *parser) bool {
		var k ratchetKey
		if !p.u32(&k.generation) || !p.vec(&k.key) || !p.vec(&k.nonce) {
			return false
		}
		if r.skipped == nil {
			r.skipped = make(map[uint32]ratchetKey)
		}
		r.skipped[k.generation] = k
		r.order = append(r.order, k.generation)
		return true
	})
}
