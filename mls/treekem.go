package mls

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// TreeKEM: creating, merging and decrypting UpdatePaths (RFC 9420, §7.4-§7.6).
//
// The public tree (ratchetTree) never holds private keys. A member's own
// keys, for its leaf and for the parent nodes above it whose secrets it
// learned, live in a privateTree.

var errPathDecrypt = errors.New("mls: cannot decrypt update path")

// hpkeKeyPair is an HPKE key pair in the byte formats of the suite.
type hpkeKeyPair struct {
	priv, pub []byte
}

// privateTree holds the private keys one member knows (§4.2): the key of
// its own leaf and of some parent nodes on its direct path. Each key is kept
// with its public key, so a key is only used while the public tree still
// holds that public key at the node.
type privateTree struct {
	self leafIndex
	keys map[nodeIndex]hpkeKeyPair
}

// newPrivateTree returns the private state of the member at leaf self whose
// leaf HPKE key pair is (priv, pub).
func newPrivateTree(self leafIndex, priv, pub []byte) *privateTree {
	return &privateTree{
		self: self,
		keys: map[nodeIndex]hpkeKeyPair{self.node(): {priv: priv, pub: pub}},
	}
}

func (p *privateTree) clone() *privateTree {
	return &privateTree{self: p.self, keys: maps.Clone(p.keys)}
}

// wipeReplaced zeroes the private keys of p that next does not hold, once
// next has taken p's place as the member's private state: the keys of
// nodes that were blanked or got new keys (§7.4, §9.2: a replaced key must
// not outlive its use). Keys that next shares with p are kept.
func (p *privateTree) wipeReplaced(next *privateTree) {
	for x, k := range p.keys {
		if next != nil {
			if nk, ok := next.keys[x]; ok && bytes.Equal(nk.priv, k.priv) {
				continue
			}
		}
		clear(k.priv)
	}
}

// setPrivate makes next the member's private keys and wipes the old keys
// it no longer holds.
func (g *Group) setPrivate(next *privateTree) {
	if g.priv != nil && g.priv != next {
		g.priv.wipeReplaced(next)
	}
	g.priv = next
}

// keyFor returns the private key for node x if p knows the key that t holds
// at x.
func (p *privateTree) keyFor(t *ratchetTree, x nodeIndex) ([]byte, bool) {
	k, ok := p.keys[x]
	if !ok || int(x) >= t.width() {
		return nil, false
	}
	pub := t.node(x).encryptionKey()
	if pub == nil || !bytes.Equal(pub, k.pub) {
		return nil, false
	}
	return k.priv, true
}

// prune drops the keys that no longer match t, for nodes that were blanked
// or replaced since they were learned.
func (p *privateTree) prune(t *ratchetTree) {
	for x := range p.keys {
		if _, ok := p.keyFor(t, x); !ok {
			delete(p.keys, x)
		}
	}
}

// consistent reports whether every key in p matches the public key at its
// node in t (the check the treekem vectors ask for).
func (p *privateTree) consistent(t *ratchetTree) error {
	for x := range p.keys {
		if _, ok := p.keyFor(t, x); !ok {
			return fmt.Errorf("mls: private key for node %d does not match the tree", x)
		}
	}
	return nil
}

// nodeKeyPair derives the key pair of a node from its path secret (§7.4):
// node_secret = DeriveSecret(path_secret, "node") and
// (node_priv, node_pub) = KEM.DeriveKeyPair(node_secret).
func nodeKeyPair(s suite, pathSecret []byte) (hpkeKeyPair, error) {
	priv, pub, err := s.hpkeDeriveKeyPair(deriveSecret(s, pathSecret, "node"))
	if err != nil {
		return hpkeKeyPair{}, err
	}
	return hpkeKeyPair{priv: priv, pub: pub}, nil
}

