package mls

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
)

// Parent hashes (RFC 9420, §7.9).

var errParentHash = errors.New("mls: parent hash mismatch")

// parentHash computes the parent hash of parent node P with copath child S
// (§7.9): the hash of ParentHashInput, whose original_sibling_tree_hash is
// the tree hash of S with P's unmerged leaves blanked and removed from all
// unmerged_leaves lists.
func (t *ratchetTree) parentHash(p nodeIndex, s nodeIndex) []byte {
	pn := t.node(p).Parent
	excl := make([]leafIndex, len(pn.UnmergedLeaves))
	for i, u := range pn.UnmergedLeaves {
		excl[i] = leafIndex(u)
	}
	return t.s.hash(parentHashInput(pn.EncryptionKey, pn.ParentHash, t.hashExcluding(s, excl)))
}

// parentHashInput encodes ParentHashInput (§7.9).
func parentHashInput(encryptionKey, parentHash, originalSiblingTreeHash []byte) []byte {
	b := builder{b: make([]byte, 0, 12+len(encryptionKey)+len(parentHash)+len(originalSiblingTreeHash))}
	b.vec(encryptionKey)
	b.vec(parentHash)
	b.vec(originalSiblingTreeHash)
	return b.bytes()
}

// setPathParentHashes fills in the parent_hash fields along the filtered
// direct path fdp of a leaf, whose copath children are cp, from the root
// down (§7.9): each node gets the parent hash of the next node above it,
// and the topmost gets the empty string. It returns the parent hash the
// leaf itself must carry (empty when fdp is empty). The parent nodes on fdp
// must already hold their new keys and empty unmerged_leaves.
func (t *ratchetTree) setPathParentHashes(fdp, cp []nodeIndex) []byte {
	var ph []byte
	for i := len(fdp) - 1; i >= 0; i-- {
		old := t.node(fdp[i]).Parent
		np := &parentNodeData{EncryptionKey: old.EncryptionKey, ParentHash: ph, UnmergedLeaves: old.UnmergedLeaves}
		t.setNode(fdp[i], treeNode{Parent: np})
		ph = t.parentHash(fdp[i], cp[i])
	}
	if ph == nil {
		ph = []byte{}
	}
	return ph
}

// verifyParentHashes checks that every non-blank parent node is
// parent-hash valid (§7.9.2), as a joiner must.
//
// For a valid link from node D up to parent P, every node strictly between
// them is blank (D must be in the resolution of P's child on D's side), so
// P is the first non-blank ancestor of D. Each non-blank node thus has one
// candidate P, and the check is: each non-blank parent has exactly one
// descendant whose link to it verifies. Chains then reach a leaf because
// links always point downwards. The cost is one or two parent hashes per
// parent node plus the resolution comparisons, near-linear in the tree.
//
// The links of distinct nodes are independent, so large trees check them
// on all CPUs: the tree hashes are all computed first, after which the
// parent hashes only read the cache. The links are then counted in node
// order, so the error names the same node whatever the schedule.
func (t *ratchetTree) verifyParentHashes() error {
	t.treeHashParallel()
	r := t.rootIndex()
	// link[d] is the parent node that d's parent hash validly links to, or
	// noLink.
	const noLink = ^nodeIndex(0)
	link := make([]nodeIndex, t.width())
	parallelChunks(t.width(), minParallelNodes, func(lo, hi int) error {
		// phCache memoizes parentHash(P, S) for each P and side.
		type side struct{ p, s nodeIndex }
		phCache := make(map[side][]byte)
		for i := lo; i < hi; i++ {
			d := nodeIndex(i)
			link[d] = noLink
			nd := t.node(d)
			var dph []byte
			switch {
			case nd.Leaf != nil:
				if nd.Leaf.LeafNodeSource != LeafNodeSourceCommit {
					continue
				}
				dph = nd.Leaf.ParentHash
			case nd.Parent != nil:
				dph = nd.Parent.ParentHash
			default:
				continue
			}
			if d == r {
				continue
			}
			// Walk up to the first non-blank ancestor P; c is P's child
			// on the way.
			c, p := d, parent(d)
			for t.node(p).blank() && p != r {
				c, p = p, parent(p)
			}
			if t.node(p).blank() {
				continue
			}
			s := sibling(c)
			key := side{p, s}
			ph, ok := phCache[key]
			if !ok {
				ph = t.parentHash(p, s)
				phCache[key] = ph
			}
			if !bytes.Equal(dph, ph) {
				continue
			}
			if !t.unmergedMatch(p, c, d) {
				continue
			}
			link[d] = p
		}
		return nil
	})
	valid := make([]int, t.width())
	for _, p := range link {
		if p != noLink {
			valid[p]++
		}
	}
	for i := range t.width() {
		x := nodeIndex(i)
		if t.node(x).Parent == nil {
			continue
		}
		if c := valid[x]; c != 1 {
			return fmt.Errorf("%w: parent node %d has %d valid descendants", errParentHash, x, c)
		}
	}
	return nil
}

// unmergedMatch checks the last condition of §7.9.2 for D below C below P:
// the resolution of C without D equals P's unmerged_leaves that lie under
// C. D is known to be in the resolution of C (all nodes between are blank).
// The resolution is built only up to the size that could still match.
func (t *ratchetTree) unmergedMatch(p, c, d nodeIndex) bool {
	first, end := subtreeLeaves(c)
	var want []nodeIndex
	for _, u := range t.node(p).Parent.UnmergedLeaves {
		if leafIndex(u) >= first && leafIndex(u) < end {
			want = append(want, leafIndex(u).node())
		}
	}
	got := make([]nodeIndex, 0, len(want)+1)
	if !t.boundedResolution(&got, c, len(want)+1) {
		return false
	}
	got = slices.DeleteFunc(got, func(x nodeIndex) bool { return x == d })
	slices.Sort(got)
	return slices.Equal(got, want)
}

// boundedResolution appends the resolution of x to out, giving up (false)
// as soon as it would exceed limit entries.
func (t *ratchetTree) boundedResolution(out *[]nodeIndex, x nodeIndex, limit int) bool {
	if t.filledAt(x) == 0 {
		return true
	}
	n := t.node(x)
	switch {
	case n.Leaf != nil:
		*out = append(*out, x)
	case n.Parent != nil:
		*out = append(*out, x)
		for _, u := range n.Parent.UnmergedLeaves {
			*out = append(*out, leafIndex(u).node())
		}
	default:
		if !t.boundedResolution(out, left(x), limit) {
			return false
		}
		return t.boundedResolution(out, right(x), limit)
	}
	return len(*out) <= limit
}
