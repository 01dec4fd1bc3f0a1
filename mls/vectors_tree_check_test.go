package mls

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Checkers for tree-operations.json, tree-validation.json and treekem.json.

// checkTreeOperations runs tree-operations.json: the tree hash before, the
// tree after applying one Add, Update or Remove (§12.1), byte for byte, and
// its tree hash.
func checkTreeOperations(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite    CipherSuite `json:"cipher_suite"`
		TreeBefore     hexBytes    `json:"tree_before"`
		Proposal       hexBytes    `json:"proposal"`
		ProposalSender uint32      `json:"proposal_sender"`
		TreeHashBefore hexBytes    `json:"tree_hash_before"`
		TreeAfter      hexBytes    `json:"tree_after"`
		TreeHashAfter  hexBytes    `json:"tree_hash_after"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: tree-operations.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			t, err := decodeRatchetTree(s, c.TreeBefore)
			if err != nil {
				return fmt.Errorf("tree_before: %w", err)
			}
			if err := expectEqual("tree_before re-encoding", t.encode(), c.TreeBefore); err != nil {
				return err
			}
			if err := expectEqual("tree_hash_before", t.treeHash(), c.TreeHashBefore); err != nil {
				return err
			}
			var p Proposal
			if err := unmarshal(c.Proposal, &p); err != nil {
				return fmt.Errorf("proposal: %w", err)
			}
			switch p.ProposalType {
			case ProposalTypeAdd:
				t.addLeaf(&p.Add.KeyPackage.LeafNode)
			case ProposalTypeUpdate:
				err = t.updateLeaf(leafIndex(c.ProposalSender), &p.Update.LeafNode)
			case ProposalTypeRemove:
				err = t.removeLeaf(leafIndex(p.Remove.Removed))
			default:
				return fmt.Errorf("unexpected proposal type %d", p.ProposalType)
			}
			if err != nil {
				return err
			}
			if got := t.encode(); !bytes.Equal(got, c.TreeAfter) {
				return fmt.Errorf("tree_after: got %d bytes, want %d; first difference at byte %d", len(got), len(c.TreeAfter), firstDiff(got, c.TreeAfter))
			}
			if err := expectEqual("tree_hash_after", t.treeHash(), c.TreeHashAfter); err != nil {
				return err
			}
			// The incremental hash must agree with one from scratch.
			fresh, err := decodeRatchetTree(s, c.TreeAfter)
			if err != nil {
				return fmt.Errorf("tree_after: %w", err)
			}
			return expectEqual("tree_hash_after from scratch", fresh.treeHash(), c.TreeHashAfter)
		})
	}
	return nil
}

// checkTreeValidation runs tree-validation.json: the resolution and tree
// hash of every node, parent-hash validity of the whole tree, and the
// signature of every leaf with the group id.
func checkTreeValidation(data []byte, r *vectorRun) error {
	var cases []struct {
		CipherSuite CipherSuite `json:"cipher_suite"`
		Tree        hexBytes    `json:"tree"`
		GroupID     hexBytes    `json:"group_id"`
		Resolutions [][]uint32  `json:"resolutions"`
		TreeHashes  []hexBytes  `json:"tree_hashes"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: tree-validation.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			t, err := decodeRatchetTree(s, c.Tree)
			if err != nil {
				return fmt.Errorf("tree: %w", err)
			}
			if err := expectEqual("tree re-encoding", t.encode(), c.Tree); err != nil {
				return err
			}
			w := t.width()
			if len(c.Resolutions) != w || len(c.TreeHashes) != w {
				return fmt.Errorf("tree has %d nodes, vector gives %d resolutions and %d tree hashes", w, len(c.Resolutions), len(c.TreeHashes))
			}
			for x := range nodeIndex(w) {
				got := t.resolution(x, nil)
				want := c.Resolutions[x]
				if len(got) != len(want) || !slices.EqualFunc(got, want, func(a nodeIndex, b uint32) bool { return uint32(a) == b }) {
					return fmt.Errorf("resolution(%d): got %v, want %v", x, got, want)
				}
				if err := expectEqual(fmt.Sprintf("tree hash of node %d", x), t.hash(x), c.TreeHashes[x]); err != nil {
					return err
				}
			}
			// Unmerged-leaf structure, key uniqueness, leaf signatures
			// with the group id, and parent hashes (§7.9.2).
			return t.validate(c.GroupID)
		})
	}
	return nil
}

