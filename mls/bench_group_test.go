package mls

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Group benchmarks at several sizes and two tree shapes:
//
//   - bare: one member added everyone in one Commit and nobody has
//     updated since, so most parent nodes are blank and paths encrypt to
//     many leaves;
//   - full: every parent node is set (a member under each of them has
//     committed a path), so paths encrypt to one node per level.
//
// The fixtures are built once per size and shape. Run with
//
//	go test ./mls -run '^$' -bench Group -benchtime 20x
//
// BenchmarkGroup measures suite 1 and BenchmarkGroupXWing the
// post-quantum suite 0x004D, with the same fixtures and names. Both report
// the wire sizes of what they build: commit-B (the Commit), welcome-B (the
// Welcome of one new member, ratchet tree in band) and kp-B (a KeyPackage).

// groupBenchSizes returns the group sizes to measure: 10,000 only without
// -short. (Building the full tree of 10,000 takes one Commit under each of
// its 5,000 lowest parents, processed by the measured members: about two
// and a half minutes here; it is built only when a full/n=10000 benchmark
// is selected.)
func groupBenchSizes() []int {
	if testing.Short() {
		return []int{2, 10, 100, 1000}
	}
	return []int{2, 10, 100, 1000, 10000}
}

type benchFixture struct {
	a, b    *Group // the owner at leaf 0 and a member at leaf 1
	aState  []byte
	bState  []byte
	bundles []*KeyPackageBundle // by leaf index (nil for leaf 0)
	// A Commit from a (a self update) for b to process, with b's state
	// before it.
	commit []byte
	// A Welcome adding one member, and that member's bundle.
	welcome    []byte
	joinBundle *KeyPackageBundle
}

var (
	benchMu       sync.Mutex
	benchFixtures = map[string]*benchFixture{}
)

func getBenchFixture(b *testing.B, cs CipherSuite, n int, full bool) *benchFixture {
	key := fmt.Sprintf("%d/%d/%v", cs, n, full)
	benchMu.Lock()
	defer benchMu.Unlock()
	if f, ok := benchFixtures[key]; ok {
		return f
	}
	b.StopTimer()
	defer b.StartTimer()
	path := benchFixturePath(cs, n, full)
	f := (*benchFixture)(nil)
	if path != "" {
		f = loadBenchFixture(b, cs, path)
	}
	if f == nil {
		f = buildBenchFixture(b, cs, n, full)
		if path != "" {
			saveBenchFixture(b, path, f)
		}
	}
	benchFixtures[key] = f
	return f
}

// puppet returns a copy of g that acts as the member at leaf, whose keys
// are in kb. It shares g's state read-only and sends public handshakes, so
// its Commits leave g untouched; it builds fixtures quickly without a full
// Group per member.
func puppet(g *Group, leaf leafIndex, kb *KeyPackageBundle) *Group {
	p := *g
	p.cfg.PublicHandshake = true
	p.own = leaf
	p.sigPriv = kb.sigPriv
	p.signer = nil
	p.priv = newPrivateTree(leaf, kb.encPriv, kb.kp.LeafNode.EncryptionKey)
	p.pending = nil
	return &p
}

