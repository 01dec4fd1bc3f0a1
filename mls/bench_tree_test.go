package mls

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Benchmarks of the ratchet tree at 2 to 10,000 leaves. The trees are built
// from deterministic node secrets so that setup takes seconds, not minutes:
// leaf and parent key pairs come from DeriveKeyPair over a counter, and all
// leaves share one credential and signature key (nothing here verifies
// them).

var benchSizes = []uint32{2, 10, 100, 1000, 10000}

// benchTree is a tree plus what the benchmarks need to use it.
type benchTree struct {
	tree    *ratchetTree
	sigPriv []byte
	// keys holds the private key of every non-blank node, so any member's
	// private tree can be assembled.
	keys map[nodeIndex]hpkeKeyPair
}

var benchTrees sync.Map // "full/N" or "bare/N" -> *benchTree

// benchSecret returns a distinct deterministic secret for node x.
func benchSecret(s suite, x nodeIndex) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(x))
	return s.hash(append([]byte("bench node "), b[:]...))
}

// getBenchTree returns a tree with n members in leaves 0..n-1. When full is
// set, every parent node above at least one member holds a key pair.
func getBenchTree(b *testing.B, n uint32, full bool) *benchTree {
	key := fmt.Sprintf("%v/%d", full, n)
	if bt, ok := benchTrees.Load(key); ok {
		return bt.(*benchTree)
	}
	if n >= 10000 && testing.Short() {
		b.Skip("10,000-leaf tree skipped in -short mode")
	}
	s := treeTestSuite(b)
	tmpl, sigPriv, _ := newTreeTestLeaf(b, s, "bench")
	bt := &benchTree{sigPriv: sigPriv, keys: make(map[nodeIndex]hpkeKeyPair)}
	derive := func(x nodeIndex) hpkeKeyPair {
		kp, err := nodeKeyPair(s, benchSecret(s, x))
		if err != nil {
			b.Fatal(err)
		}
		bt.keys[x] = kp
		return kp
	}
	leaf0 := *tmpl
	leaf0.EncryptionKey = derive(0).pub
	t := newRatchetTree(s, &leaf0)
	for i := uint32(1); i < n; i++ {
		ln := *tmpl
		ln.EncryptionKey = derive(leafIndex(i).node()).pub
		t.addLeaf(&ln)
	}
	if full {
		for x := nodeIndex(1); int(x) < t.width(); x += 2 {
			if t.leavesAt(x) > 0 {
				t.setNode(x, treeNode{Parent: &parentNodeData{EncryptionKey: derive(x).pub}})
			}
		}
	}
	t.treeHash()
	bt.tree = t
	benchTrees.Store(key, bt)
	return bt
}

// privateFor assembles the private tree of the member at leaf l: its leaf
// key and the keys of the non-blank nodes on its direct path.
func (bt *benchTree) privateFor(l leafIndex) *privateTree {
	p := &privateTree{self: l, keys: map[nodeIndex]hpkeKeyPair{l.node(): bt.keys[l.node()]}}
	for _, x := range directPath(l.node(), bt.tree.size()) {
		if kp, ok := bt.keys[x]; ok && !bt.tree.node(x).blank() {
			p.keys[x] = kp
		}
	}
	return p
}

// treeCPUMeter reports the process CPU time per operation as "cpu-ns/op",
// counting only the spans between start and stop so that per-iteration
// setup is left out. On a busy machine wall time mostly measures waiting
// for a CPU; this does not.
type treeCPUMeter struct {
	total, since time.Duration
	ok           bool
}

func (m *treeCPUMeter) start() { m.since, m.ok = processCPUTime() }

func (m *treeCPUMeter) stop() {
	if t, ok := processCPUTime(); ok && m.ok {
		m.total += t - m.since
	}
}

