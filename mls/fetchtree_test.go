package mls

import (
	"bytes"
	"errors"
	"testing"
)

// TestFetchTreeWelcome: a Welcome without the tree asks FetchTree for the
// tree of its GroupContext's tree_hash; a tree with one byte changed, or
// another epoch's tree, is refused and the joiner's bundle still joins
// with the right one afterwards.
func TestFetchTreeWelcome(t *testing.T) {
	tg := newTestGroup(t, "did:key:alice", nil)
	tg.add("did:key:alice", "did:key:bob")
	alice := tg.members["did:key:alice"]
	old := alice.RatchetTree()
	carol := newTestBundle(t, "did:key:carol")
	res, err := alice.Commit(CommitOptions{Add: [][]byte{carol.Bytes()}, Tree: TreeOutOfBand})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	tree := alice.RatchetTree()
	if !bytes.Equal(res.RatchetTree, tree) || !bytes.Equal(res.TreeHash, alice.TreeHash()) {
		t.Fatal("the CommitResult does not carry the new epoch's tree and tree hash")
	}

	fetchErr := errors.New("directory down")
	if _, err := Join(res.Welcome, carol, &JoinOptions{FetchTree: func([]byte) ([]byte, error) { return nil, fetchErr }}, nil); !errors.Is(err, fetchErr) {
		t.Fatalf("a failed fetch: %v", err)
	}
	flipped := bytes.Clone(tree)
	flipped[len(flipped)/2] ^= 1
	for name, bad := range map[string][]byte{"flipped": flipped, "old epoch": old, "empty": nil, "truncated": tree[:len(tree)-1]} {
		_, err := Join(res.Welcome, carol, &JoinOptions{FetchTree: func([]byte) ([]byte, error) { return bad, nil }}, nil)
		if err == nil {
			t.Fatalf("%s tree: joined", name)
		}
	}
	var asked []byte
	g, err := Join(res.Welcome, carol, &JoinOptions{FetchTree: func(h []byte) ([]byte, error) { asked = h; return tree, nil }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(asked, alice.TreeHash()) || !bytes.Equal(g.TreeHash(), asked) {
		t.Fatalf("FetchTree asked for %x, the epoch's tree hash is %x", asked, alice.TreeHash())
	}
	tg.members["did:key:carol"] = g
	tg.check()

	// With the tree in band FetchTree is not called.
	dave := newTestBundle(t, "did:key:dave")
	res, err = alice.Commit(CommitOptions{Add: [][]byte{dave.Bytes()}, Tree: TreeInBand})
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	if res.RatchetTree != nil || res.TreeHash != nil {
		t.Fatal("an in-band Commit carries the tree beside its Welcome")
	}
	if _, err := Join(res.Welcome, dave, &JoinOptions{FetchTree: func([]byte) ([]byte, error) { t.Fatal("fetched an in-band tree"); return nil, nil }}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestGroupInfoWithoutTree: GroupInfoWith(TreeOutOfBand) leaves the
// ratchet_tree extension out (and is smaller), and an external joiner gets
// the tree through FetchTree, checked against the tree hash.
func TestGroupInfoWithoutTree(t *testing.T) {
	tg, alice, _ := twoMembers(t, &Config{ExternalPolicy: admitExternal})
	full, err := alice.GroupInfo()
	if err != nil {
		t.Fatal(err)
	}
	gi, err := alice.GroupInfoWith(GroupInfoOptions{Tree: TreeOutOfBand})
	if err != nil {
		t.Fatal(err)
	}
	var m mlsMessage
	if err := unmarshal(gi, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := findExtension(m.GroupInfo.Extensions, ExtensionTypeRatchetTree); ok {
		t.Fatal("the GroupInfo carries the tree")
	}
	if len(full)-len(gi) < len(alice.RatchetTree()) {
		t.Fatalf("GroupInfo %d bytes with the tree, %d without, tree %d", len(full), len(gi), len(alice.RatchetTree()))
	}
	if _, err := alice.GroupInfoWith(GroupInfoOptions{Tree: 9}); err == nil {
		t.Fatal("an unknown tree delivery was accepted")
	}
	tree := alice.RatchetTree()
	flipped := bytes.Clone(tree)
	flipped[len(flipped)-3] ^= 0x40
	if _, _, err := JoinExternalWith(gi, newTestBundle(t, "did:key:dave"), &ExternalJoinOptions{FetchTree: func([]byte) ([]byte, error) { return flipped, nil }}, tg.cfg); err == nil {
		t.Fatal("joined with a tampered tree")
	}
	if _, _, err := JoinExternalWith(gi, newTestBundle(t, "did:key:dave"), nil, tg.cfg); !errors.Is(err, ErrInvalidWelcome) {
		t.Fatalf("joined without a tree: %v", err)
	}
	g, commit, err := JoinExternalWith(gi, newTestBundle(t, "did:key:dave"), &ExternalJoinOptions{FetchTree: func(h []byte) ([]byte, error) {
		if !bytes.Equal(h, alice.TreeHash()) {
			t.Errorf("asked for %x", h)
		}
		return tree, nil
	}}, tg.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range tg.members {
		if _, err := m.Process(commit); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	tg.members["did:key:dave"] = g
	tg.check()
}
