package mls

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func treeTestSuite(t testing.TB) suite {
	t.Helper()
	s, err := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// treeSimMember is one simulated client: its signature key and private tree.
type treeSimMember struct {
	sigPriv []byte
	priv    *privateTree
}

// newTreeTestLeaf returns a KeyPackage-style LeafNode for identity id, with its
// signature private key and HPKE key pair.
func newTreeTestLeaf(t testing.TB, s suite, id string) (*LeafNode, []byte, hpkeKeyPair) {
	t.Helper()
	sigPriv, sigPub, err := s.signKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := s.hpkeGenerateKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	ln := &LeafNode{
		EncryptionKey:  pub,
		SignatureKey:   sigPub,
		Credential:     Credential{CredentialType: CredentialTypeBasic, Identity: []byte(id)},
		Capabilities:   Capabilities{Versions: []ProtocolVersion{ProtocolVersionMLS10}, CipherSuites: []CipherSuite{s.id()}, Credentials: []CredentialType{CredentialTypeBasic}},
		LeafNodeSource: LeafNodeSourceKeyPackage,
		Lifetime:       Lifetime{NotBefore: 0, NotAfter: 1 << 62},
	}
	if err := ln.sign(s, sigPriv, nil, 0); err != nil {
		t.Fatal(err)
	}
	return ln, sigPriv, hpkeKeyPair{priv: priv, pub: pub}
}

// treeSim simulates a group whose members share one public tree and keep
// their own private trees, committing with TreeKEM.
type treeSim struct {
	t       testing.TB
	s       suite
	rng     *rand.Rand
	groupID []byte
	epoch   uint64
	tree    *ratchetTree
	members map[leafIndex]*treeSimMember
	nextID  int
}

func newTreeSim(t testing.TB, seed uint64) *treeSim {
	s := treeTestSuite(t)
	g := &treeSim{t: t, s: s, rng: rand.New(rand.NewPCG(seed, seed)), groupID: []byte("test group"), members: map[leafIndex]*treeSimMember{}}
	ln, sigPriv, kp := newTreeTestLeaf(t, s, "member-0")
	g.nextID = 1
	g.tree = newRatchetTree(s, ln)
	g.members[0] = &treeSimMember{sigPriv: sigPriv, priv: newPrivateTree(0, kp.priv, kp.pub)}
	return g
}

func (g *treeSim) groupContext(treeHash []byte) ([]byte, error) {
	return marshal(&GroupContext{
		Version: ProtocolVersionMLS10, CipherSuite: g.s.id(), GroupID: g.groupID,
		Epoch: g.epoch + 1, TreeHash: treeHash, ConfirmedTranscriptHash: []byte("cth"),
	}), nil
}

// commit has committer apply the given removes, updates and a number of
// adds, with or without an UpdatePath, and checks that every member ends up
// with the same tree and the same commit secret.
func (g *treeSim) commit(committer leafIndex, updates, removes []leafIndex, adds int, withPath bool) {
	t := g.t
	t.Helper()
	type update struct {
		l    leafIndex
		leaf *LeafNode
		kp   hpkeKeyPair
	}
	var ups []update
	for _, l := range updates {
		m := g.members[l]
		priv, pub, err := g.s.hpkeGenerateKeyPair()
		if err != nil {
			t.Fatal(err)
		}
		nl := *g.tree.leafNode(l)
		nl.EncryptionKey = pub
		nl.LeafNodeSource = LeafNodeSourceUpdate
		nl.Lifetime = Lifetime{}
		if err := nl.sign(g.s, m.sigPriv, g.groupID, uint32(l)); err != nil {
			t.Fatal(err)
		}
		ups = append(ups, update{l, &nl, hpkeKeyPair{priv, pub}})
	}
	type added struct {
		leaf    *LeafNode
		sigPriv []byte
		kp      hpkeKeyPair
	}
	var news []added
	for range adds {
		ln, sigPriv, kp := newTreeTestLeaf(t, g.s, fmt.Sprintf("member-%d", g.nextID))
		g.nextID++
		news = append(news, added{ln, sigPriv, kp})
	}
	// §12.3: updates, then removes, then adds.
	apply := func(tr *ratchetTree) []leafIndex {
		for _, u := range ups {
			if err := tr.updateLeaf(u.l, u.leaf); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range removes {
			if err := tr.removeLeaf(l); err != nil {
				t.Fatal(err)
			}
		}
		var ls []leafIndex
		for _, a := range news {
			ls = append(ls, tr.addLeaf(a.leaf))
		}
		return ls
	}
	newTree := g.tree.clone()
	newLeaves := apply(newTree)
	var res *updatePathResult
	if withPath {
		var err error
		res, err = newTree.generateUpdatePath(g.members[committer].priv, nil, g.members[committer].sigPriv, g.groupID, newLeaves, g.groupContext)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.priv.consistent(newTree); err != nil {
			t.Fatal(err)
		}
	}
	want := newTree.treeHash()
	ctx, _ := g.groupContext(want)

	next := map[leafIndex]*treeSimMember{}
	for l, m := range g.members {
		if slices.Contains(removes, l) {
			continue
		}
		nm := &treeSimMember{sigPriv: m.sigPriv, priv: m.priv}
		for _, u := range ups {
			if u.l == l {
				nm.priv = newPrivateTree(l, u.kp.priv, u.kp.pub)
			}
		}
		next[l] = nm
		if !withPath {
			continue
		}
		if l == committer {
			nm.priv = res.priv
			continue
		}
		// A receiver: apply the proposals and the path to its own copy.
		rt := g.tree.clone()
		if got := apply(rt); !slices.Equal(got, newLeaves) {
			t.Fatalf("receiver placed new members at %v, committer at %v", got, newLeaves)
		}
		var path updatePath
		if err := unmarshal(marshal(res.path), &path); err != nil {
			t.Fatal(err)
		}
		if err := rt.mergeUpdatePath(committer, &path); err != nil {
			t.Fatalf("leaf %d merging path of %d: %v", l, committer, err)
		}
		if !bytes.Equal(rt.treeHash(), want) {
			t.Fatalf("leaf %d: tree hash after merge differs from the committer's", l)
		}
		cs, np, err := rt.decryptUpdatePath(nm.priv, committer, &path, newLeaves, ctx)
		if err != nil {
			t.Fatalf("leaf %d decrypting path of %d: %v", l, committer, err)
		}
		if !bytes.Equal(cs, res.commitSecret) {
			t.Fatalf("leaf %d: commit secret differs", l)
		}
		if err := np.consistent(rt); err != nil {
			t.Fatalf("leaf %d: %v", l, err)
		}
		nm.priv = np
	}
	for i, l := range newLeaves {
		a := news[i]
		p := newPrivateTree(l, a.kp.priv, a.kp.pub)
		if withPath {
			ps, ok := res.pathSecretFor(l)
			if !ok {
				t.Fatalf("no path secret for new leaf %d", l)
			}
			if err := p.implantPathSecret(newTree, committer, ps.node, ps.secret); err != nil {
				t.Fatalf("new leaf %d: %v", l, err)
			}
		}
		next[l] = &treeSimMember{sigPriv: a.sigPriv, priv: p}
	}
	g.tree = newTree
	g.members = next
	g.epoch++
	g.check()
}

// check validates the shared tree and checks its caches against a tree
// decoded from scratch.
func (g *treeSim) check() {
	t := g.t
	t.Helper()
	if err := g.tree.validate(g.groupID); err != nil {
		t.Fatalf("epoch %d: %v", g.epoch, err)
	}
	enc := g.tree.encode()
	fresh, err := decodeRatchetTree(g.s, enc)
	if err != nil {
		t.Fatalf("epoch %d: decoding own tree: %v", g.epoch, err)
	}
	if !bytes.Equal(fresh.encode(), enc) {
		t.Fatalf("epoch %d: re-encoding differs", g.epoch)
	}
	if !bytes.Equal(fresh.treeHash(), g.tree.treeHash()) {
		t.Fatalf("epoch %d: cached tree hash differs from a fresh computation", g.epoch)
	}
	if fresh.width() != g.tree.width() {
		t.Fatalf("epoch %d: %d nodes, a fresh decoding has %d", g.epoch, g.tree.width(), fresh.width())
	}
	for x := range nodeIndex(g.tree.width()) {
		if fresh.filledAt(x) != g.tree.filledAt(x) || fresh.leavesAt(x) != g.tree.leavesAt(x) {
			t.Fatalf("epoch %d: node counts of node %d differ from a fresh count", g.epoch, x)
		}
		fp, gp := fresh.pages[x>>treePageBits], g.tree.pages[x>>treePageBits]
		if j := x & (treePageSize - 1); fp.keyTags[j] != gp.keyTags[j] {
			t.Fatalf("epoch %d: key tags of node %d differ from a fresh decoding", g.epoch, x)
		}
	}
	for x := range nodeIndex(g.tree.width()) {
		if got, want := g.tree.resolution(x, nil), naiveResolution(g.tree, x); !slices.Equal(got, want) {
			t.Fatalf("epoch %d: resolution(%d) = %v, want %v", g.epoch, x, got, want)
		}
	}
	if int(g.tree.memberCount()) != len(g.members) {
		t.Fatalf("epoch %d: %d members in tree, %d simulated", g.epoch, g.tree.memberCount(), len(g.members))
	}
	for l, m := range g.members {
		if g.tree.leafNode(l) == nil {
			t.Fatalf("epoch %d: member %d has a blank leaf", g.epoch, l)
		}
		if err := m.priv.consistent(g.tree); err != nil {
			// Stale keys for blanked or replaced nodes are harmless;
			// only the leaf key must always match.
			if _, ok := m.priv.keyFor(g.tree, l.node()); !ok {
				t.Fatalf("epoch %d: member %d: leaf key does not match", g.epoch, l)
			}
		}
	}
}

// naiveResolution is §4.1.1 written directly.
func naiveResolution(t *ratchetTree, x nodeIndex) []nodeIndex {
	n := t.node(x)
	switch {
	case n.Leaf != nil:
		return []nodeIndex{x}
	case n.Parent != nil:
		out := []nodeIndex{x}
		for _, u := range n.Parent.UnmergedLeaves {
			out = append(out, leafIndex(u).node())
		}
		return out
	case x.isLeaf():
		return nil
	}
	return append(naiveResolution(t, left(x)), naiveResolution(t, right(x))...)
}

// TestTreeKEMGroup runs random sequences of commits with adds, removes,
// updates and paths, and after each one validates the tree (parent hashes
// included) and checks that all members agree.
func TestTreeKEMGroup(t *testing.T) {
	epochs := 60
	if testing.Short() {
		epochs = 15
	}
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			g := newTreeSim(t, seed)
			g.commit(0, nil, nil, 3, true)
			for range epochs {
				members := slices.Sorted(func(yield func(leafIndex) bool) {
					for l := range g.members {
						if !yield(l) {
							return
						}
					}
				})
				committer := members[g.rng.IntN(len(members))]
				var others []leafIndex
				for _, l := range members {
					if l != committer {
						others = append(others, l)
					}
				}
				g.rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
				var updates, removes []leafIndex
				nr := 0
				if len(others) > 2 {
					nr = g.rng.IntN(3)
				}
				removes = others[:nr]
				if len(others) > nr && g.rng.IntN(3) == 0 {
					updates = others[nr : nr+1]
				}
				adds := g.rng.IntN(4)
				if len(members) < 4 {
					adds++
				}
				// A Commit without a path may only carry adds here.
				withPath := len(updates) > 0 || len(removes) > 0 || g.rng.IntN(4) != 0
				g.commit(committer, updates, removes, adds, withPath)
			}
		})
	}
}

