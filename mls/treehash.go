package mls

import (
	"runtime"
	"slices"
)

// Tree hashes (RFC 9420, §7.8).
//
// The hash of every node is cached in the tree's pages and dropped by
// setNode along the direct path of a changed node only, so after a change
// to one path the root hash costs O(log n) hash computations. The first
// computation over a tree is O(n).

// treeHash returns the tree hash of the whole tree: the hash of the root.
func (t *ratchetTree) treeHash() []byte { return t.hash(t.rootIndex()) }

// hash returns the tree hash of the subtree under x, from the cache when it
// is there. The returned slice must not be modified.
func (t *ratchetTree) hash(x nodeIndex) []byte {
	if h := t.cachedHash(x); h != nil {
		return h
	}
	var h []byte
	if x.isLeaf() {
		h = t.s.hash(leafHashInput(x.leaf(), t.node(x).Leaf))
	} else {
		h = t.s.hash(parentHashInputForTree(t.node(x).Parent, t.hash(left(x)), t.hash(right(x))))
	}
	t.storeHash(x, h)
	return h
}

// leafHashInput encodes TreeHashInput for a leaf: node_type, leaf_index and
// optional<LeafNode>.
func leafHashInput(l leafIndex, leaf *LeafNode) []byte {
	var b builder
	if leaf != nil {
		b.b = make([]byte, 0, 8+leaf.sizeHint())
	}
	b.u8(uint8(nodeTypeLeaf))
	b.u32(uint32(l))
	b.optional(leaf != nil, func(b *builder) { leaf.marshal(b) })
	return b.bytes()
}

// parentHashInputForTree encodes TreeHashInput for a parent: node_type,
// optional<ParentNode>, left_hash and right_hash. (It is named to keep it
// apart from ParentHashInput of §7.9.)
func parentHashInputForTree(p *parentNodeData, leftHash, rightHash []byte) []byte {
	n := 16 + len(leftHash) + len(rightHash)
	if p != nil {
		n += len(p.EncryptionKey) + len(p.ParentHash) + 4*len(p.UnmergedLeaves)
	}
	b := builder{b: make([]byte, 0, n)}
	b.u8(uint8(nodeTypeParent))
	b.optional(p != nil, func(b *builder) { p.marshal(b) })
	b.vec(leftHash)
	b.vec(rightHash)
	return b.bytes()
}

// hashExcluding returns the tree hash of the subtree under x in the tree
// changed as §7.9 asks for original_sibling_tree_hash: every leaf in
// exclude (sorted) is blanked and removed from the unmerged_leaves of every
// parent. Subtrees that hold no excluded leaf use the cache, so the cost is
// O(len(exclude) * log n) hashes.
func (t *ratchetTree) hashExcluding(x nodeIndex, exclude []leafIndex) []byte {
	first, end := subtreeLeaves(x)
	lo, _ := slices.BinarySearch(exclude, first)
	hi, _ := slices.BinarySearch(exclude, end)
	exclude = exclude[lo:hi]
	if len(exclude) == 0 {
		return t.hash(x)
	}
	if x.isLeaf() {
		return t.s.hash(leafHashInput(x.leaf(), nil))
	}
	p := t.node(x).Parent
	if p != nil {
		np := *p
		np.UnmergedLeaves = nil
		for _, u := range p.UnmergedLeaves {
			if _, found := slices.BinarySearch(exclude, leafIndex(u)); !found {
				np.UnmergedLeaves = append(np.UnmergedLeaves, u)
			}
		}
		p = &np
	}
	return t.s.hash(parentHashInputForTree(p, t.hashExcluding(left(x), exclude), t.hashExcluding(right(x), exclude)))
}

// hashSubtreeRoots returns the roots of the subtrees that split t into
// about 16 per CPU, for hashing them in parallel: the nodes of one level,
// left to right. A tree below minParallelNodes leaves has none.
func (t *ratchetTree) hashSubtreeRoots() []nodeIndex {
	n := t.size()
	if n < minParallelNodes {
		return nil
	}
	want := uint32(16 * runtime.GOMAXPROCS(0))
	var lvl uint
	for n>>(lvl+1) >= want && lvl < level(t.rootIndex()) {
		lvl++
	}
	// Level lvl holds the nodes (2^lvl - 1) + k * 2^(lvl+1).
	roots := make([]nodeIndex, 0, n>>lvl)
	for x := nodeIndex(1<<lvl - 1); int(x) < t.width(); x += 1 << (lvl + 1) {
		roots = append(roots, x)
	}
	return roots
}

// treeHashParallel is treeHash with the subtrees of hashSubtreeRoots hashed
// on all CPUs. Hashes of distinct subtrees fill distinct entries of the
// cache, so the subtrees can be hashed concurrently; the nodes above them
// are hashed afterwards, on the calling goroutine. On return every node's
// hash is in the cache, so that later hash calls only read it.
func (t *ratchetTree) treeHashParallel() []byte {
	roots := t.hashSubtreeRoots()
	parallelFor(len(roots), 2, func(i int) error {
		t.hash(roots[i])
		return nil
	})
	return t.treeHash()
}
