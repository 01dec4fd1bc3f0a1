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
	for {
		secret := t.nodes[x]
		delete(t.nodes, x)
		if x.isLeaf() {
			lr := &leafRatchets{
				handshake:   newHashRatchet(t.s, expandWithLabel(t.s, secret, "handshake", nil, t.s.hashLen())),
				application: newHashRatchet(t.s, expandWithLabel(t.s, secret, "application", nil, t.s.hashLen())),
			}
			clear(secret)
			t.leaves[leaf] = lr
			return lr, nil
		}
		l, r := left(x), right(x)
		t.nodes[l] = expandWithLabel(t.s, secret, "tree", []byte("left"), t.s.hashLen())
		t.nodes[r] = expandWithLabel(t.s, secret, "tree", []byte("right"), t.s.hashLen())
		clear(secret)
		if target < x {
			x = l
		} else {
			x = r
		}
	}
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

func (t *secretTree) ratchet(leaf uint32, rt ratchetType) (*hashRatchet, error) {
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
// consuming anything. The caller decrypts with it and then calls commit, so a
// forged or corrupted message (whose sender data any member can produce)
// neither advances the ratchet nor deletes keys (§9.2: only successful
// decryption consumes a value).
func (t *secretTree) receiveKey(leaf uint32, rt ratchetType, generation uint32) (ratchetKey, func(), error) {
	r, err := t.ratchet(leaf, rt)
	if err != nil {
		return ratchetKey{}, nil, err
	}
	return r.lookup(generation, t.limits)
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

// lookup finds the key of generation g for a received message. It changes
// nothing; the returned commit function applies the consumption: it deletes
// the key of g, records the keys of any generations skipped over, and moves
// the ratchet past g.
func (r *hashRatchet) lookup(g uint32, limits secretTreeLimits) (ratchetKey, func(), error) {
	if r.secret == nil || g < r.gen {
		k, ok := r.skipped[g]
		if !ok {
			return ratchetKey{}, nil, errGenerationConsumed
		}
		return k, func() { r.dropSkipped(g) }, nil
	}
	if g-r.gen > limits.MaxForwardSkip {
		return ratchetKey{}, nil, errGenerationTooFar
	}
	// Derive forward on copies; nothing is stored until commit.
	var pending []ratchetKey
	secret, owned := r.secret, false
	for j := r.gen; j < g; j++ {
		k, next := deriveRatchetStep(r.s, secret, j)
		if owned {
			clear(secret)
		}
		secret, owned = next, true
		pending = append(pending, k)
	}
	k, next := deriveRatchetStep(r.s, secret, g)
	if owned {
		clear(secret)
	}
	commit := func() {
		keep := len(pending)
		if keep > limits.MaxRetainedKeys {
			keep = limits.MaxRetainedKeys
		}
		for _, p := range pending[len(pending)-keep:] {
			r.addSkipped(p, limits.MaxRetainedKeys)
		}
		r.advanceTo(next, g+1)
	}
	return k, commit, nil
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