// TestTreeAddRemoveTruncate checks leaf placement, extension and truncation
// (§7.7, §12.1.1, §12.1.3).
func TestTreeAddRemoveTruncate(t *testing.T) {
	s := treeTestSuite(t)
	ln, _, _ := newTreeTestLeaf(t, s, "a")
	tr := newRatchetTree(s, ln)
	for i := 1; i < 5; i++ {
		if l := tr.addLeaf(ln); l != leafIndex(i) {
			t.Fatalf("add %d: got leaf %d", i, l)
		}
	}
	if tr.size() != 8 {
		t.Fatalf("size %d after 5 adds, want 8", tr.size())
	}
	if err := tr.removeLeaf(1); err != nil {
		t.Fatal(err)
	}
	if l := tr.addLeaf(ln); l != 1 {
		t.Fatalf("add after remove went to leaf %d, want the leftmost blank 1", l)
	}
	if err := tr.removeLeaf(4); err != nil {
		t.Fatal(err)
	}
	if tr.size() != 4 {
		t.Fatalf("size %d after removing the only leaf of the right half, want 4", tr.size())
	}
	for _, l := range []leafIndex{3, 2, 1} {
		if err := tr.removeLeaf(l); err != nil {
			t.Fatal(err)
		}
	}
	if tr.size() != 1 || tr.memberCount() != 1 {
		t.Fatalf("size %d, %d members; want 1, 1", tr.size(), tr.memberCount())
	}
	if err := tr.removeLeaf(3); err == nil {
		t.Fatal("removing a leaf outside the tree succeeded")
	}
}

