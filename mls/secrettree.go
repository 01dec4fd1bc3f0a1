package mls

import (
	"errors"
	"fmt"
)

// This file implements the secret tree of RFC 9420 §9: the tree of secrets
// rooted at an epoch's encryption_secret, the per-leaf handshake and
// application hash ratchets (§9.1), and the deletion schedule (§9.2).
//
// The tree is derived lazily. Only the nodes on the path from the root to a
// leaf that has actually been used are ever computed, so a group with 10,000
// members costs nothing for the members that never send. When a node's two
// children are derived, the node's own secret is deleted; when a leaf's two
// ratchets are initialised, the leaf secret is deleted. A ratchet keeps only
// its next secret and a bounded set of keys for generations it skipped over.

// Default limits for out-of-order delivery (§9.2 lets members keep unconsumed
// values "for some reasonable amount of time").
const (
	// defaultMaxForwardSkip is how many generations a received message may
	// jump ahead of the next expected generation of its ratchet.
	defaultMaxForwardSkip = 1000
	// defaultMaxRetainedKeys is how many skipped key/nonce pairs one ratchet
	// keeps for late messages; the oldest are dropped first.
	defaultMaxRetainedKeys = 1000
)

var (
	errGenerationConsumed = errors.New("mls: generation already consumed or too old")
	errGenerationTooFar   = errors.New("mls: generation too far ahead of the ratchet")
	errLeafOutOfRange     = errors.New("mls: leaf index outside the secret tree")
	errRatchetExhausted   = errors.New("mls: ratchet generation counter exhausted")
	errHandshakeDeleted   = errors.New("mls: handshake keys of a past epoch are deleted")
)

// ratchetType selects one of a leaf's two hash ratchets (§9).
type ratchetType uint8

const (
	handshakeRatchet ratchetType = iota
	applicationRatchet
)

// secretTreeLimits bounds the work and memory an out-of-order (or hostile)
// sender can demand of a receiving ratchet. A zero field means its default.
type secretTreeLimits struct {
	// MaxForwardSkip is the largest number of generations a message may
	// skip ahead of its ratchet. Every skipped generation costs three
	// ExpandWithLabel calls, so this caps the cost of one forged header.
	MaxForwardSkip uint32
	// MaxRetainedKeys is the number of skipped keys kept per ratchet.
	MaxRetainedKeys int
}

func (l secretTreeLimits) withDefaults() secretTreeLimits {
	if l.MaxForwardSkip == 0 {
		l.MaxForwardSkip = defaultMaxForwardSkip
	}
	if l.MaxRetainedKeys <= 0 {
		l.MaxRetainedKeys = defaultMaxRetainedKeys
	}
	return l
}

// ratchetKey is one generation's key and nonce (§9.1).
type ratchetKey struct {
	generation uint32
	key        []byte
	nonce      []byte
}

// secretTree is the §9 secret tree of one epoch. It is not safe for
// concurrent use.
type secretTree struct {
	s       suite
	nLeaves uint32
	limits  secretTreeLimits
	// applicationOnly is set for the tree of a past epoch, which only
	// reads late application messages (§15.3): its handshake ratchets are
	// deleted, and are not derived for leaves reached later.
	applicationOnly bool
	// nodes holds the not yet consumed tree_node_[N]_secret values, keyed by
	// node index. Initially only the root is present.
	nodes map[nodeIndex][]byte
	// leaves holds the ratchets of the leaves that were reached.
	leaves map[uint32]*leafRatchets
}

type leafRatchets struct {
	handshake   hashRatchet
	application hashRatchet
}

// newSecretTree starts the secret tree of an epoch with nLeaves leaves from
// its encryption_secret. The tree takes ownership of encryptionSecret: it is
// the root node secret and is wiped once the root's children are derived.
func newSecretTree(s suite, encryptionSecret []byte, nLeaves uint32, limits secretTreeLimits) (*secretTree, error) {
	// Ratchet trees are perfect binary trees (§7), so the leaf count is a
	// power of two.
	if nLeaves == 0 || nLeaves > 1<<31 || nLeaves&(nLeaves-1) != 0 {
		return nil, fmt.Errorf("mls: invalid secret tree size %d", nLeaves)
	}
	if len(encryptionSecret) != s.hashLen() {
		return nil, errors.New("mls: encryption secret has the wrong length")
	}
	return &secretTree{
		s:       s,
		nLeaves: nLeaves,
		limits:  limits.withDefaults(),
		nodes:   map[nodeIndex][]byte{root(nLeaves): encryptionSecret},
		leaves:  make(map[uint32]*leafRatchets),
	}, nil
}

