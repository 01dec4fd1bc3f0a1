package mls

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
)

// The ratchet tree (RFC 9420, §4 and §7).
//
// A ratchetTree holds the public state of a group's tree in the array
// representation of Appendix C. Alongside the nodes it keeps, per node:
//
//   - the cached tree hash of the subtree headed by the node (§7.8), or nil
//     when it must be recomputed;
//   - the number of non-blank nodes in that subtree, which makes "is the
//     resolution of this node empty" an O(1) question and lets resolutions
//     skip blank regions;
//   - the number of non-blank leaves in that subtree, which finds the
//     leftmost blank leaf for an Add (§12.1.1) and the truncation point after
//     a Remove (§12.1.3) in O(log n).
//
// Every change goes through setNode, which updates these along the direct
// path of the changed node only, so single-node and single-path changes cost
// O(log n) plus the hashing of the changed path.
//
// Node contents (*LeafNode, *ParentNode) are never modified in place once
// they are in a tree: a change replaces the pointer. Clones share the
// per-node data in copy-on-write pages (see ratchetTree), so a clone costs
// a copy of the page list and a change to one path O(log n) page copies.
//
// A ratchetTree is not safe for concurrent use, not even for reads, because
// computing a tree hash fills the cache. The parallel checks of this
// package rely on two exceptions: the hashes of disjoint subtrees fill
// disjoint cache entries, so they may be computed concurrently
// (treeHashParallel); and once the root hash is computed every node's hash
// is cached, so hashing only reads.

// nodeType distinguishes leaf and parent nodes in a serialized Node and in
// TreeHashInput (§7.8).
type nodeType uint8

const (
	nodeTypeLeaf   nodeType = 1
	nodeTypeParent nodeType = 2
)

// parentNodeData (the RFC's ParentNode) is the content of a non-blank parent node (§7.1).
type parentNodeData struct {
	EncryptionKey  []byte   // HPKEPublicKey
	ParentHash     []byte   // §7.9
	UnmergedLeaves []uint32 // leaf indices, strictly increasing
}

func (n *parentNodeData) marshal(b *builder) {
	b.vec(n.EncryptionKey)
	b.vec(n.ParentHash)
	b.vecFunc(func(b *builder) {
		for _, l := range n.UnmergedLeaves {
			b.u32(l)
		}
	})
}

func (n *parentNodeData) unmarshal(p *parser) bool {
	n.UnmergedLeaves = nil
	return p.vec(&n.EncryptionKey) && p.vec(&n.ParentHash) &&
		p.vecList(func(p *parser) bool {
			var l uint32
			if !p.u32(&l) {
				return false
			}
			n.UnmergedLeaves = append(n.UnmergedLeaves, l)
			return true
		})
}

// treeNode (the RFC's Node) is one entry of a ratchet tree: a leaf, a parent, or blank when both
// are nil (the null optional<Node> of §12.4.3.3). At most one is set.
type treeNode struct {
	Leaf   *LeafNode
	Parent *parentNodeData
}

func (n treeNode) blank() bool { return n.Leaf == nil && n.Parent == nil }

// encryptionKey returns the HPKE public key of a non-blank node.
func (n treeNode) encryptionKey() []byte {
	switch {
	case n.Leaf != nil:
		return n.Leaf.EncryptionKey
	case n.Parent != nil:
		return n.Parent.EncryptionKey
	}
	return nil
}

// marshal encodes a non-blank Node (§12.4.3.3).
func (n treeNode) marshal(b *builder) {
	if n.Leaf != nil {
		b.u8(uint8(nodeTypeLeaf))
		n.Leaf.marshal(b)
		return
	}
	b.u8(uint8(nodeTypeParent))
	n.Parent.marshal(b)
}

func (n *treeNode) unmarshal(p *parser) bool {
	var t uint8
	if !p.u8(&t) {
		return false
	}
	switch nodeType(t) {
	case nodeTypeLeaf:
		n.Leaf, n.Parent = new(LeafNode), nil
		return n.Leaf.unmarshal(p)
	case nodeTypeParent:
		n.Leaf, n.Parent = nil, new(parentNodeData)
		return n.Parent.unmarshal(p)
	}
	return false
}