// TestTreeCloneIndependent checks that changing a clone leaves the original
// alone.
func TestTreeCloneIndependent(t *testing.T) {
	g := newTreeSim(t, 7)
	g.commit(0, nil, nil, 5, true)
	before := g.tree.encode()
	hash := slices.Clone(g.tree.treeHash())
	c := g.tree.clone()
	if err := c.removeLeaf(3); err != nil {
		t.Fatal(err)
	}
	c.addLeaf(c.leafNode(0))
	if !bytes.Equal(g.tree.encode(), before) || !bytes.Equal(g.tree.treeHash(), hash) {
		t.Fatal("changing a clone changed the original")
	}
}

// TestTreeClonePagesIndependent checks the copy-on-write pages of a tree
// much larger than a page: after a clone, changes to either tree leave the
// other as it was, and the hashes either caches, in pages the two may
// still share, are those of a fresh decoding of each.
func TestTreeClonePagesIndependent(t *testing.T) {
	orig := buildCommittedTree(t, 300)
	before := orig.encode()
	hash := slices.Clone(orig.treeHash())
	c := orig.clone()
	if err := c.removeLeaf(7); err != nil {
		t.Fatal(err)
	}
	c.addLeaf(c.leafNode(0))
	if err := c.removeLeaf(299); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(orig.encode(), before) || !bytes.Equal(orig.treeHash(), hash) {
		t.Fatal("changing a clone changed the original")
	}
	cEnc, cHash := c.encode(), slices.Clone(c.treeHash())
	// The original changes after the clone; the clone must not see it.
	if err := orig.removeLeaf(150); err != nil {
		t.Fatal(err)
	}
	if err := orig.updateLeaf(3, orig.leafNode(4)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.encode(), cEnc) || !bytes.Equal(c.treeHash(), cHash) {
		t.Fatal("changing the original changed its clone")
	}
	for _, tr := range []*ratchetTree{orig, c, orig.clone()} {
		fresh, err := decodeRatchetTree(tr.s, tr.encode())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fresh.treeHash(), tr.treeHash()) {
			t.Fatal("cached tree hash differs from a fresh decoding's")
		}
		for x := range nodeIndex(tr.width()) {
			if !bytes.Equal(fresh.hash(x), tr.hash(x)) || fresh.filledAt(x) != tr.filledAt(x) || fresh.leavesAt(x) != tr.leavesAt(x) {
				t.Fatalf("node %d differs from a fresh decoding", x)
			}
		}
	}
}

