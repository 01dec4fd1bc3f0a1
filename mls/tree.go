package mls

import (
	"errors"
	"fmt"
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
// they are in a tree: a change replaces the pointer. This keeps clone cheap
// (it copies pointers) and lets trees share unchanged nodes.
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
type ratchetTree struct {
	s      suite
	nodes  []treeNode // len(nodes) == nodeWidth(size)
	hashes [][]byte   // tree hash per node; nil means not computed
	filled []uint32   // non-blank nodes in the subtree under each node
	leaves []uint32   // non-blank leaves in the subtree under each node
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
func (t *ratchetTree) size() uint32 { return uint32(len(t.nodes)+1) / 2 }

// rootIndex returns the root node index.
func (t *ratchetTree) rootIndex() nodeIndex { return root(t.size()) }

// memberCount returns the number of non-blank leaves.
func (t *ratchetTree) memberCount() uint32 { return t.leaves[t.rootIndex()] }

// node returns node x; x must be inside the tree.
func (t *ratchetTree) node(x nodeIndex) treeNode { return t.nodes[x] }

// leafNode returns the LeafNode at leaf l, or nil when l is blank or outside
// the tree.
func (t *ratchetTree) leafNode(l leafIndex) *LeafNode {
	if uint32(l) >= t.size() {
		return nil
	}
	return t.nodes[l.node()].Leaf
}

// clone returns a copy of t that can be changed independently. Node
// contents are shared, which is safe because they are never modified in
// place.
func (t *ratchetTree) clone() *ratchetTree {
	return &ratchetTree{
		s:      t.s,
		nodes:  slices.Clone(t.nodes),
		hashes: slices.Clone(t.hashes),
		filled: slices.Clone(t.filled),
		leaves: slices.Clone(t.leaves),
	}
}

// resize grows the arrays to hold n leaves (n a power of two, at least the
// current size). New nodes are blank. Existing per-node data stays valid:
// subtrees of existing nodes do not change when the tree grows to the right.
func (t *ratchetTree) resize(n uint32) {
	w := int(nodeWidth(n))
	oldRoot := nodeIndex(0)
	hadNodes := len(t.nodes) > 0
	if hadNodes {
		oldRoot = t.rootIndex()
	}
	t.nodes = append(t.nodes, make([]treeNode, w-len(t.nodes))...)
	t.hashes = append(t.hashes, make([][]byte, w-len(t.hashes))...)
	t.filled = append(t.filled, make([]uint32, w-len(t.filled))...)
	t.leaves = append(t.leaves, make([]uint32, w-len(t.leaves))...)
	if !hadNodes {
		return
	}
	// The new parents above the old root cover the old tree plus blank
	// subtrees; carry the counts up and mark their hashes stale.
	f, l := t.filled[oldRoot], t.leaves[oldRoot]
	for x := oldRoot; x != t.rootIndex(); {
		x = parent(x)
		t.filled[x], t.leaves[x], t.hashes[x] = f, l, nil
	}
}

// setNode replaces node x and updates the per-node data on its direct path.
// The node kind must match the position (leaves at even indices).
func (t *ratchetTree) setNode(x nodeIndex, n treeNode) {
	if (n.Leaf != nil && !x.isLeaf()) || (n.Parent != nil && x.isLeaf()) || (n.Leaf != nil && n.Parent != nil) {
		panic("mls: internal error: node kind does not match its position")
	}
	var df, dl int32
	switch old, now := t.nodes[x].blank(), n.blank(); {
	case old && !now:
		df = 1
	case !old && now:
		df = -1
	}
	if x.isLeaf() {
		dl = df
	}
	t.nodes[x] = n
	r := t.rootIndex()
	for {
		t.hashes[x] = nil
		t.filled[x] = uint32(int32(t.filled[x]) + df)
		t.leaves[x] = uint32(int32(t.leaves[x]) + dl)
		if x == r {
			return
		}
		x = parent(x)
	}
}

// blankDirectPath blanks every parent node on the direct path of leaf l.
func (t *ratchetTree) blankDirectPath(l leafIndex) {
	for _, x := range directPath(l.node(), t.size()) {
		if !t.nodes[x].blank() {
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
		p := t.nodes[x].Parent
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
	if t.leaves[x] == t.size() {
		return 0, false
	}
	for !x.isLeaf() {
		l := left(x)
		first, end := subtreeLeaves(l)
		if t.leaves[l] < uint32(end-first) {
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
	for t.size() > 1 && t.leaves[right(t.rootIndex())] == 0 {
		w := int(nodeWidth(t.size() / 2))
		clear(t.nodes[w:])
		clear(t.hashes[w:])
		t.nodes, t.hashes = t.nodes[:w], t.hashes[:w]
		t.filled, t.leaves = t.filled[:w], t.leaves[:w]
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
	if t.filled[x] == 0 {
		return out
	}
	n := t.nodes[x]
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
		if t.filled[cp[i]] != 0 {
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
	last := len(t.nodes) - 1
	for last >= 0 && t.nodes[last].blank() {
		last--
	}
	b.vecFunc(func(b *builder) {
		for _, n := range t.nodes[:last+1] {
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
	t.nodes = append(nodes, make([]treeNode, int(nodeWidth(n))-len(nodes))...)
	t.hashes = make([][]byte, len(t.nodes))
	t.filled = make([]uint32, len(t.nodes))
	t.leaves = make([]uint32, len(t.nodes))
	t.countSubtree(t.rootIndex())
	return t, nil
}

// countSubtree fills the per-node counts under x from scratch.
func (t *ratchetTree) countSubtree(x nodeIndex) (filled, leaves uint32) {
	if !t.nodes[x].blank() {
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
	t.filled[x], t.leaves[x] = filled, leaves
	return filled, leaves
}