// leafRatchetsFor returns the ratchets of leaf, deriving the tree path down to
// it on first use (§9). Each parent secret is deleted as soon as both of its
// children exist, and the leaf secret once its ratchets exist (§9.2).
func (t *secretTree) leafRatchetsFor(leaf uint32) (*leafRatchets, error) {
	if leaf >= t.nLeaves {
		return nil, errLeafOutOfRange
	}
	if lr, ok := t.leaves[leaf]; ok {
		return lr, nil
	}
	d, err := t.deriveLeaf(leaf)
	if err != nil {
		return nil, err
	}
	d.apply()
	return d.lr, nil
}

// leafDerivation is the derivation of a leaf's ratchets that is not yet
// stored in the tree: the held ancestor secret it consumes, the secrets of
// the siblings along the way down, and the leaf's two ratchets.
type leafDerivation struct {
	t        *secretTree
	leaf     uint32
	from     nodeIndex
	siblings []nodeSecret
	lr       *leafRatchets
}

type nodeSecret struct {
	x      nodeIndex
	secret []byte
}

// deriveLeaf computes the ratchets of a leaf not reached yet, without
// changing the tree, so that a lookup for a message that then fails to
// authenticate leaves the tree as it was.
func (t *secretTree) deriveLeaf(leaf uint32) (*leafDerivation, error) {
	target := leafIndex(leaf).node()
	// Find the lowest ancestor of the leaf whose secret is still held.
	// Walking down from the root, the first node found on the path is it:
	// a node's secret is only held while none of its ancestors' are, and
	// the leaf's own secret is gone only once its ratchets exist.
	x := root(t.nLeaves)
	for {
		if _, ok := t.nodes[x]; ok {
			break
		}
		if x.isLeaf() {
			return nil, errors.New("mls: internal error: secret tree path missing")
		}
		if target < x {
			x = left(x)
		} else {
			x = right(x)
		}
	}
	d := &leafDerivation{t: t, leaf: leaf, from: x}
	secret, owned := t.nodes[x], false
	for !x.isLeaf() {
		l, r := left(x), right(x)
		ls := expandWithLabel(t.s, secret, "tree", []byte("left"), t.s.hashLen())
		rs := expandWithLabel(t.s, secret, "tree", []byte("right"), t.s.hashLen())
		if owned {
			clear(secret)
		}
		if target < x {
			d.siblings = append(d.siblings, nodeSecret{r, rs})
			x, secret = l, ls
		} else {
			d.siblings = append(d.siblings, nodeSecret{l, ls})
			x, secret = r, rs
		}
		owned = true
	}
	d.lr = &leafRatchets{application: newHashRatchet(t.s, expandWithLabel(t.s, secret, "application", nil, t.s.hashLen()))}
	if t.applicationOnly {
		d.lr.handshake = hashRatchet{s: t.s}
	} else {
		d.lr.handshake = newHashRatchet(t.s, expandWithLabel(t.s, secret, "handshake", nil, t.s.hashLen()))
	}
	if owned {
		clear(secret)
	}
	return d, nil
}

// apply stores the derivation: the consumed ancestor secret is deleted
// (§9.2), the siblings' secrets and the leaf's ratchets are kept.
func (d *leafDerivation) apply() {
	t := d.t
	clear(t.nodes[d.from])
	delete(t.nodes, d.from)
	for _, n := range d.siblings {
		t.nodes[n.x] = n.secret
	}
	t.leaves[d.leaf] = d.lr
}

// discard wipes a derivation that is not applied.
func (d *leafDerivation) discard() {
	for _, n := range d.siblings {
		clear(n.secret)
	}
	d.lr.handshake.wipe()
	d.lr.application.wipe()
}

// wipe overwrites every secret the tree still holds: node secrets, ratchet
// secrets and retained keys. It is called when the epoch leaves the window
// of past epochs, whose keys §9.2 says to delete.
func (t *secretTree) wipe() {
	for x, secret := range t.nodes {
		clear(secret)
		delete(t.nodes, x)
	}
	for l, lr := range t.leaves {
		lr.handshake.wipe()
		lr.application.wipe()
		delete(t.leaves, l)
	}
}

// keepApplicationOnly turns the tree into that of a past epoch: the
// handshake ratchets and their retained keys are wiped (§9.2: they are
// never used again), and no new ones are derived.
func (t *secretTree) keepApplicationOnly() {
	t.applicationOnly = true
	for _, lr := range t.leaves {
		lr.handshake.wipe()
	}
}