// TestDecodeRatchetTreeStrict checks the encoding rules of §12.4.3.3.
func TestDecodeRatchetTreeStrict(t *testing.T) {
	s := treeTestSuite(t)
	g := newTreeSim(t, 3)
	g.commit(0, nil, nil, 2, true)
	good := g.tree.encode()
	if _, err := decodeRatchetTree(s, good); err != nil {
		t.Fatal(err)
	}
	leaf := marshal(treeNode{Leaf: g.tree.leafNode(0)})
	parentNode := marshal(treeNode{Parent: &parentNodeData{EncryptionKey: []byte{1}}})
	vec := func(parts ...[]byte) []byte {
		var b builder
		b.vec(bytes.Join(parts, nil))
		return b.bytes()
	}
	opt := func(n []byte) []byte { return append([]byte{1}, n...) }
	blank := []byte{0}
	for name, data := range map[string][]byte{
		"empty vector":         vec(),
		"trailing blank":       vec(opt(leaf), blank, blank),
		"only blank":           vec(blank),
		"parent at leaf slot":  vec(opt(parentNode)),
		"leaf at parent slot":  vec(opt(leaf), opt(leaf), opt(leaf)),
		"bad optional flag":    vec([]byte{2}, leaf),
		"bad node type":        vec([]byte{1, 3}),
		"trailing bytes":       append(slices.Clone(good), 0),
		"truncated":            good[:len(good)-1],
		"no bytes":             nil,
		"length past the end":  {0x40, 0xff},
		"non-minimal length":   append([]byte{0x40, byte(len(good) - 1)}, good[1:]...),
		"too many blank nodes": vec(bytes.Repeat(blank, int(nodeWidth(maxTreeLeaves))), opt(leaf)),
	} {
		if _, err := decodeRatchetTree(s, data); !errors.Is(err, errTreeDecode) {
			t.Errorf("%s: got %v, want a decoding error", name, err)
		}
	}
	// A tree whose last non-blank node is a parent is extended with blank
	// leaves and re-encodes the same.
	data := vec(opt(leaf), opt(parentNode))
	tr, err := decodeRatchetTree(s, data)
	if err != nil {
		t.Fatal(err)
	}
	if tr.size() != 2 || !bytes.Equal(tr.encode(), data) {
		t.Fatalf("size %d, re-encoding equal %v", tr.size(), bytes.Equal(tr.encode(), data))
	}
}