// ratchetTree is the public ratchet tree of a group. The zero value is not
// usable; see newRatchetTree and decodeRatchetTree.
//
// The per-node data lives in pages of treePageSize consecutive nodes that
// clones share: clone copies the list of pages, not the nodes, and a tree
// copies a page the first time it changes a node in it (copy on write).
// A page is writable by the tree whose owner it carries; clone gives both
// trees new owners, so neither writes a page the other can see. A change
// to one path copies the page holding its lowest levels and one page per
// level above, so a Commit's tree costs O(log n) pages, not O(n) nodes.
//
// The cached hashes are the exception: a tree fills a missing hash in a
// shared page in place. That is safe because a page is only shared while
// neither tree changed anything under any node in it (every change drops
// the cached hashes along its direct path, which copies those pages), so
// the hash of a node in a shared page is the same in every tree sharing
// it.
type ratchetTree struct {
	s     suite
	nodeN int         // number of nodes: nodeWidth(size)
	pages []*treePage // ceil(nodeN / treePageSize) pages
	owner *treeOwner  // pages with this owner are this tree's alone
	// creds is the credential summary of the leaves (proposals.go), nil
	// until it is asked for and after a change that may alter it.
	creds *credentialSummary
}

const (
	treePageBits = 6
	treePageSize = 1 << treePageBits
)

// treePage holds the data of treePageSize consecutive nodes.
type treePage struct {
	owner  *treeOwner
	nodes  [treePageSize]treeNode
	hashes [treePageSize][]byte // tree hash per node; nil means not computed
	filled [treePageSize]uint32 // non-blank nodes in the subtree under each node
	leaves [treePageSize]uint32 // non-blank leaves in the subtree under each node
	// keyTags holds short fingerprints (keyTag) of each node's keys: its
	// encryption key's in the high half, a leaf's signature key's in the
	// low half; zero for a blank node. A scan for repeated keys reads
	// these, and a node's keys only when a fingerprint may match.
	keyTags [treePageSize]uint64
}

// treeOwner identifies the tree that may write a page. It is not empty, so
// that distinct owners have distinct addresses.
type treeOwner struct{ _ byte }

// keyTag is a fingerprint of a public key for quick inequality tests:
// equal keys have equal tags. It is never zero.
func keyTag(k []byte) uint32 {
	var head, tail [8]byte
	copy(head[:], k)
	if len(k) > 8 {
		copy(tail[:], k[len(k)-8:])
	}
	h := binary.LittleEndian.Uint64(head[:]) ^ bits.RotateLeft64(binary.LittleEndian.Uint64(tail[:]), 29)
	return uint32(h^h>>32) | 1
}

// width returns the number of nodes, blank or not.
func (t *ratchetTree) width() int { return t.nodeN }

func (t *ratchetTree) filledAt(x nodeIndex) uint32 {
	return t.pages[x>>treePageBits].filled[x&(treePageSize-1)]
}

func (t *ratchetTree) leavesAt(x nodeIndex) uint32 {
	return t.pages[x>>treePageBits].leaves[x&(treePageSize-1)]
}

// cachedHash returns the cached tree hash of node x, nil when there is none.
func (t *ratchetTree) cachedHash(x nodeIndex) []byte {
	return t.pages[x>>treePageBits].hashes[x&(treePageSize-1)]
}

// storeHash caches the tree hash of node x, in place even in a shared page
// (see ratchetTree).
func (t *ratchetTree) storeHash(x nodeIndex, h []byte) {
	t.pages[x>>treePageBits].hashes[x&(treePageSize-1)] = h
}

// writable returns the page of node x, first copying it when another tree
// may see it.
func (t *ratchetTree) writable(x nodeIndex) (*treePage, int) {
	i := int(x >> treePageBits)
	p := t.pages[i]
	if p.owner != t.owner {
		np := new(treePage)
		*np = *p
		np.owner = t.owner
		t.pages[i] = np
		p = np
	}
	return p, int(x & (treePageSize - 1))
}

// setWidth makes the tree hold w nodes: pages are added or dropped, new
// nodes are blank, and the nodes past w in the last page are cleared.
func (t *ratchetTree) setWidth(w int) {
	if t.owner == nil {
		t.owner = new(treeOwner)
	}
	np := (w + treePageSize - 1) / treePageSize
	for len(t.pages) < np {
		t.pages = append(t.pages, &treePage{owner: t.owner})
	}
	clear(t.pages[np:])
	t.pages = t.pages[:np]
	if w < t.nodeN && w%treePageSize != 0 {
		p, j := t.writable(nodeIndex(w))
		var blank treePage
		copy(p.nodes[j:], blank.nodes[j:])
		copy(p.hashes[j:], blank.hashes[j:])
		copy(p.filled[j:], blank.filled[j:])
		copy(p.leaves[j:], blank.leaves[j:])
		copy(p.keyTags[j:], blank.keyTags[j:])
	}
	t.nodeN = w
}

