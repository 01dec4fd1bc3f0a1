package mls

import (
	"errors"
	"fmt"
	"slices"
)

// Validating a ratchet tree received from others (RFC 9420, §12.4.3.1 and
// §7.9.2).

var errInvalidTree = errors.New("mls: invalid ratchet tree")

// validate checks the tree as a new member must before using it
// (§12.4.3.1, "Verify the integrity of the ratchet tree"), except for the
// comparison of the tree hash with the GroupInfo and the per-leaf checks of
// §7.3 that depend on the group (credentials, capabilities, lifetimes),
// which the caller makes. It checks:
//
//   - every unmerged_leaves list is strictly increasing and names non-blank
//     leaves below its node, which every non-blank node in between also
//     lists;
//   - HPKE encryption keys are unique across all nodes, and signature keys
//     unique across leaves (§7.3);
//   - the public keys of parent nodes are valid for the suite (§5.1.1;
//     leaf keys are checked with the leaf signatures);
//   - every leaf's signature, with groupID and its leaf index as context
//     where its source asks for them (§7.2);
//   - every non-blank parent node is parent-hash valid (§7.9.2).
func (t *ratchetTree) validate(groupID []byte) error {
	if err := t.validateStructure(); err != nil {
		return err
	}
	if err := t.validateLeafSignatures(groupID); err != nil {
		return err
	}
	return t.verifyParentHashes()
}

// validateStructure makes the checks of validate that need no
// cryptography.
func (t *ratchetTree) validateStructure() error {
	if t.memberCount() == 0 {
		return fmt.Errorf("%w: no members", errInvalidTree)
	}
	encKeys := make(map[string]nodeIndex)
	sigKeys := make(map[string]nodeIndex)
	for i := range t.width() {
		x := nodeIndex(i)
		n := t.node(x)
		if n.blank() {
			continue
		}
		k := string(n.encryptionKey())
		if y, dup := encKeys[k]; dup {
			return fmt.Errorf("%w: nodes %d and %d share an encryption key", errInvalidTree, y, x)
		}
		encKeys[k] = x
		if n.Leaf != nil {
			k := string(n.Leaf.SignatureKey)
			if y, dup := sigKeys[k]; dup {
				return fmt.Errorf("%w: leaves %d and %d share a signature key", errInvalidTree, y.leaf(), x.leaf())
			}
			sigKeys[k] = x
			continue
		}
		if err := t.s.checkHPKEPublicKey(n.Parent.EncryptionKey); err != nil {
			return fmt.Errorf("%w: node %d: %v", errInvalidTree, x, err)
		}
		if err := t.checkUnmergedLeaves(x); err != nil {
			return err
		}
	}
	return nil
}

// checkUnmergedLeaves checks the unmerged_leaves list of the parent node x
// (§7.1, §7.9.2): strictly increasing, naming non-blank leaves below x,
// which every non-blank node in between also lists. It needs no
// cryptography, so a restored state checks it too.
func (t *ratchetTree) checkUnmergedLeaves(x nodeIndex) error {
	um := t.node(x).Parent.UnmergedLeaves
	first, end := subtreeLeaves(x)
	for j, u := range um {
		if j > 0 && um[j-1] >= u {
			return fmt.Errorf("%w: unmerged leaves of node %d not strictly increasing", errInvalidTree, x)
		}
		l := leafIndex(u)
		if l < first || l >= end || t.node(l.node()).blank() {
			return fmt.Errorf("%w: node %d lists unmerged leaf %d that is blank or not below it", errInvalidTree, x, u)
		}
		for y := parent(l.node()); y != x; y = parent(y) {
			p := t.node(y).Parent
			if p == nil {
				continue
			}
			if _, found := slices.BinarySearch(p.UnmergedLeaves, u); !found {
				return fmt.Errorf("%w: leaf %d unmerged at node %d but not at node %d", errInvalidTree, u, x, y)
			}
		}
	}
	return nil
}

// validateLeafSignatures verifies the signature of every non-blank leaf
// (§7.3), on all CPUs for large trees, and reports the lowest leaf whose
// signature fails.
func (t *ratchetTree) validateLeafSignatures(groupID []byte) error {
	return t.verifyLeafSignatures(groupID, 0, t.size())
}

// verifyLeafSignatures verifies the signatures of the non-blank leaves in
// [lo, hi) (§7.3) and reports the lowest one that fails. It only reads t,
// so calls for disjoint ranges may run concurrently.
func (t *ratchetTree) verifyLeafSignatures(groupID []byte, lo, hi uint32) error {
	return parallelFor(int(hi-lo), minParallelSignatures, func(i int) error {
		l := lo + uint32(i)
		ln := t.node(leafIndex(l).node()).Leaf
		if ln != nil && !ln.verifySignature(t.s, groupID, l) {
			return fmt.Errorf("%w: bad signature on leaf %d", errInvalidTree, l)
		}
		return nil
	})
}