// TestVerifyParentHashesRejects checks that tampering with a valid tree is
// caught (§7.9.2).
func TestVerifyParentHashesRejects(t *testing.T) {
	g := newTreeSim(t, 11)
	g.commit(0, nil, nil, 6, true)
	g.commit(3, nil, nil, 2, false) // leaves unmerged leaves at the root
	if err := g.tree.verifyParentHashes(); err != nil {
		t.Fatal(err)
	}
	tamper := func(name string, f func(tr *ratchetTree) bool) {
		tr := g.tree.clone()
		if !f(tr) {
			t.Fatalf("%s: nothing to tamper with", name)
		}
		if err := tr.validate(g.groupID); err == nil {
			t.Errorf("%s: tampered tree validated", name)
		}
	}
	firstParent := func(tr *ratchetTree) nodeIndex {
		for x := range nodeIndex(tr.width()) {
			if tr.node(x).Parent != nil {
				return x
			}
		}
		return 0
	}
	tamper("parent key replaced", func(tr *ratchetTree) bool {
		x := firstParent(tr)
		p := *tr.node(x).Parent
		p.EncryptionKey = append([]byte{}, p.EncryptionKey...)
		p.EncryptionKey[0] ^= 1
		tr.setNode(x, treeNode{Parent: &p})
		return x != 0
	})
	tamper("unmerged leaf dropped", func(tr *ratchetTree) bool {
		for x := range nodeIndex(tr.width()) {
			p := tr.node(x).Parent
			if p == nil || len(p.UnmergedLeaves) == 0 {
				continue
			}
			np := *p
			np.UnmergedLeaves = p.UnmergedLeaves[1:]
			tr.setNode(x, treeNode{Parent: &np})
			return true
		}
		return false
	})
	tamper("parent node blanked under a chain", func(tr *ratchetTree) bool {
		x := firstParent(tr)
		if x == tr.rootIndex() {
			return false
		}
		tr.setNode(x, treeNode{})
		return true
	})
	tamper("leaf signature", func(tr *ratchetTree) bool {
		ln := *tr.leafNode(1)
		ln.Signature = append([]byte{}, ln.Signature...)
		ln.Signature[0] ^= 1
		tr.setNode(leafIndex(1).node(), treeNode{Leaf: &ln})
		return true
	})
}