var errTreeDecode = errors.New("mls: malformed ratchet tree")

// maxTreeLeaves caps the width of a decoded ratchet tree. A blank node costs one
// byte on the wire but about fifty in memory, so without a cap a 64 MiB
// ratchet_tree extension could demand gigabytes. 2^18 leaves (about 25 MB
// of tree state) is far above the group sizes MLS is used for.
const maxTreeLeaves = 1 << 18

// newRatchetTree returns a one-member tree holding leaf (§11).
func newRatchetTree(s suite, leaf *LeafNode) *ratchetTree {
	t := &ratchetTree{s: s}
	t.resize(1)
	t.setNode(0, treeNode{Leaf: leaf})
	return t
}

// size returns the number of leaves, blank or not. It is a power of two.
func (t *ratchetTree) size() uint32 { return uint32(t.nodeN+1) / 2 }

// rootIndex returns the root node index.
func (t *ratchetTree) rootIndex() nodeIndex { return root(t.size()) }

// memberCount returns the number of non-blank leaves.
func (t *ratchetTree) memberCount() uint32 { return t.leavesAt(t.rootIndex()) }

// node returns node x; x must be inside the tree.
func (t *ratchetTree) node(x nodeIndex) treeNode {
	return t.pages[x>>treePageBits].nodes[x&(treePageSize-1)]
}

// leafNode returns the LeafNode at leaf l, or nil when l is blank or outside
// the tree.
func (t *ratchetTree) leafNode(l leafIndex) *LeafNode {
	if uint32(l) >= t.size() {
		return nil
	}
	return t.node(l.node()).Leaf
}

// clone returns a copy of t that can be changed independently. The two
// share every page until one of them changes it, and node contents are
// shared, which is safe because they are never modified in place. Clone
// gives t a new owner too, so t copies a shared page before writing it.
func (t *ratchetTree) clone() *ratchetTree {
	t.owner = new(treeOwner)
	return &ratchetTree{
		s:     t.s,
		nodeN: t.nodeN,
		pages: slices.Clone(t.pages),
		owner: new(treeOwner),
		creds: t.creds,
	}
}

// resize grows the tree to hold n leaves (n a power of two, at least the
// current size). New nodes are blank. Existing per-node data stays valid:
// subtrees of existing nodes do not change when the tree grows to the right.
func (t *ratchetTree) resize(n uint32) {
	w := int(nodeWidth(n))
	oldRoot := nodeIndex(0)
	hadNodes := t.nodeN > 0
	if hadNodes {
		oldRoot = t.rootIndex()
	}
	t.setWidth(w)
	if !hadNodes {
		return
	}
	// The new parents above the old root cover the old tree plus blank
	// subtrees; carry the counts up and mark their hashes stale.
	f, l := t.filledAt(oldRoot), t.leavesAt(oldRoot)
	for x := oldRoot; x != t.rootIndex(); {
		x = parent(x)
		p, j := t.writable(x)
		p.filled[j], p.leaves[j], p.hashes[j] = f, l, nil
	}
}

// setNode replaces node x and updates the per-node data on its direct path.
// The node kind must match the position (leaves at even indices).
func (t *ratchetTree) setNode(x nodeIndex, n treeNode) {
	if (n.Leaf != nil && !x.isLeaf()) || (n.Parent != nil && x.isLeaf()) || (n.Leaf != nil && n.Parent != nil) {
		panic("mls: internal error: node kind does not match its position")
	}
	var df, dl int32
	switch old, now := t.node(x).blank(), n.blank(); {
	case old && !now:
		df = 1
	case !old && now:
		df = -1
	}
	if x.isLeaf() {
		dl = df
		t.creds = t.creds.afterLeafChange(x.leaf(), t.node(x).Leaf, n.Leaf)
	}
	p, j := t.writable(x)
	p.nodes[j] = n
	p.keyTags[j] = n.tags()
	r := t.rootIndex()
	for {
		p, j := t.writable(x)
		p.hashes[j] = nil
		p.filled[j] = uint32(int32(p.filled[j]) + df)
		p.leaves[j] = uint32(int32(p.leaves[j]) + dl)
		if x == r {
			return
		}
		x = parent(x)
	}
}

