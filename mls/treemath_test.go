package mls

import (
	"slices"
	"testing"
)

// TestTreeMathPaths checks the path helpers against their definitions in
// §4.1.2 and Appendix C, for every node of trees up to 256 leaves.
func TestTreeMathPaths(t *testing.T) {
	for n := uint32(1); n <= 256; n *= 2 {
		r := root(n)
		for i := uint32(0); i < nodeWidth(n); i++ {
			x := nodeIndex(i)
			var want []nodeIndex
			for y := x; y != r; {
				y = parent(y)
				want = append(want, y)
			}
			if got := directPath(x, n); !slices.Equal(got, want) {
				t.Fatalf("n=%d directPath(%d) = %v, want %v", n, x, got, want)
			}
			cp := copath(x, n)
			if len(cp) != len(want) {
				t.Fatalf("n=%d copath(%d) has %d entries", n, x, len(cp))
			}
			for j, c := range cp {
				if parent(c) != want[j] {
					t.Fatalf("n=%d copath(%d)[%d] = %d is not a child of %d", n, x, j, c, want[j])
				}
			}
			first, end := subtreeLeaves(x)
			for y := uint32(0); y < nodeWidth(n); y++ {
				anc := nodeIndex(y) == x || slices.Contains(directPath(nodeIndex(y), n), x)
				if isAncestor(x, nodeIndex(y)) != anc {
					t.Fatalf("n=%d isAncestor(%d, %d) = %v", n, x, y, !anc)
				}
				if nodeIndex(y).isLeaf() {
					in := nodeIndex(y).leaf() >= first && nodeIndex(y).leaf() < end
					if in != anc {
						t.Fatalf("n=%d subtreeLeaves(%d) = [%d,%d) wrong for leaf %d", n, x, first, end, y/2)
					}
				}
				// Semantic common ancestor: the lowest node on both
				// extended direct paths.
				dx := append([]nodeIndex{x}, directPath(x, n)...)
				dy := append([]nodeIndex{nodeIndex(y)}, directPath(nodeIndex(y), n)...)
				var ca nodeIndex
				found := false
				for _, a := range dx {
					if slices.Contains(dy, a) {
						ca, found = a, true
						break
					}
				}
				if !found {
					t.Fatalf("n=%d no common ancestor of %d and %d", n, x, y)
				}
				if got := commonAncestor(x, nodeIndex(y)); got != ca {
					t.Fatalf("n=%d commonAncestor(%d, %d) = %d, want %d", n, x, y, got, ca)
				}
			}
		}
	}
}
