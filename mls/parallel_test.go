package mls

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParallelForLowestError(t *testing.T) {
	for _, n := range []int{0, 1, 7, 64, 100, 1000, 4097} {
		for trial := range 20 {
			var bad []int
			for range trial % 4 {
				bad = append(bad, rand.IntN(max(n, 1)))
			}
			want := -1
			for _, b := range bad {
				if b < n && (want < 0 || b < want) {
					want = b
				}
			}
			var calls atomic.Int64
			err := parallelFor(n, 16, func(i int) error {
				calls.Add(1)
				for _, b := range bad {
					if i == b {
						return fmt.Errorf("item %d", i)
					}
				}
				return nil
			})
			switch {
			case want < 0 && err != nil:
				t.Fatalf("n=%d: unexpected error %v", n, err)
			case want < 0 && calls.Load() != int64(n):
				t.Fatalf("n=%d: %d calls", n, calls.Load())
			case want >= 0 && (err == nil || err.Error() != fmt.Sprintf("item %d", want)):
				t.Fatalf("n=%d, bad %v: got %v, want item %d", n, bad, err, want)
			}
		}
	}
}

// largeTreeFixture is a full tree of 200 members, large enough for the
// parallel paths of validation and path encryption.
func largeTreeFixture(t *testing.T) *benchFixture {
	if testing.Short() {
		t.Skip("builds a group of 200")
	}
	return buildBenchFixture(t, testSuite, 200, true)
}

func TestLargeTreeJoinAndCommit(t *testing.T) {
	f := largeTreeFixture(t)
	g, err := Join(f.welcome, f.joinBundle, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := f.a
	res, err := a.AddMembers(f.joinBundle.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	a.DiscardCommit()
	if res.Welcome == nil {
		t.Fatal("no welcome")
	}
	if g.Epoch() != a.Epoch()+1 {
		t.Fatalf("joiner at epoch %d, group at %d", g.Epoch(), a.Epoch())
	}
}

// TestLargeTreeErrorsDeterministic checks that checks spread over CPUs
// name the lowest failing leaf or node, every time.
func TestLargeTreeErrorsDeterministic(t *testing.T) {
	f := largeTreeFixture(t)
	enc := f.a.cur.tree.encode()
	for range 10 {
		tr, err := decodeRatchetTree(f.a.s, enc)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range []leafIndex{170, 90, 150} {
			ln := *tr.leafNode(l)
			ln.Signature = append([]byte(nil), ln.Signature...)
			ln.Signature[0] ^= 1
			tr.setNode(l.node(), treeNode{Leaf: &ln})
		}
		err = tr.validateLeafSignatures(f.a.cur.ctx.GroupID)
		if err == nil || !strings.HasSuffix(err.Error(), "bad signature on leaf 90") {
			t.Fatalf("got %v", err)
		}
	}
	var first string
	for range 10 {
		tr, err := decodeRatchetTree(f.a.s, enc)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.verifyParentHashes(); err != nil {
			t.Fatal(err)
		}
		for _, x := range []nodeIndex{301, 141, 205} {
			p := *tr.node(x).Parent
			p.ParentHash = append([]byte(nil), p.ParentHash...)
			p.ParentHash[0] ^= 1
			tr.setNode(x, treeNode{Parent: &p})
		}
		err = tr.verifyParentHashes()
		if !errors.Is(err, errParentHash) {
			t.Fatalf("got %v", err)
		}
		if first == "" {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("got %q, then %q", first, err)
		}
	}
}