// tags returns the key tags of a node as its page keeps them: of its
// encryption key in the high half and, for a leaf, of its signature key in
// the low half; zero for a blank node.
func (n treeNode) tags() uint64 {
	switch {
	case n.Leaf != nil:
		return uint64(keyTag(n.Leaf.EncryptionKey))<<32 | uint64(keyTag(n.Leaf.SignatureKey))
	case n.Parent != nil:
		return uint64(keyTag(n.Parent.EncryptionKey)) << 32
	}
	return 0
}

// blankDirectPath blanks every parent node on the direct path of leaf l.
func (t *ratchetTree) blankDirectPath(l leafIndex) {
	for _, x := range directPath(l.node(), t.size()) {
		if !t.node(x).blank() {
			t.setNode(x, treeNode{})
		}
	}
}

// addLeaf adds a member (§12.1.1): it places leaf in the leftmost blank
// leaf, extending the tree when there is none, and records the new leaf as
// unmerged at each non-blank parent above it.
//
// Unlike decoding, adding has no width cap: every new leaf carries a whole
// LeafNode, so memory grows with what the group really holds.
func (t *ratchetTree) addLeaf(leaf *LeafNode) leafIndex {
	l, ok := t.leftmostBlankLeaf()
	if !ok {
		l = leafIndex(t.size())
		t.resize(2 * t.size())
	}
	for _, x := range directPath(l.node(), t.size()) {
		p := t.node(x).Parent
		if p == nil {
			continue
		}
		np := *p
		i, _ := slices.BinarySearch(p.UnmergedLeaves, uint32(l))
		np.UnmergedLeaves = slices.Insert(slices.Clone(p.UnmergedLeaves), i, uint32(l))
		t.setNode(x, treeNode{Parent: &np})
	}
	t.setNode(l.node(), treeNode{Leaf: leaf})
	return l
}

// leftmostBlankLeaf finds the leftmost blank leaf in O(log n).
func (t *ratchetTree) leftmostBlankLeaf() (leafIndex, bool) {
	x := t.rootIndex()
	if t.leavesAt(x) == t.size() {
		return 0, false
	}
	for !x.isLeaf() {
		l := left(x)
		first, end := subtreeLeaves(l)
		if t.leavesAt(l) < uint32(end-first) {
			x = l
		} else {
			x = right(x)
		}
	}
	return x.leaf(), true
}

// updateLeaf applies an Update proposal (§12.1.2): it replaces the leaf and
// blanks the parents on its direct path.
func (t *ratchetTree) updateLeaf(l leafIndex, leaf *LeafNode) error {
	if t.leafNode(l) == nil {
		return fmt.Errorf("mls: update of blank leaf %d", l)
	}
	t.setNode(l.node(), treeNode{Leaf: leaf})
	t.blankDirectPath(l)
	return nil
}

// removeLeaf applies a Remove proposal (§12.1.3): it blanks the leaf and its
// direct path, then truncates the tree.
func (t *ratchetTree) removeLeaf(l leafIndex) error {
	if t.leafNode(l) == nil {
		return fmt.Errorf("mls: remove of blank leaf %d", l)
	}
	t.setNode(l.node(), treeNode{})
	t.blankDirectPath(l)
	t.truncate()
	return nil
}

// truncate removes the right half of the tree while it holds no non-blank
// leaf (§7.7, §12.1.3). The root and right subtree are discarded whether or
// not the root is blank.
func (t *ratchetTree) truncate() {
	for t.size() > 1 && t.leavesAt(right(t.rootIndex())) == 0 {
		t.setWidth(int(nodeWidth(t.size() / 2)))
	}
}

// resolution returns the resolution of node x (§4.1.1): the non-blank nodes
// that together cover every non-blank node under x, in depth-first,
// left-first order, each non-blank parent followed by its unmerged leaves.
// Leaves in exclude (sorted) are left out, both as nodes and as unmerged
// leaves; this is how new members are kept out of an UpdatePath (§7.6).
//
// Blank subtrees are skipped using the per-node counts, so the cost is
// O(len(result) * log n).
func (t *ratchetTree) resolution(x nodeIndex, exclude []leafIndex) []nodeIndex {
	return t.appendResolution(nil, x, exclude)
}

