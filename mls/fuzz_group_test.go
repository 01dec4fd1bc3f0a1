package mls

import (
	"bytes"
	"testing"
)

// fuzzGroup builds a three-member group and returns bob's saved state and
// some genuine messages for bob to use as seeds.
func fuzzGroup(t testing.TB, cs CipherSuite, public bool) (state []byte, seeds [][]byte) {
	tg := newSuiteTestGroup(t, cs, "did:key:alice", &Config{PublicHandshake: public})
	tg.add("did:key:alice", "did:key:bob")
	tg.add("did:key:alice", "did:key:carol")
	alice, bob := tg.members["did:key:alice"], tg.members["did:key:bob"]
	app, err := alice.Protect([]byte("hello"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	prop, err := tg.members["did:key:carol"].ProposeUpdate()
	if err != nil {
		t.Fatal(err)
	}
	commit, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	state, err = bob.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return state, [][]byte{app, prop, commit.Commit}
}

// FuzzGroupProcess feeds arbitrary bytes to message processing on a live
// group state: it must never panic, and a rejected message must leave the
// state unchanged.
func FuzzGroupProcess(f *testing.F) { fuzzGroupProcess(f, testSuite) }

// FuzzXWingGroupProcess is FuzzGroupProcess on a group of the X-Wing
// suite, whose keys and kem_outputs have their own checks.
func FuzzXWingGroupProcess(f *testing.F) { fuzzGroupProcess(f, xwing) }

func fuzzGroupProcess(f *testing.F, cs CipherSuite) {
	var states [][]byte
	for _, public := range []bool{false, true} {
		st, seeds := fuzzGroup(f, cs, public)
		states = append(states, st)
		for _, s := range seeds {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, st := range states {
			g, err := RestoreGroup(st, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.Process(data); err != nil {
				after, _ := g.MarshalBinary()
				if !bytes.Equal(after, st) {
					t.Fatalf("rejected message changed the state: %v", err)
				}
			}
		}
	})
}

// FuzzJoin feeds arbitrary bytes to Join as a Welcome.
func FuzzJoin(f *testing.F) {
	tg := newTestGroup(f, "did:key:alice", nil)
	bob := newTestBundle(f, "did:key:bob")
	res, err := tg.members["did:key:alice"].AddMembers(bob.Bytes())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(res.Welcome)
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Join(data, bob, nil, nil)
	})
}