// TestFilteredDirectPath checks the example of §4.1.2 (Figure 6): leaves
// A, B, E, F, G present, so the filtered direct paths are A: T, W;
// E: X, Y, W; G: Y, W.
func TestFilteredDirectPath(t *testing.T) {
	s := treeTestSuite(t)
	ln, _, _ := newTreeTestLeaf(t, s, "a")
	tr := newRatchetTree(s, ln)
	for range 7 {
		tr.addLeaf(ln)
	}
	for _, l := range []leafIndex{2, 3, 7} {
		tr.setNode(l.node(), treeNode{})
	}
	for l, want := range map[leafIndex][]nodeIndex{0: {1, 7}, 1: {1, 7}, 4: {9, 11, 7}, 5: {9, 11, 7}, 6: {11, 7}} {
		if got, _ := tr.filteredDirectPath(l); !slices.Equal(got, want) {
			t.Errorf("filtered direct path of leaf %d: %v, want %v", l, got, want)
		}
	}
}

// TestUpdatePathRejects checks that a receiver refuses malformed
// UpdatePaths (§7.5, §7.6, §7.9.2).
func TestUpdatePathRejects(t *testing.T) {
	g := newTreeSim(t, 13)
	g.commit(0, nil, nil, 7, true) // eight members, a full tree
	sender, receiver := leafIndex(0), leafIndex(7)
	gen := g.tree.clone()
	res, err := gen.generateUpdatePath(g.members[sender].priv, nil, g.members[sender].sigPriv, g.groupID, nil, g.groupContext)
	if err != nil {
		t.Fatal(err)
	}
	ctx, _ := g.groupContext(gen.treeHash())
	try := func(name string, change func(p *updatePath), wantMergeErr bool) {
		wantOK := name == "unchanged"
		t.Helper()
		var p updatePath
		if err := unmarshal(marshal(res.path), &p); err != nil {
			t.Fatal(err)
		}
		change(&p)
		tr := g.tree.clone()
		err := tr.mergeUpdatePath(sender, &p)
		if wantMergeErr {
			if err == nil {
				t.Errorf("%s: merged", name)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: merge: %v", name, err)
		}
		_, _, err = tr.decryptUpdatePath(g.members[receiver].priv, sender, &p, nil, ctx)
		if wantOK && err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !wantOK && err == nil {
			t.Errorf("%s: decrypted", name)
		}
	}
	try("unchanged", func(*updatePath) {}, false) // sanity: must decrypt
	try("node missing", func(p *updatePath) { p.Nodes = p.Nodes[:len(p.Nodes)-1] }, true)
	try("leaf parent hash", func(p *updatePath) { p.LeafNode.ParentHash[0] ^= 1 }, true)
	try("node key", func(p *updatePath) { p.Nodes[0].EncryptionKey[0] ^= 1 }, true)
	try("ciphertext missing at another level", func(p *updatePath) {
		p.Nodes[0].EncryptedPathSecret = nil
	}, false)
	try("ciphertext corrupted", func(p *updatePath) {
		for _, c := range p.Nodes[len(p.Nodes)-1].EncryptedPathSecret {
			c.Ciphertext[len(c.Ciphertext)-1] ^= 1
		}
	}, false)
}

// TestLargeTreeParentHashes checks parent-hash verification on a large tree
// where every parent is set, and that one altered parent is caught.
func TestLargeTreeParentHashes(t *testing.T) {
	n := uint32(10000)
	if testing.Short() {
		n = 1000
	}
	tr := buildCommittedTree(t, n)
	if err := tr.validateStructure(); err != nil {
		t.Fatal(err)
	}
	if err := tr.verifyParentHashes(); err != nil {
		t.Fatal(err)
	}
	x := parent(leafIndex(n / 3).node())
	p := *tr.node(x).Parent
	p.ParentHash = append([]byte{1}, p.ParentHash...)
	tr.setNode(x, treeNode{Parent: &p})
	if err := tr.verifyParentHashes(); !errors.Is(err, errParentHash) {
		t.Fatalf("altered parent %d: got %v", x, err)
	}
}
