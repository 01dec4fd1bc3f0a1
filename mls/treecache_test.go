package mls

import (
	"bytes"
	"testing"
)

// TestRatchetTreeOncePerEpoch checks the per-epoch encoding of the tree:
// every member's RatchetTree and RatchetTreeSize agree with a fresh
// encoding in every epoch (after its own Commits, others' Commits, adds in
// and out of band, removals and updates), a GroupInfo carries the same
// bytes, and writing into a returned tree changes nothing the group hands
// out later.
func TestRatchetTreeOncePerEpoch(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", nil)
	check := func(step string) {
		t.Helper()
		for id, g := range tg.members {
			fresh := g.cur.tree.encode()
			if got := g.RatchetTree(); !bytes.Equal(got, fresh) {
				t.Fatalf("%s: %s's RatchetTree differs from a fresh encoding of its tree", step, id)
			}
			if g.RatchetTreeSize() != len(fresh) {
				t.Fatalf("%s: %s's RatchetTreeSize is %d, the tree %d bytes", step, id, g.RatchetTreeSize(), len(fresh))
			}
			mine := g.RatchetTree()
			clear(mine)
			if !bytes.Equal(g.RatchetTree(), fresh) {
				t.Fatalf("%s: writing into a returned tree changed %s's next one", step, id)
			}
			gi, err := g.GroupInfoWith(GroupInfoOptions{Tree: TreeInBand})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(gi, fresh) {
				t.Fatalf("%s: %s's GroupInfo does not carry the epoch's tree", step, id)
			}
		}
	}
	tg.add("did:key:alice", "did:key:bob")
	check("bob added")
	alice := tg.members["did:key:alice"]
	carol := newTestBundle(t, "did:key:carol")
	res, err := alice.Commit(CommitOptions{Add: [][]byte{carol.Bytes()}, Tree: TreeOutOfBand})
	if err != nil {
		t.Fatal(err)
	}
	pending := alice.RatchetTree() // still the epoch before the Commit
	tg.fanOut("did:key:alice", res)
	if bytes.Equal(pending, alice.RatchetTree()) {
		t.Fatal("the tree did not change with the epoch")
	}
	if !bytes.Equal(res.RatchetTree, alice.RatchetTree()) {
		t.Fatal("the CommitResult's tree is not the new epoch's")
	}
	clear(res.RatchetTree)
	g, err := Join(res.Welcome, carol, &JoinOptions{RatchetTree: alice.RatchetTree()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg.members["did:key:carol"] = g
	check("carol added out of band")

	bob := tg.members["did:key:bob"]
	up, err := bob.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:bob", up)
	check("bob updated")

	rm, err := g.RemoveMembers(0)
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:carol", rm)
	delete(tg.members, "did:key:alice")
	check("alice removed")
	tg.check()
}