func (t *secretTree) ratchet(leaf uint32, rt ratchetType) (*hashRatchet, error) {
	if rt == handshakeRatchet && t.applicationOnly {
		return nil, errHandshakeDeleted
	}
	lr, err := t.leafRatchetsFor(leaf)
	if err != nil {
		return nil, err
	}
	if rt == handshakeRatchet {
		return &lr.handshake, nil
	}
	return &lr.application, nil
}

// nextSendKey returns the key and nonce of the next unused generation of the
// sender's own ratchet and consumes it: the ratchet moves past it at once, so
// the same generation is never handed out twice (§6.3.1).
func (t *secretTree) nextSendKey(leaf uint32, rt ratchetType) (ratchetKey, error) {
	r, err := t.ratchet(leaf, rt)
	if err != nil {
		return ratchetKey{}, err
	}
	return r.next()
}

// receiveKey looks up the key for generation of leaf's ratchet without
// changing the tree: not even the ratchets of a leaf reached for the first
// time are stored yet. The caller decrypts with the key and then calls
// commit, or discard when the message fails, so a forged or corrupted
// message (whose sender data any member can produce) neither advances the
// ratchet nor deletes keys (§9.2: only successful decryption consumes a
// value), and leaves the tree, and so the serialized state, as it was.
// Only one pendingKey of a tree may be outstanding at a time.
func (t *secretTree) receiveKey(leaf uint32, rt ratchetType, generation uint32) (ratchetKey, *pendingKey, error) {
	if leaf >= t.nLeaves {
		return ratchetKey{}, nil, errLeafOutOfRange
	}
	if rt == handshakeRatchet && t.applicationOnly {
		return ratchetKey{}, nil, errHandshakeDeleted
	}
	pk := &pendingKey{}
	lr, ok := t.leaves[leaf]
	if !ok {
		d, err := t.deriveLeaf(leaf)
		if err != nil {
			return ratchetKey{}, nil, err
		}
		pk.leaf, lr = d, d.lr
	}
	r := &lr.application
	if rt == handshakeRatchet {
		r = &lr.handshake
	}
	k, step, err := r.lookup(generation, t.limits)
	if err != nil {
		pk.discard()
		return ratchetKey{}, nil, err
	}
	pk.step = step
	return k, pk, nil
}

// pendingKey is what consuming a received key would change in the secret
// tree. Exactly one of commit and discard must be called.
type pendingKey struct {
	leaf *leafDerivation // the leaf's ratchets, when first reached
	step *ratchetStep
}

// commit consumes the key (§9.2). A key taken from the retained keys is
// wiped; a freshly derived one is the caller's to wipe.
func (p *pendingKey) commit() {
	if p.leaf != nil {
		p.leaf.apply()
	}
	if p.step != nil {
		p.step.apply()
	}
}

// discard wipes everything the lookup derived, the key included, and
// leaves the tree unchanged.
func (p *pendingKey) discard() {
	if p.step != nil {
		p.step.discard()
	}
	if p.leaf != nil {
		p.leaf.discard()
	}
}

// hashRatchet is one §9.1 sender ratchet: ratchet_secret_[N]_[j] for the next
// generation j, and the keys of skipped generations kept for late messages.
type hashRatchet struct {
	s      suite
	secret []byte // ratchet_secret_[N]_[gen]; nil once exhausted
	gen    uint32
	// skipped holds keys for generations below gen that have not been
	// consumed yet, oldest first in order.
	skipped map[uint32]ratchetKey
	order   []uint32
}

func newHashRatchet(s suite, secret []byte) hashRatchet {
	return hashRatchet{s: s, secret: secret}
}

// derive computes the key and nonce of generation g from the ratchet secret
// of that generation, and the ratchet secret of generation g+1.
func deriveRatchetStep(s suite, secret []byte, g uint32) (ratchetKey, []byte) {
	k := ratchetKey{
		generation: g,
		key:        deriveTreeSecret(s, secret, "key", g, s.aeadKeyLen()),
		nonce:      deriveTreeSecret(s, secret, "nonce", g, s.aeadNonceLen()),
	}
	next := deriveTreeSecret(s, secret, "secret", g, s.hashLen())
	return k, next
}

