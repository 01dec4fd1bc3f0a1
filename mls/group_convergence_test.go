package mls

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestConvergence drives a group through a seeded random sequence of adds,
// updates (by commit and by proposal), and removes, and checks after every
// step that all members agree on the epoch, the epoch authenticator and an
// exporter value, that every member's message decrypts for every other
// member, and that removed members cannot read new messages.
func TestConvergence(t *testing.T) {
	ops := 300
	if testing.Short() {
		ops = 40
	}
	rng := rand.New(rand.NewPCG(20261129, 4))
	tg := newTestGroup(t, "did:key:owner", &Config{MaxPastEpochs: 2})
	next := 0
	newName := func() string {
		next++
		return fmt.Sprintf("did:key:m%d", next)
	}
	for range 10 {
		tg.add("did:key:owner", newName())
		tg.check()
	}
	names := func() []string {
		var out []string
		for n := range tg.members {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	pick := func() string {
		ns := names()
		return ns[rng.IntN(len(ns))]
	}
	for i := range ops {
		committer := pick()
		// Every member's state survives a save and restore.
		saved, err := tg.members[committer].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		g, err := RestoreGroup(saved, tg.cfg)
		if err != nil {
			t.Fatal(err)
		}
		tg.members[committer] = g
		var op string
		switch r := rng.IntN(10); {
		case r < 3 || len(tg.members) < 3: // add
			op = "add"
			tg.add(committer, newName())
		case r < 6: // self update
			op = "update"
			res, err := g.SelfUpdate()
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut(committer, res)
		case r < 8: // remove
			victim := committer
			for victim == committer {
				victim = pick()
			}
			op = "remove " + victim
			m, _ := g.MemberByIdentity(victim)
			res, err := g.RemoveMembers(m.LeafIndex)
			if err != nil {
				t.Fatal(err)
			}
			gone := tg.members[victim]
			tg.fanOut(committer, res)
			if gone.Active() {
				t.Fatalf("step %d: %s still active after removal", i, victim)
			}
			msg, err := g.Protect([]byte("after removal"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gone.Process(msg); err == nil {
				t.Fatalf("step %d: removed %s decrypted a new message", i, victim)
			}
		default: // update proposal by one member, committed by another
			proposer := committer
			for proposer == committer {
				proposer = pick()
			}
			op = "proposal from " + proposer
			prop, err := tg.members[proposer].ProposeUpdate()
			if err != nil {
				t.Fatal(err)
			}
			for name, m := range tg.members {
				if name == proposer {
					continue
				}
				if _, err := m.Process(prop); err != nil {
					t.Fatalf("step %d: %s processing proposal: %v", i, name, err)
				}
			}
			res, err := g.Commit(CommitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tg.fanOut(committer, res)
		}
		if testing.Verbose() && i%50 == 0 {
			t.Logf("step %d: %s by %s, %d members, epoch %d", i, op, committer, len(tg.members), g.Epoch())
		}
		tg.check()
	}
}
