package mls

import (
	"errors"
	"testing"
)

// The wire format of a Commit and whether its Welcome carries the ratchet
// tree are chosen per Commit, defaulting to the group's Config.

func wireFormatOf(t *testing.T, msg []byte) WireFormat {
	t.Helper()
	var m mlsMessage
	if err := unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	return m.WireFormat
}

func TestCommitWireFormat(t *testing.T) {
	for _, public := range []bool{false, true} {
		cfg := &Config{PublicHandshake: public}
		tg, alice, _ := twoMembers(t, cfg)
		def, other := WireFormatPrivateMessage, WireFormatPublicMessage
		if public {
			def, other = other, def
		}
		res, err := alice.SelfUpdate()
		if err != nil {
			t.Fatal(err)
		}
		if got := wireFormatOf(t, res.Commit); got != def {
			t.Fatalf("public=%v: default commit is %d", public, got)
		}
		tg.fanOut("did:key:alice", res)
		res, err = alice.Commit(CommitOptions{WireFormat: other})
		if err != nil {
			t.Fatal(err)
		}
		if got := wireFormatOf(t, res.Commit); got != other {
			t.Fatalf("public=%v: commit is %d, asked for %d", public, got, other)
		}
		tg.fanOut("did:key:alice", res)
		tg.check()
	}
	_, alice, _ := twoMembers(t, nil)
	if _, err := alice.Commit(CommitOptions{WireFormat: WireFormatWelcome}); err == nil || alice.HasPendingCommit() {
		t.Fatalf("commit as a welcome: %v", err)
	}
}

func TestCommitTreeDelivery(t *testing.T) {
	for _, oob := range []bool{false, true} {
		cfg := &Config{OutOfBandTree: oob}
		for _, tree := range []TreeDelivery{TreeDefault, TreeInBand, TreeOutOfBand} {
			tg, alice, _ := twoMembers(t, cfg)
			carol := newTestBundle(t, "did:key:carol")
			res, err := alice.Commit(CommitOptions{Add: [][]byte{carol.Bytes()}, Tree: tree})
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut("did:key:alice", res)
			inBand := tree == TreeInBand || (tree == TreeDefault && !oob)
			g, err := Join(res.Welcome, carol, nil, cfg)
			if inBand != (err == nil) {
				t.Fatalf("oob=%v tree=%d: join without a tree: %v", oob, tree, err)
			}
			if !inBand {
				if !errors.Is(err, ErrInvalidWelcome) {
					t.Fatalf("got %v", err)
				}
				if g, err = Join(res.Welcome, carol, &JoinOptions{RatchetTree: alice.RatchetTree()}, cfg); err != nil {
					t.Fatal(err)
				}
			}
			tg.members["did:key:carol"] = g
			tg.check()
		}
	}
}