// next consumes the ratchet's next generation for sending.
func (r *hashRatchet) next() (ratchetKey, error) {
	if r.secret == nil {
		return ratchetKey{}, errRatchetExhausted
	}
	k, nextSecret := deriveRatchetStep(r.s, r.secret, r.gen)
	r.advanceTo(nextSecret, r.gen+1)
	return k, nil
}

// advanceTo replaces the ratchet secret (wiping the old one) and sets the
// next generation. At the end of the uint32 range the ratchet is exhausted.
func (r *hashRatchet) advanceTo(secret []byte, gen uint32) {
	clear(r.secret)
	if gen == 0 { // wrapped around: generation 2^32-1 was the last one
		clear(secret)
		r.secret = nil
		return
	}
	r.secret = secret
	r.gen = gen
}

// ratchetStep is the change a received generation makes to a ratchet:
// the deletion of a retained key, or a move forward past g that keeps the
// keys of the generations skipped over.
type ratchetStep struct {
	r      *hashRatchet
	g      uint32
	stored bool         // the key is a retained one
	key    ratchetKey   // a derived key (the caller's copy)
	skip   []ratchetKey // keys of the generations between r.gen and g
	next   []byte       // ratchet secret of generation g+1
	limits secretTreeLimits
}

// lookup finds the key of generation g for a received message. It changes
// nothing; the returned step applies the consumption, or wipes what was
// derived when the message is rejected.
func (r *hashRatchet) lookup(g uint32, limits secretTreeLimits) (ratchetKey, *ratchetStep, error) {
	if r.secret == nil || g < r.gen {
		k, ok := r.skipped[g]
		if !ok {
			return ratchetKey{}, nil, errGenerationConsumed
		}
		return k, &ratchetStep{r: r, g: g, stored: true}, nil
	}
	if g-r.gen > limits.MaxForwardSkip {
		return ratchetKey{}, nil, errGenerationTooFar
	}
	// Derive forward on copies; nothing is stored until apply.
	st := &ratchetStep{r: r, g: g, limits: limits}
	secret, owned := r.secret, false
	for j := r.gen; j < g; j++ {
		k, next := deriveRatchetStep(r.s, secret, j)
		if owned {
			clear(secret)
		}
		secret, owned = next, true
		st.skip = append(st.skip, k)
	}
	k, next := deriveRatchetStep(r.s, secret, g)
	if owned {
		clear(secret)
	}
	st.key, st.next = k, next
	return k, st, nil
}

// apply consumes generation g: a retained key is deleted; otherwise the
// ratchet moves past g, keeping at most MaxRetainedKeys of the skipped
// keys, and the skipped keys beyond that cap are wiped (§9.2).
func (st *ratchetStep) apply() {
	r := st.r
	if st.stored {
		r.dropSkipped(st.g)
		return
	}
	keep := min(len(st.skip), st.limits.MaxRetainedKeys)
	for _, k := range st.skip[:len(st.skip)-keep] {
		clear(k.key)
		clear(k.nonce)
	}
	for _, k := range st.skip[len(st.skip)-keep:] {
		r.addSkipped(k, st.limits.MaxRetainedKeys)
	}
	r.advanceTo(st.next, st.g+1)
}

// discard wipes what lookup derived for a message that was rejected.
func (st *ratchetStep) discard() {
	if st.stored {
		return
	}
	for _, k := range st.skip {
		clear(k.key)
		clear(k.nonce)
	}
	clear(st.next)
	clear(st.key.key)
	clear(st.key.nonce)
}

func (r *hashRatchet) addSkipped(k ratchetKey, max int) {
	if r.skipped == nil {
		r.skipped = make(map[uint32]ratchetKey)
	}
	for len(r.order) >= max {
		r.wipeSkipped(r.order[0])
		r.order = r.order[1:]
	}
	r.skipped[k.generation] = k
	r.order = append(r.order, k.generation)
}

func (r *hashRatchet) wipeSkipped(g uint32) bool {
	k, ok := r.skipped[g]
	if !ok {
		return false
	}
	clear(k.key)
	clear(k.nonce)
	delete(r.skipped, g)
	return true
}

// wipe overwrites the ratchet secret and every retained key.
func (r *hashRatchet) wipe() {
	clear(r.secret)
	r.secret = nil
	for _, g := range r.order {
		r.wipeSkipped(g)
	}
	r.order = nil
}

// dropSkipped deletes a skipped key once it has been used (§9.2).
func (r *hashRatchet) dropSkipped(g uint32) {
	r.wipeSkipped(g)
	for i, o := range r.order {
		if o == g {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}