func (m *treeCPUMeter) report(b *testing.B) {
	if m.total > 0 && b.N > 0 {
		b.ReportMetric(float64(m.total.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func benchGroupContext(treeHash []byte) ([]byte, error) {
	return marshal(&GroupContext{
		Version: ProtocolVersionMLS10, CipherSuite: MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519,
		GroupID: []byte("bench group"), Epoch: 1, TreeHash: treeHash, ConfirmedTranscriptHash: make([]byte, 32),
	}), nil
}

// BenchmarkUpdatePathGenerate measures generateUpdatePath from leaf 0: in a
// full tree (one encryption per level) and in a bare tree (all parents
// blank, one encryption per other member).
func BenchmarkUpdatePathGenerate(b *testing.B) {
	for _, full := range []bool{true, false} {
		for _, n := range benchSizes {
			name := fmt.Sprintf("bare/leaves=%d", n)
			if full {
				name = fmt.Sprintf("full/leaves=%d", n)
			}
			b.Run(name, func(b *testing.B) {
				bt := getBenchTree(b, n, full)
				t := bt.tree.clone()
				priv := bt.privateFor(0)
				var cpu treeCPUMeter
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					cpu.start()
					if _, err := t.generateUpdatePath(priv, nil, bt.sigPriv, []byte("bench group"), nil, benchGroupContext); err != nil {
						b.Fatal(err)
					}
					cpu.stop()
					if !full {
						// Put the tree back to bare for the next round.
						b.StopTimer()
						t.blankDirectPath(0)
						t.treeHash()
						b.StartTimer()
					}
				}
				cpu.report(b)
			})
		}
	}
}

// BenchmarkUpdatePathApply measures a receiver merging and decrypting an
// UpdatePath from leaf 0 (§7.5). The receiver is leaf 1, the worst case: it
// decrypts at the lowest level and derives every key above. The tree hash
// for the GroupContext is included.
func BenchmarkUpdatePathApply(b *testing.B) {
	for _, full := range []bool{true, false} {
		for _, n := range benchSizes {
			name := fmt.Sprintf("bare/leaves=%d", n)
			if full {
				name = fmt.Sprintf("full/leaves=%d", n)
			}
			b.Run(name, func(b *testing.B) {
				bt := getBenchTree(b, n, full)
				gen := bt.tree.clone()
				res, err := gen.generateUpdatePath(bt.privateFor(0), nil, bt.sigPriv, []byte("bench group"), nil, benchGroupContext)
				if err != nil {
					b.Fatal(err)
				}
				priv := bt.privateFor(1)
				var cpu treeCPUMeter
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					b.StopTimer()
					t := bt.tree.clone()
					b.StartTimer()
					cpu.start()
					if err := t.mergeUpdatePath(0, res.path); err != nil {
						b.Fatal(err)
					}
					ctx, _ := benchGroupContext(t.treeHash())
					cs, _, err := t.decryptUpdatePath(priv, 0, res.path, nil, ctx)
					if err != nil {
						b.Fatal(err)
					}
					cpu.stop()
					if string(cs) != string(res.commitSecret) {
						b.Fatal("commit secret mismatch")
					}
				}
				cpu.report(b)
			})
		}
	}
}

// BenchmarkTreeHash measures the root tree hash after one leaf changes
// (only its path is rehashed) and from scratch.
func BenchmarkTreeHash(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("one-path/leaves=%d", n), func(b *testing.B) {
			bt := getBenchTree(b, n, true)
			t := bt.tree.clone()
			l := leafIndex(n / 2)
			a := t.leafNode(l)
			alt := *a
			alt.Signature = append([]byte{1}, a.Signature...)
			var cpu treeCPUMeter
			b.ReportAllocs()
			i := 0
			cpu.start()
			for b.Loop() {
				if i++; i%2 == 0 {
					t.setNode(l.node(), treeNode{Leaf: a})
				} else {
					t.setNode(l.node(), treeNode{Leaf: &alt})
				}
				t.treeHash()
			}
			cpu.stop()
			cpu.report(b)
		})
		b.Run(fmt.Sprintf("scratch/leaves=%d", n), func(b *testing.B) {
			bt := getBenchTree(b, n, true)
			t := bt.tree.clone()
			var cpu treeCPUMeter
			b.ReportAllocs()
			cpu.start()
			for b.Loop() {
				t.dropHashes()
				t.treeHash()
			}
			cpu.stop()
			cpu.report(b)
		})
	}
}

// buildCommittedTree returns an n-member tree in which every member has
// committed once, in leaf order, so every parent above a member is
// non-blank and parent-hash valid (each parent was last set by the
// rightmost member below it, along with the whole chain down to it). Keys
// are random bytes and leaves are unsigned: this is for the hash and
// structure checks only, and costs O(n log n) hashes.
func buildCommittedTree(tb testing.TB, n uint32) *ratchetTree {
	s := treeTestSuite(tb)
	tmpl, _, _ := newTreeTestLeaf(tb, s, "large")
	key := func(i uint32, tag byte) []byte {
		var b [5]byte
		binary.BigEndian.PutUint32(b[:], i)
		b[4] = tag
		return s.hash(b[:])
	}
	leaf0 := *tmpl
	leaf0.EncryptionKey = key(0, 'l')
	t := newRatchetTree(s, &leaf0)
	for i := uint32(1); i < n; i++ {
		ln := *tmpl
		ln.EncryptionKey = key(i, 'l')
		ln.SignatureKey = key(i, 's')
		t.addLeaf(&ln)
	}
	for i := range n {
		l := leafIndex(i)
		t.blankDirectPath(l)
		fdp, cp := t.filteredDirectPath(l)
		for _, x := range fdp {
			t.setNode(x, treeNode{Parent: &parentNodeData{EncryptionKey: key(i<<8|uint32(level(x)), 'p')}})
		}
		ln := *t.leafNode(l)
		ln.LeafNodeSource = LeafNodeSourceCommit
		ln.ParentHash = t.setPathParentHashes(fdp, cp)
		t.setNode(l.node(), treeNode{Leaf: &ln})
	}
	return t
}

// BenchmarkJoinTreeCheck measures what a joiner does with a received
// ratchet_tree before trusting it, apart from leaf signatures: decode, tree
// hash from scratch, structure checks and parent-hash verification of every
// parent (§7.9.2, §12.4.3.1).
func BenchmarkJoinTreeCheck(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("leaves=%d", n), func(b *testing.B) {
			if n >= 10000 && testing.Short() {
				b.Skip("10,000-leaf tree skipped in -short mode")
			}
			enc := buildCommittedTree(b, n).encode()
			s := treeTestSuite(b)
			var cpu treeCPUMeter
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			cpu.start()
			for b.Loop() {
				t, err := decodeRatchetTree(s, enc)
				if err != nil {
					b.Fatal(err)
				}
				t.treeHash()
				if err := t.validateStructure(); err != nil {
					b.Fatal(err)
				}
				if err := t.verifyParentHashes(); err != nil {
					b.Fatal(err)
				}
			}
			cpu.stop()
			cpu.report(b)
		})
	}
}

// dropHashes forgets every cached tree hash of t.
func (t *ratchetTree) dropHashes() {
	for i := range t.pages {
		p, _ := t.writable(nodeIndex(i << treePageBits))
		clear(p.hashes[:])
	}
}
