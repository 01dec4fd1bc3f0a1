package mls

import (
	"fmt"
	"testing"
)

// BenchmarkOutOfBandSizes reports what reaches a Delivery Service when the
// ratchet tree travels out of band (Section 12.4.3.3), for the fixtures of
// BenchmarkGroup in both suites: the Welcome adding one member and the
// GroupInfo, each without the tree and with it, the tree itself, and the
// parts of 1 MiB it is put in. Run with
//
//	go test ./mls -run '^$' -bench OutOfBandSizes -benchtime 1x
func BenchmarkOutOfBandSizes(b *testing.B) {
	for _, cs := range []struct {
		name  string
		suite CipherSuite
	}{{"suite1", testSuite}, {"xwing", xwing}} {
		for _, shape := range []string{"full", "bare"} {
			for _, n := range groupBenchSizes() {
				if n < 1000 {
					continue
				}
				b.Run(fmt.Sprintf("%s/%s/n=%d", cs.name, shape, n), func(b *testing.B) {
					f := getBenchFixture(b, cs.suite, n, shape == "full")
					var welcome, inband, tree, gi, giTree []byte
					for b.Loop() {
						res, err := f.a.Commit(CommitOptions{Add: [][]byte{f.joinBundle.Bytes()}, Tree: TreeOutOfBand})
						if err != nil {
							b.Fatal(err)
						}
						f.a.DiscardCommit()
						welcome, tree = res.Welcome, res.RatchetTree
						if gi, err = f.a.GroupInfoWith(GroupInfoOptions{Tree: TreeOutOfBand}); err != nil {
							b.Fatal(err)
						}
						if giTree, err = f.a.GroupInfoWith(GroupInfoOptions{Tree: TreeInBand}); err != nil {
							b.Fatal(err)
						}
					}
					inband = f.welcome
					b.ReportMetric(float64(len(welcome)), "welcome-B")
					b.ReportMetric(float64(len(inband)), "welcome-tree-B")
					b.ReportMetric(float64(len(gi)), "groupinfo-B")
					b.ReportMetric(float64(len(giTree)), "groupinfo-tree-B")
					b.ReportMetric(float64(len(tree)), "tree-B")
					b.ReportMetric(float64((len(tree)+1<<20-1)>>20), "parts")
				})
			}
		}
	}
}
