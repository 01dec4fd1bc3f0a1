package mls

import (
	"encoding/json"
	"fmt"
)

// checkTreeMath checks tree-math.json: for each tree size, the node count,
// the root, and left, right, parent and sibling of every node (Appendix C).
func checkTreeMath(data []byte, r *vectorRun) error {
	var cases []struct {
		NLeaves uint32    `json:"n_leaves"`
		NNodes  uint32    `json:"n_nodes"`
		Root    uint32    `json:"root"`
		Left    []*uint32 `json:"left"`
		Right   []*uint32 `json:"right"`
		Parent  []*uint32 `json:"parent"`
		Sibling []*uint32 `json:"sibling"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		return fmt.Errorf("mls: tree-math vectors: %w", err)
	}
	for _, tc := range cases {
		r.runCase(fmt.Sprintf("n_leaves=%d", tc.NLeaves), func() error {
			n := tc.NLeaves
			if n == 0 || n&(n-1) != 0 {
				return fmt.Errorf("n_leaves %d is not a power of two", n)
			}
			if got := nodeWidth(n); got != tc.NNodes {
				return fmt.Errorf("n_nodes: got %d, want %d", got, tc.NNodes)
			}
			if got := root(n); uint32(got) != tc.Root {
				return fmt.Errorf("root: got %d, want %d", got, tc.Root)
			}
			w := nodeWidth(n)
			for name, want := range map[string][]*uint32{
				"left": tc.Left, "right": tc.Right, "parent": tc.Parent, "sibling": tc.Sibling,
			} {
				if uint32(len(want)) != w {
					return fmt.Errorf("%s: %d entries for %d nodes", name, len(want), w)
				}
			}
			r := root(n)
			for i := uint32(0); i < w; i++ {
				x := nodeIndex(i)
				var l, rt, p, s *uint32
				if !x.isLeaf() {
					lv, rv := uint32(left(x)), uint32(right(x))
					l, rt = &lv, &rv
				}
				if x != r {
					pv, sv := uint32(parent(x)), uint32(sibling(x))
					p, s = &pv, &sv
				}
				for _, c := range []struct {
					name      string
					got, want *uint32
				}{
					{"left", l, tc.Left[i]},
					{"right", rt, tc.Right[i]},
					{"parent", p, tc.Parent[i]},
					{"sibling", s, tc.Sibling[i]},
				} {
					if !equalOptUint32(c.got, c.want) {
						return fmt.Errorf("%s(%d): got %s, want %s", c.name, i, fmtOptUint32(c.got), fmtOptUint32(c.want))
					}
				}
			}
			return nil
		})
	}
	return nil
}

func equalOptUint32(a, b *uint32) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func fmtOptUint32(a *uint32) string {
	if a == nil {
		return "null"
	}
	return fmt.Sprint(*a)
}