func buildBenchFixture(b testing.TB, cs CipherSuite, n int, full bool) *benchFixture {
	cfg := &Config{}
	owner := newSuiteBundle(b, cs, "did:key:owner")
	a, err := NewGroup(bytes.Repeat([]byte{1}, 32), owner, cfg)
	if err != nil {
		b.Fatal(err)
	}
	f := &benchFixture{a: a, bundles: make([]*KeyPackageBundle, n)}
	kps := make([][]byte, 0, n-1)
	for i := 1; i < n; i++ {
		f.bundles[i] = newSuiteBundle(b, cs, fmt.Sprintf("did:key:m%d", i))
		kps = append(kps, f.bundles[i].Bytes())
	}
	res, err := a.AddMembers(kps...)
	if err != nil {
		b.Fatal(err)
	}
	if err := a.ConfirmCommit(); err != nil {
		b.Fatal(err)
	}
	if f.b, err = Join(res.Welcome, f.bundles[1], nil, cfg); err != nil {
		b.Fatal(err)
	}
	if full {
		// One commit under each lowest parent sets every parent node. The
		// commits go in bit-reversed order, so that each one finds most
		// of its copath already set and encrypts to few nodes.
		for _, k := range bitReversedOrder((n + 1) / 2) {
			l := leafIndex(2 * k)
			var res *CommitResult
			var err error
			committer := a
			if l != 0 {
				committer = puppet(a, l, f.bundles[l])
			}
			if res, err = committer.SelfUpdate(); err != nil {
				b.Fatal(err)
			}
			for _, m := range []*Group{a, f.b} {
				if m == committer {
					if err := m.ConfirmCommit(); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if _, err := m.Process(res.Commit); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	if f.bState, err = f.b.MarshalBinary(); err != nil {
		b.Fatal(err)
	}
	if f.aState, err = a.MarshalBinary(); err != nil {
		b.Fatal(err)
	}
	c, err := a.SelfUpdate()
	if err != nil {
		b.Fatal(err)
	}
	f.commit = c.Commit
	a.DiscardCommit()
	f.joinBundle = newSuiteBundle(b, cs, "did:key:joiner")
	w, err := a.AddMembers(f.joinBundle.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	f.welcome = w.Welcome
	a.DiscardCommit()
	return f
}

// restore returns a fresh copy of a saved state with its tree hashes and
// credential summary computed, as a long-lived member would have them
// (a saved state keeps neither).
func restoreWarm(b *testing.B, state []byte) *Group {
	g, err := RestoreGroup(state, nil)
	if err != nil {
		b.Fatal(err)
	}
	g.cur.tree.treeHash()
	g.credentials()
	return g
}

func BenchmarkGroup(b *testing.B) { benchmarkGroup(b, testSuite) }

func BenchmarkGroupXWing(b *testing.B) { benchmarkGroup(b, xwing) }

func benchmarkGroup(b *testing.B, cs CipherSuite) {
	for _, shape := range []string{"full", "bare"} {
		full := shape == "full"
		for _, n := range groupBenchSizes() {
			name := fmt.Sprintf("%s/n=%d", shape, n)
			// Adding a member with the tree in the Welcome (the default),
			// and out of band, as the seat sends it once the tree passes
			// 64 KiB: the Welcome is small and the committer encodes the
			// tree once (CommitResult.RatchetTree).
			for _, add := range []struct {
				name string
				tree TreeDelivery
			}{{"AddMember", TreeDefault}, {"AddMemberTreeOutOfBand", TreeOutOfBand}} {
				b.Run(name+"/"+add.name, func(b *testing.B) {
					f := getBenchFixture(b, cs, n, full)
					kp := newSuiteBundle(b, cs, "did:key:new").Bytes()
					defer startCPUMeter().report(b)
					var res *CommitResult
					for b.Loop() {
						var err error
						if res, err = f.a.Commit(CommitOptions{Add: [][]byte{kp}, Tree: add.tree}); err != nil {
							b.Fatal(err)
						}
						f.a.DiscardCommit()
					}
					b.ReportMetric(float64(len(res.Commit)), "commit-B")
					b.ReportMetric(float64(len(res.Welcome)), "welcome-B")
					b.ReportMetric(float64(len(kp)), "kp-B")
					if res.RatchetTree != nil {
						b.ReportMetric(float64(len(res.RatchetTree)), "tree-B")
					}
				})
			}
			// What a committer pays for the tree after the first ask in an
			// epoch (the size check, the GroupInfo's tree, a rejoin).
			b.Run(name+"/RatchetTree", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				defer startCPUMeter().report(b)
				var tree []byte
				for b.Loop() {
					tree = f.a.RatchetTree()
				}
				b.ReportMetric(float64(len(tree)), "tree-B")
			})
			b.Run(name+"/SelfUpdate", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				defer startCPUMeter().report(b)
				var res *CommitResult
				for b.Loop() {
					var err error
					if res, err = f.a.SelfUpdate(); err != nil {
						b.Fatal(err)
					}
					f.a.DiscardCommit()
				}
				b.ReportMetric(float64(len(res.Commit)), "commit-B")
			})
			b.Run(name+"/Remove", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				defer startCPUMeter().report(b)
				for b.Loop() {
					if _, err := f.a.RemoveMembers(uint32(n - 1)); err != nil {
						b.Fatal(err)
					}
					f.a.DiscardCommit()
				}
			})
			b.Run(name+"/ProcessCommit", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					g := restoreWarm(b, f.bState)
					b.StartTimer()
					t0, _ := processCPUTime()
					if _, err := g.Process(f.commit); err != nil {
						b.Fatal(err)
					}
					t1, _ := processCPUTime()
					cpu += t1 - t0
				}
				if b.N > 0 && cpu > 0 {
					b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				}
				b.ReportMetric(float64(len(f.commit)), "commit-B")
			})
			b.Run(name+"/Join", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				defer startCPUMeter().report(b)
				for b.Loop() {
					if _, err := Join(f.welcome, f.joinBundle, nil, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(f.welcome)), "welcome-B")
			})
			b.Run(name+"/ExternalJoin", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				gi, err := f.a.GroupInfo()
				if err != nil {
					b.Fatal(err)
				}
				bundle := newSuiteBundle(b, cs, "did:key:outsider")
				defer startCPUMeter().report(b)
				var commit []byte
				for b.Loop() {
					if _, commit, err = JoinExternal(gi, bundle, nil, nil); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(gi)), "groupinfo-B")
				b.ReportMetric(float64(len(commit)), "commit-B")
			})
			b.Run(name+"/ProcessExternalCommit", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				gi, err := f.a.GroupInfo()
				if err != nil {
					b.Fatal(err)
				}
				_, commit, err := JoinExternal(gi, newSuiteBundle(b, cs, "did:key:outsider"), nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				cfg := &Config{ExternalPolicy: admitExternal}
				var cpu time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					g, err := RestoreGroup(f.bState, cfg)
					if err != nil {
						b.Fatal(err)
					}
					g.cur.tree.treeHash()
					b.StartTimer()
					t0, _ := processCPUTime()
					if _, err := g.Process(commit); err != nil {
						b.Fatal(err)
					}
					t1, _ := processCPUTime()
					cpu += t1 - t0
				}
				if b.N > 0 && cpu > 0 {
					b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
				}
			})
			b.Run(name+"/Serialize", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				defer startCPUMeter().report(b)
				for b.Loop() {
					if _, err := f.a.MarshalBinary(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(name+"/Restore", func(b *testing.B) {
				f := getBenchFixture(b, cs, n, full)
				defer startCPUMeter().report(b)
				for b.Loop() {
					if _, err := RestoreGroup(f.aState, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkApplicationMessage(b *testing.B) { benchmarkApplicationMessage(b, testSuite) }

func BenchmarkApplicationMessageXWing(b *testing.B) { benchmarkApplicationMessage(b, xwing) }

func benchmarkApplicationMessage(b *testing.B, cs CipherSuite) {
	f := getBenchFixture(b, cs, 2, true)
	msg := bytes.Repeat([]byte{'x'}, 1024)
	b.Run("Protect1KiB", func(b *testing.B) {
		b.SetBytes(1024)
		defer startCPUMeter().report(b)
		for b.Loop() {
			if _, err := f.a.Protect(msg, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unprotect1KiB", func(b *testing.B) {
		b.SetBytes(1024)
		b.StopTimer()
		// Fresh copies of both members, in step with each other.
		sender, receiver := restoreWarm(b, f.aState), restoreWarm(b, f.bState)
		msgs := make([][]byte, b.N)
		for i := range msgs {
			var err error
			if msgs[i], err = sender.Protect(msg, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		defer startCPUMeter().report(b)
		for i := 0; i < b.N; i++ {
			if _, err := receiver.Process(msgs[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkBulkAdd1000(b *testing.B) {
	g, err := NewGroup(bytes.Repeat([]byte{2}, 32), newTestBundle(b, "did:key:owner"), nil)
	if err != nil {
		b.Fatal(err)
	}
	kps := make([][]byte, 1000)
	for i := range kps {
		kps[i] = newTestBundle(b, fmt.Sprintf("did:key:b%d", i)).Bytes()
	}
	for b.Loop() {
		if _, err := g.AddMembers(kps...); err != nil {
			b.Fatal(err)
		}
		g.DiscardCommit()
	}
}

// bitReversedOrder returns 0..m-1 sorted by their bit-reversed value.
func bitReversedOrder(m int) []int {
	bits := 0
	for 1<<bits < m {
		bits++
	}
	out := make([]int, 0, m)
	for i := 0; i < 1<<bits; i++ {
		r := 0
		for j := 0; j < bits; j++ {
			if i&(1<<j) != 0 {
				r |= 1 << (bits - 1 - j)
			}
		}
		if r < m {
			out = append(out, r)
		}
	}
	return out
}