// checkTreeKEM runs treekem.json (§7.4-§7.6): private states consistent
// with the tree, every UpdatePath merged (parent-hash valid, tree hash
// after) and decrypted by every other member (path secret and commit
// secret), and a fresh UpdatePath from the same sender decrypted by every
// other member to the sender's commit secret.
func checkTreeKEM(data []byte, r *vectorRun) error {
	type pathSecretEntry struct {
		Node       uint32   `json:"node"`
		PathSecret hexBytes `json:"path_secret"`
	}
	var cases []struct {
		CipherSuite             CipherSuite `json:"cipher_suite"`
		GroupID                 hexBytes    `json:"group_id"`
		Epoch                   uint64      `json:"epoch"`
		ConfirmedTranscriptHash hexBytes    `json:"confirmed_transcript_hash"`
		RatchetTree             hexBytes    `json:"ratchet_tree"`
		LeavesPrivate           []struct {
			Index          uint32            `json:"index"`
			EncryptionPriv hexBytes          `json:"encryption_priv"`
			SignaturePriv  hexBytes          `json:"signature_priv"`
			PathSecrets    []pathSecretEntry `json:"path_secrets"`
		} `json:"leaves_private"`
		UpdatePaths []struct {
			Sender        uint32      `json:"sender"`
			UpdatePath    hexBytes    `json:"update_path"`
			PathSecrets   []*hexBytes `json:"path_secrets"` // null for the sender and blank leaves
			CommitSecret  hexBytes    `json:"commit_secret"`
			TreeHashAfter hexBytes    `json:"tree_hash_after"`
		} `json:"update_paths"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: treekem.json: %w", err)
	}
	for i, c := range cases {
		r.runCase(fmt.Sprintf("%d/suite-%d", i, c.CipherSuite), func() error {
			s, err := skipSuite(c.CipherSuite)
			if err != nil {
				return err
			}
			tree, err := decodeRatchetTree(s, c.RatchetTree)
			if err != nil {
				return fmt.Errorf("ratchet_tree: %w", err)
			}
			if err := expectEqual("ratchet_tree re-encoding", tree.encode(), c.RatchetTree); err != nil {
				return err
			}
			groupContext := func(treeHash []byte) ([]byte, error) {
				return marshal(&GroupContext{
					Version:                 ProtocolVersionMLS10,
					CipherSuite:             c.CipherSuite,
					GroupID:                 c.GroupID,
					Epoch:                   c.Epoch,
					TreeHash:                treeHash,
					ConfirmedTranscriptHash: c.ConfirmedTranscriptHash,
				}), nil
			}

			// Private states, checked against the tree.
			privs := make(map[leafIndex]*privateTree)
			sigPrivs := make(map[leafIndex][]byte)
			for _, lp := range c.LeavesPrivate {
				l := leafIndex(lp.Index)
				ln := tree.leafNode(l)
				if ln == nil {
					return fmt.Errorf("leaves_private: leaf %d is blank", l)
				}
				pub, err := s.hpkePublicFromPrivate(lp.EncryptionPriv)
				if err != nil {
					return fmt.Errorf("leaf %d encryption_priv: %w", l, err)
				}
				sigPub, err := s.signPublicFromPrivate(lp.SignaturePriv)
				if err != nil {
					return fmt.Errorf("leaf %d signature_priv: %w", l, err)
				}
				if !bytes.Equal(sigPub, ln.SignatureKey) {
					return fmt.Errorf("leaf %d signature_priv does not match the tree", l)
				}
				p := newPrivateTree(l, lp.EncryptionPriv, pub)
				for _, ps := range lp.PathSecrets {
					kp, err := nodeKeyPair(s, ps.PathSecret)
					if err != nil {
						return err
					}
					p.keys[nodeIndex(ps.Node)] = kp
				}
				if err := p.consistent(tree); err != nil {
					return fmt.Errorf("leaf %d: %w", l, err)
				}
				privs[l] = p
				sigPrivs[l] = lp.SignaturePriv
			}
			for l := range leafIndex(tree.size()) {
				if tree.leafNode(l) != nil && privs[l] == nil {
					return fmt.Errorf("leaves_private: no entry for member %d", l)
				}
			}

			for k, up := range c.UpdatePaths {
				sender := leafIndex(up.Sender)
				var path updatePath
				if err := unmarshal(up.UpdatePath, &path); err != nil {
					return fmt.Errorf("update_paths[%d]: %w", k, err)
				}
				if !path.LeafNode.verifySignature(s, c.GroupID, up.Sender) {
					return fmt.Errorf("update_paths[%d]: bad leaf signature", k)
				}
				merged := tree.clone()
				if err := merged.mergeUpdatePath(sender, &path); err != nil {
					return fmt.Errorf("update_paths[%d]: %w", k, err)
				}
				if err := expectEqual(fmt.Sprintf("update_paths[%d] tree_hash_after", k), merged.treeHash(), up.TreeHashAfter); err != nil {
					return err
				}
				ctx, _ := groupContext(merged.treeHash())
				if len(up.PathSecrets) != int(tree.size()) {
					return fmt.Errorf("update_paths[%d]: %d path secrets for %d leaves", k, len(up.PathSecrets), tree.size())
				}
				for j := range leafIndex(tree.size()) {
					want := up.PathSecrets[j]
					if j == sender || tree.leafNode(j) == nil {
						if want != nil {
							return fmt.Errorf("update_paths[%d]: path secret given for leaf %d", k, j)
						}
						continue
					}
					d, err := merged.decryptPath(privs[j], sender, &path, nil, ctx)
					if err != nil {
						return fmt.Errorf("update_paths[%d] at leaf %d: %w", k, j, err)
					}
					if want == nil {
						return fmt.Errorf("update_paths[%d]: no path secret for leaf %d", k, j)
					}
					if err := expectEqual(fmt.Sprintf("update_paths[%d] path secret at leaf %d", k, j), d.pathSecret, *want); err != nil {
						return err
					}
					if err := expectEqual(fmt.Sprintf("update_paths[%d] commit secret at leaf %d", k, j), d.commitSecret, up.CommitSecret); err != nil {
						return err
					}
					if err := d.priv.consistent(merged); err != nil {
						return fmt.Errorf("update_paths[%d] at leaf %d: %w", k, j, err)
					}
				}

				// A fresh path from the same sender.
				gen := tree.clone()
				res, err := gen.generateUpdatePath(privs[sender], nil, sigPrivs[sender], c.GroupID, nil, groupContext)
				if err != nil {
					return fmt.Errorf("update_paths[%d] new path: %w", k, err)
				}
				if err := res.priv.consistent(gen); err != nil {
					return fmt.Errorf("update_paths[%d] new path: %w", k, err)
				}
				fresh := marshal(res.path)
				var path2 updatePath
				if err := unmarshal(fresh, &path2); err != nil {
					return fmt.Errorf("update_paths[%d] new path: %w", k, err)
				}
				if !path2.LeafNode.verifySignature(s, c.GroupID, up.Sender) {
					return fmt.Errorf("update_paths[%d] new path: bad leaf signature", k)
				}
				for j := range leafIndex(tree.size()) {
					if j == sender || tree.leafNode(j) == nil {
						continue
					}
					m := tree.clone()
					if err := m.mergeUpdatePath(sender, &path2); err != nil {
						return fmt.Errorf("update_paths[%d] new path at leaf %d: %w", k, j, err)
					}
					if !bytes.Equal(m.treeHash(), gen.treeHash()) {
						return fmt.Errorf("update_paths[%d] new path at leaf %d: tree hash differs from the sender's", k, j)
					}
					ctx, _ := groupContext(m.treeHash())
					cs, _, err := m.decryptUpdatePath(privs[j], sender, &path2, nil, ctx)
					if err != nil {
						return fmt.Errorf("update_paths[%d] new path at leaf %d: %w", k, j, err)
					}
					if !bytes.Equal(cs, res.commitSecret) {
						return errors.New("new path: commit secret differs from the sender's")
					}
				}
			}
			return nil
		})
	}
	return nil
}

// firstDiff returns the index of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