func (t *ratchetTree) appendResolution(out []nodeIndex, x nodeIndex, exclude []leafIndex) []nodeIndex {
	if t.filledAt(x) == 0 {
		return out
	}
	n := t.node(x)
	switch {
	case n.Leaf != nil:
		if _, found := slices.BinarySearch(exclude, x.leaf()); !found {
			out = append(out, x)
		}
		return out
	case n.Parent != nil:
		out = append(out, x)
		for _, u := range n.Parent.UnmergedLeaves {
			if _, found := slices.BinarySearch(exclude, leafIndex(u)); !found {
				out = append(out, leafIndex(u).node())
			}
		}
		return out
	}
	out = t.appendResolution(out, left(x), exclude)
	return t.appendResolution(out, right(x), exclude)
}

// filteredDirectPath returns the filtered direct path of leaf l (§4.1.2)
// and, in step, the copath child of each of its nodes: the direct path
// without the nodes whose copath child has an empty resolution.
func (t *ratchetTree) filteredDirectPath(l leafIndex) (path, copathNodes []nodeIndex) {
	dp := directPath(l.node(), t.size())
	cp := copath(l.node(), t.size())
	path, copathNodes = dp[:0], cp[:0]
	for i := range dp {
		if t.filledAt(cp[i]) != 0 {
			path = append(path, dp[i])
			copathNodes = append(copathNodes, cp[i])
		}
	}
	return path, copathNodes
}

// marshal encodes the tree as the ratchet_tree extension value
// (§12.4.3.3): optional<Node> ratchet_tree<V>, without the blank nodes after
// the last non-blank one.
func (t *ratchetTree) marshal(b *builder) {
	last := t.nodeN - 1
	for last >= 0 && t.node(nodeIndex(last)).blank() {
		last--
	}
	b.vecFunc(func(b *builder) {
		for x := range nodeIndex(last + 1) {
			n := t.node(x)
			b.optional(!n.blank(), n.marshal)
		}
	})
}

// encode returns the ratchet_tree extension value for t.
func (t *ratchetTree) encode() []byte { return marshal(t) }

// decodeRatchetTree parses a ratchet_tree extension value (§12.4.3.3). It is
// strict: the last node must be non-blank, leaves and parents must sit at
// even and odd positions, and no bytes may follow. The tree is extended
// with blank nodes to the next full size. Decoding checks the encoding only;
// see validate for the checks a joiner must make.
func decodeRatchetTree(s suite, data []byte) (*ratchetTree, error) {
	var nodes []treeNode
	p := newParser(data)
	ok := p.vecList(func(p *parser) bool {
		var n treeNode
		present, ok := p.optional(n.unmarshal)
		if !ok {
			return false
		}
		x := nodeIndex(len(nodes))
		if present && ((n.Leaf != nil) != x.isLeaf()) {
			return false
		}
		nodes = append(nodes, n)
		return len(nodes) <= int(nodeWidth(maxTreeLeaves))
	})
	if !ok || !p.empty() {
		return nil, errTreeDecode
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: empty tree", errTreeDecode)
	}
	if nodes[len(nodes)-1].blank() {
		return nil, fmt.Errorf("%w: last node is blank", errTreeDecode)
	}
	n := uint32(1)
	for int(nodeWidth(n)) < len(nodes) {
		n *= 2
	}
	t := &ratchetTree{s: s}
	t.setWidth(int(nodeWidth(n)))
	for i, nd := range nodes {
		p := t.pages[i>>treePageBits]
		j := i & (treePageSize - 1)
		p.nodes[j] = nd
		p.keyTags[j] = nd.tags()
	}
	t.countSubtree(t.rootIndex())
	return t, nil
}

// countSubtree fills the per-node counts under x from scratch.
func (t *ratchetTree) countSubtree(x nodeIndex) (filled, leaves uint32) {
	if !t.node(x).blank() {
		filled = 1
		if x.isLeaf() {
			leaves = 1
		}
	}
	if !x.isLeaf() {
		lf, ll := t.countSubtree(left(x))
		rf, rl := t.countSubtree(right(x))
		filled += lf + rf
		leaves += ll + rl
	}
	p, j := t.writable(x)
	p.filled[j], p.leaves[j] = filled, leaves
	return filled, leaves
}
