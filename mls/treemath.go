package mls

import "math/bits"

// Tree math for the array representation of ratchet trees (RFC 9420, §4 and
// Appendix C).
//
// Nodes are numbered by a left-to-right in-order traversal: leaf L sits at
// node 2*L, parent nodes at odd indices. Every tree in MLS is a perfect
// binary tree, so the number of leaves is always a power of two and a tree
// with n leaves has 2n-1 nodes. All functions here are pure index arithmetic,
// O(1) or O(log n), and never look at node contents.

// nodeIndex is the index of a node in the array representation of a tree.
type nodeIndex uint32

// leafIndex is the index of a leaf among the leaves of a tree, as carried on
// the wire (for example in Sender.leaf_index and ParentNode.unmerged_leaves).
type leafIndex uint32

// node returns the node index of leaf l.
func (l leafIndex) node() nodeIndex { return nodeIndex(2 * uint32(l)) }

// isLeaf reports whether x is a leaf node (even index).
func (x nodeIndex) isLeaf() bool { return x&1 == 0 }

// leaf returns the leaf index of leaf node x. x must be a leaf.
func (x nodeIndex) leaf() leafIndex { return leafIndex(x >> 1) }

// level returns the level of node x: 0 for leaves, 1 for their parents, and
// so on. It is the number of trailing one bits of x (Appendix C).
func level(x nodeIndex) uint {
	return uint(bits.TrailingZeros32(^uint32(x)))
}

// nodeWidth returns the number of nodes in a tree with n leaves (Appendix C).
func nodeWidth(n uint32) uint32 {
	if n == 0 {
		return 0
	}
	return 2*(n-1) + 1
}

// root returns the index of the root of a tree with n leaves (Appendix C).
// n must be at least 1.
func root(n uint32) nodeIndex {
	w := nodeWidth(n)
	return nodeIndex(uint32(1)<<(bits.Len32(w)-1) - 1)
}

// left returns the left child of parent node x. x must not be a leaf.
func left(x nodeIndex) nodeIndex {
	k := level(x)
	return x ^ nodeIndex(1)<<(k-1)
}

// right returns the right child of parent node x. x must not be a leaf.
func right(x nodeIndex) nodeIndex {
	k := level(x)
	return x ^ nodeIndex(3)<<(k-1)
}

// parent returns the parent of node x. x must not be the root of the tree;
// the result does not depend on the tree size for perfect trees.
func parent(x nodeIndex) nodeIndex {
	k := level(x)
	b := (x >> (k + 1)) & 1
	return (x | 1<<k) ^ (b << (k + 1))
}

// sibling returns the other child of x's parent. x must not be the root.
func sibling(x nodeIndex) nodeIndex {
	p := parent(x)
	if x < p {
		return right(p)
	}
	return left(p)
}

// isAncestor reports whether a is x or an ancestor of x, that is whether x
// lies in the subtree headed by a. It does not check that either node lies
// inside any particular tree.
func isAncestor(a, x nodeIndex) bool {
	k := level(a)
	// The subtree under a at level k covers node indices
	// [a - (2^k - 1), a + (2^k - 1)].
	span := nodeIndex(1)<<k - 1
	return x+span >= a && x <= a+span
}

// subtreeLeaves returns the range [first, end) of leaf indices under node x.
func subtreeLeaves(x nodeIndex) (first, end leafIndex) {
	k := level(x)
	span := uint32(1)<<k - 1
	lo := uint32(x) - span
	return leafIndex(lo >> 1), leafIndex(lo>>1 + uint32(1)<<k)
}

// directPath returns the direct path of node x in a tree with n leaves:
// the parent of x, its parent, and so on up to and including the root
// (§4.1.2). The direct path of the root is empty.
func directPath(x nodeIndex, n uint32) []nodeIndex {
	r := root(n)
	if x == r {
		return nil
	}
	d := make([]nodeIndex, 0, level(r)-level(x))
	for x != r {
		x = parent(x)
		d = append(d, x)
	}
	return d
}

// copath returns the copath of node x in a tree with n leaves: the sibling
// of x followed by the siblings of every node of its direct path except the
// root (§4.1.2). The copath has the same length as the direct path, and
// copath[i] is a child of directPath[i].
func copath(x nodeIndex, n uint32) []nodeIndex {
	r := root(n)
	if x == r {
		return nil
	}
	c := make([]nodeIndex, 0, level(r)-level(x))
	for x != r {
		c = append(c, sibling(x))
		x = parent(x)
	}
	return c
}

// commonAncestor returns the lowest node whose subtree contains both x and
// y (Appendix C, common_ancestor_direct).
func commonAncestor(x, y nodeIndex) nodeIndex {
	lx, ly := level(x)+1, level(y)+1
	if lx <= ly && x>>ly == y>>ly {
		return y
	}
	if ly <= lx && x>>lx == y>>lx {
		return x
	}
	xn, yn := x, y
	k := uint(0)
	for xn != yn {
		xn, yn = xn>>1, yn>>1
		k++
	}
	return xn<<k + 1<<(k-1) - 1
}