// nodeKeyPairs derives the key pair of every path secret in secrets
// (§7.4), in order. Each derivation is independent of the others and costs
// a KEM key derivation, so a path of several nodes derives them on all
// CPUs; the error is that of the lowest failing secret.
func nodeKeyPairs(s suite, secrets [][]byte) ([]hpkeKeyPair, error) {
	keys := make([]hpkeKeyPair, len(secrets))
	err := parallelFor(len(secrets), minParallelKEM, func(i int) error {
		kp, err := nodeKeyPair(s, secrets[i])
		keys[i] = kp
		return err
	})
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// nextPathSecret is path_secret[n+1] = DeriveSecret(path_secret[n], "path")
// (§7.4). Applied to the root's path secret it gives the commit secret.
func nextPathSecret(s suite, pathSecret []byte) []byte {
	return deriveSecret(s, pathSecret, "path")
}

// pathSecretAt is the path secret of one node of a filtered direct path.
// The committer hands these to new members in Welcome messages (§12.4.3).
type pathSecretAt struct {
	node   nodeIndex
	secret []byte
}

// updatePathResult is what the committer gets from generateUpdatePath.
type updatePathResult struct {
	path         *updatePath
	commitSecret []byte
	pathSecrets  []pathSecretAt // in filtered-direct-path order
	priv         *privateTree   // the committer's new private state
}

// pathSecretFor returns the path secret for the lowest node of the
// committer's filtered direct path above leaf l: what a new member at l
// receives in GroupSecrets.path_secret (§12.4.3.1).
func (r *updatePathResult) pathSecretFor(l leafIndex) (pathSecretAt, bool) {
	for _, ps := range r.pathSecrets {
		if isAncestor(ps.node, l.node()) {
			return ps, true
		}
	}
	return pathSecretAt{}, false
}

// groupContextFunc returns the encoded provisional GroupContext for the
// given tree hash. UpdatePath encryption uses the GroupContext of the new
// epoch, whose tree_hash covers the tree after the path is merged (§7.6,
// §12.4.1), so it can only be built once the new tree is known.
type groupContextFunc func(treeHash []byte) ([]byte, error)

// generateUpdatePath refreshes the direct path of the member that owns priv
// (§7.4-§7.6) and returns the UpdatePath to send. It changes t in place: t
// should be the provisional tree with the Commit's proposals applied, and
// is left in an unspecified state on error.
//
// leaf is the member's new LeafNode content (signature key, credential,
// capabilities, extensions); nil keeps those of the current leaf. Its
// encryption key, source, parent hash and signature are set here, signed
// with sigPriv for groupID. New members added by the same Commit are listed
// in exclude and receive no ciphertexts.
func (t *ratchetTree) generateUpdatePath(priv *privateTree, leaf *LeafNode, sigPriv, groupID []byte, exclude []leafIndex, gc groupContextFunc) (*updatePathResult, error) {
	leafSecret := make([]byte, t.s.hashLen())
	rand.Read(leafSecret)
	return t.generateUpdatePathFrom(leafSecret, priv, leaf, sigPriv, groupID, exclude, gc)
}

// generateUpdatePathFrom is generateUpdatePath with a given leaf secret.
// Following the derivation of §7.4, the leaf key pair is derived from the
// leaf secret like a node key pair and path_secret[0] is
// DeriveSecret(leaf_secret, "path"), so one random value seeds the path.
func (t *ratchetTree) generateUpdatePathFrom(leafSecret []byte, priv *privateTree, leaf *LeafNode, sigPriv, groupID []byte, exclude []leafIndex, gc groupContextFunc) (*updatePathResult, error) {
	s := t.s
	from := priv.self
	old := t.leafNode(from)
	if old == nil {
		return nil, fmt.Errorf("mls: update path from blank leaf %d", from)
	}
	if leaf == nil {
		leaf = old
	}
	exclude = sortedLeaves(exclude)

	// §7.4: blank the direct path, then derive the new keys for the leaf
	// and the filtered direct path.
	t.blankDirectPath(from)
	fdp, cp := t.filteredDirectPath(from)
	res := &updatePathResult{
		priv:        &privateTree{self: from, keys: make(map[nodeIndex]hpkeKeyPair, len(fdp)+1)},
		pathSecrets: make([]pathSecretAt, len(fdp)),
	}
	// The path secrets form a chain of cheap derivations; the key pairs
	// derived from them (one KEM key derivation each) are independent.
	secrets := make([][]byte, len(fdp)+1)
	secrets[0] = leafSecret
	for i, x := range fdp {
		secrets[i+1] = nextPathSecret(s, secrets[i])
		res.pathSecrets[i] = pathSecretAt{node: x, secret: secrets[i+1]}
	}
	res.commitSecret = nextPathSecret(s, secrets[len(fdp)])
	keys, err := nodeKeyPairs(s, secrets)
	if err != nil {
		return nil, err
	}
	leafKey := keys[0]
	res.priv.keys[from.node()] = leafKey
	for i, x := range fdp {
		res.priv.keys[x] = keys[i+1]
		t.setNode(x, treeNode{Parent: &parentNodeData{EncryptionKey: keys[i+1].pub}})
	}

	// §7.9: parent hashes from the root down, then the new signed leaf.
	ph := t.setPathParentHashes(fdp, cp)
	nl := *leaf
	nl.EncryptionKey = leafKey.pub
	nl.LeafNodeSource = LeafNodeSourceCommit
	nl.Lifetime = Lifetime{}
	nl.ParentHash = ph
	if err := nl.sign(s, sigPriv, groupID, uint32(from)); err != nil {
		return nil, err
	}
	t.setNode(from.node(), treeNode{Leaf: &nl})

	// §7.6: encrypt each path secret to the resolution of the copath
	// child, under the provisional GroupContext.
	ctx, err := gc(t.treeHash())
	if err != nil {
		return nil, err
	}
	// The encryptions are independent of each other; in a tree with many
	// blank parents a path encrypts to hundreds of nodes, so they are
	// spread over all CPUs, in one list across the whole path.
	path := &updatePath{LeafNode: nl, Nodes: make([]updatePathNode, len(fdp))}
	type target struct {
		ct     *hpkeCiphertext
		pub    []byte
		secret []byte
	}
	var targets []target
	for i, x := range fdp {
		r := t.resolution(cp[i], exclude)
		cts := make([]hpkeCiphertext, len(r))
		for j, y := range r {
			targets = append(targets, target{ct: &cts[j], pub: t.node(y).encryptionKey(), secret: res.pathSecrets[i].secret})
		}
		path.Nodes[i] = updatePathNode{EncryptionKey: t.node(x).Parent.EncryptionKey, EncryptedPathSecret: cts}
	}
	err = parallelFor(len(targets), minParallelHPKE, func(k int) error {
		tg := &targets[k]
		kem, ct, err := encryptWithLabel(s, tg.pub, "UpdatePathNode", ctx, tg.secret)
		if err != nil {
			return err
		}
		*tg.ct = hpkeCiphertext{KEMOutput: kem, Ciphertext: ct}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.path = path
	return res, nil
}

// mergeUpdatePath merges a received UpdatePath from leaf sender into t
// (§7.5, "merges UpdatePath into the tree"): it blanks the sender's direct
// path, installs the new public keys on its filtered direct path, computes
// the parent hashes and checks the one in the new leaf (§7.9.2), and then
// installs the leaf. t is left in an unspecified state on error.
//
// The caller validates the new LeafNode (§7.3: signature, capabilities,
// key uniqueness) separately.
func (t *ratchetTree) mergeUpdatePath(sender leafIndex, path *updatePath) error {
	if t.leafNode(sender) == nil {
		return fmt.Errorf("mls: update path from blank leaf %d", sender)
	}
	if path.LeafNode.LeafNodeSource != LeafNodeSourceCommit {
		return errors.New("mls: update path leaf node source is not commit")
	}
	fdp, cp := t.filteredDirectPath(sender)
	if len(path.Nodes) != len(fdp) {
		return fmt.Errorf("mls: update path has %d nodes, filtered direct path has %d", len(path.Nodes), len(fdp))
	}
	if err := checkPathKeys(t.s, path); err != nil {
		return err
	}
	t.blankDirectPath(sender)
	for i, x := range fdp {
		t.setNode(x, treeNode{Parent: &parentNodeData{EncryptionKey: path.Nodes[i].EncryptionKey}})
	}
	ph := t.setPathParentHashes(fdp, cp)
	if subtle.ConstantTimeCompare(ph, path.LeafNode.ParentHash) != 1 {
		return fmt.Errorf("%w: update path leaf", errParentHash)
	}
	leaf := path.LeafNode
	t.setNode(sender.node(), treeNode{Leaf: &leaf})
	return nil
}

// decryptUpdatePath recovers the path secrets of an UpdatePath already
// merged into t with mergeUpdatePath (§7.5, "decrypts the path secrets").
// groupContext is the encoded provisional GroupContext, exclude the leaves
// added by the same Commit. It returns the commit secret and the member's
// new private state; priv itself is not changed.
func (t *ratchetTree) decryptUpdatePath(priv *privateTree, sender leafIndex, path *updatePath, exclude []leafIndex, groupContext []byte) (commitSecret []byte, newPriv *privateTree, err error) {
	d, err := t.decryptPath(priv, sender, path, exclude, groupContext)
	if err != nil {
		return nil, nil, err
	}
	return d.commitSecret, d.priv, nil
}

// pathDecryption is the full outcome of decrypting an UpdatePath.
type pathDecryption struct {
	node         nodeIndex // the node whose path secret was decrypted
	pathSecret   []byte    // its path secret
	commitSecret []byte
	priv         *privateTree
}

func (t *ratchetTree) decryptPath(priv *privateTree, sender leafIndex, path *updatePath, exclude []leafIndex, groupContext []byte) (*pathDecryption, error) {
	s := t.s
	me := priv.self
	if me == sender {
		return nil, errors.New("mls: cannot decrypt own update path")
	}
	exclude = sortedLeaves(exclude)
	fdp, cp := t.filteredDirectPath(sender)
	if len(path.Nodes) != len(fdp) {
		return nil, fmt.Errorf("mls: update path has %d nodes, filtered direct path has %d", len(path.Nodes), len(fdp))
	}
	// The first node of the filtered direct path whose copath child
	// covers us. It exists: our own non-blank leaf keeps that child's
	// resolution non-empty.
	i := slices.IndexFunc(cp, func(c nodeIndex) bool { return isAncestor(c, me.node()) })
	if i < 0 {
		return nil, fmt.Errorf("%w: leaf %d is not below the sender's path", errPathDecrypt, me)
	}
	// §7.6: every node must carry one ciphertext per member of its copath
	// resolution, not only the one we decrypt, or members would disagree
	// about whether the Commit is valid.
	var r []nodeIndex
	for k := range fdp {
		res := t.resolution(cp[k], exclude)
		if n := len(path.Nodes[k].EncryptedPathSecret); n != len(res) {
			return nil, fmt.Errorf("mls: update path node %d has %d ciphertexts for a resolution of %d", fdp[k], n, len(res))
		}
		if k == i {
			r = res
		}
	}
	cts := path.Nodes[i].EncryptedPathSecret
	var secret []byte
	var err error
	for j, y := range r {
		key, ok := priv.keyFor(t, y)
		if !ok {
			continue
		}
		secret, err = decryptWithLabel(s, key, "UpdatePathNode", groupContext, cts[j].KEMOutput, cts[j].Ciphertext)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errPathDecrypt, err)
		}
		break
	}
	if secret == nil {
		return nil, fmt.Errorf("%w: no private key for the copath resolution", errPathDecrypt)
	}
	d := &pathDecryption{node: fdp[i], pathSecret: secret}
	newPriv := priv.clone()
	for _, x := range directPath(sender.node(), t.size()) {
		delete(newPriv.keys, x)
	}
	secrets := make([][]byte, len(fdp)-i)
	for k := range secrets {
		if k > 0 {
			secret = nextPathSecret(s, secret)
		}
		secrets[k] = secret
	}
	keys, err := nodeKeyPairs(s, secrets)
	if err != nil {
		return nil, err
	}
	for k, kp := range keys {
		if !bytes.Equal(kp.pub, path.Nodes[i+k].EncryptionKey) {
			return nil, fmt.Errorf("%w: derived public key does not match node %d", errPathDecrypt, fdp[i+k])
		}
		newPriv.keys[fdp[i+k]] = kp
	}
	newPriv.prune(t)
	d.commitSecret = nextPathSecret(s, secret)
	d.priv = newPriv
	return d, nil
}

// implantPathSecret installs the path secret a new member receives in a
// Welcome (§12.4.3.1): secret is the path secret of node x, which lies on
// the filtered direct path of the committer. The keys of x and of the nodes
// above it on that path are derived and checked against t, and stored in
// p.
func (p *privateTree) implantPathSecret(t *ratchetTree, committer leafIndex, x nodeIndex, secret []byte) error {
	fdp, _ := t.filteredDirectPath(committer)
	i := slices.Index(fdp, x)
	if i < 0 || !isAncestor(x, p.self.node()) {
		return fmt.Errorf("mls: path secret for node %d not on the committer's path above leaf %d", x, p.self)
	}
	secrets := make([][]byte, len(fdp)-i)
	for k := range secrets {
		if k > 0 {
			secret = nextPathSecret(t.s, secret)
		}
		secrets[k] = secret
	}
	derived, err := nodeKeyPairs(t.s, secrets)
	if err != nil {
		return err
	}
	keys := make(map[nodeIndex]hpkeKeyPair, len(derived))
	for k, kp := range derived {
		if !bytes.Equal(kp.pub, t.node(fdp[i+k]).encryptionKey()) {
			return fmt.Errorf("mls: path secret does not match the public key of node %d", fdp[i+k])
		}
		keys[fdp[i+k]] = kp
	}
	maps.Copy(p.keys, keys)
	return nil
}

// sortedLeaves returns the leaf indices sorted, copying only when needed.
func sortedLeaves(ls []leafIndex) []leafIndex {
	if slices.IsSorted(ls) {
		return ls
	}
	ls = slices.Clone(ls)
	slices.Sort(ls)
	return ls
}
