package mls

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"testing"
)

// stateCorpus returns saved states of small real groups, covering every
// part of the format: a lone member; members with skipped keys, past
// epochs, resumption PSKs and a cached proposal; a member with a pending
// commit; a removed member; and a P-256 group. The states come with one
// application message each member can read, so that tests can drive a
// restored state.
func stateCorpus(t testing.TB) (states [][]byte, msgs [][]byte) {
	t.Helper()
	save := func(g *Group, msg []byte) {
		st, err := g.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
		msgs = append(msgs, msg)
	}
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	lone, err := NewGroup([]byte("lone"), newTestBundle(t, "did:key:lone"), nil)
	if err != nil {
		t.Fatal(err)
	}
	save(lone, nil)

	tg := newTestGroup(t, "did:key:alice", nil)
	tg.add("did:key:alice", "did:key:bob")
	tg.add("did:key:alice", "did:key:carol")
	alice, bob, carol := tg.members["did:key:alice"], tg.members["did:key:bob"], tg.members["did:key:carol"]
	late := must(alice.Protect([]byte("late"), nil))
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	m1 := must(alice.Protect([]byte("1"), nil))
	m2 := must(alice.Protect([]byte("2"), nil))
	if _, err := bob.Process(m2); err != nil {
		t.Fatal(err)
	}
	prop := must(carol.ProposeUpdate())
	if _, err := bob.Process(prop); err != nil {
		t.Fatal(err)
	}
	save(bob, m1)     // a skipped key, a past epoch, a cached proposal
	save(carol, late) // an Update proposal with its private key
	if _, err := alice.Process(prop); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Commit(CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	save(alice, late) // a pending commit
	alice.DiscardCommit()
	res, err = alice.RemoveMembers(carol.LeafIndex())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Process(res.Commit); err != nil {
		t.Fatal(err)
	}
	save(carol, late) // removed

	const cs = MLS_128_DHKEMP256_AES128GCM_SHA256_P256
	sk, err := GenerateSignatureKey(cs)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := NewKeyPackage(cs, "did:key:p256", sk, nil)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := NewGroup([]byte("p256"), kp, nil)
	if err != nil {
		t.Fatal(err)
	}
	save(p256, nil)
	return states, msgs
}

// resealState recomputes the checksum of a version 2 state after a test
// changed it, as the author of a hostile state file would, so that the
// field checks behind the checksum are tested. Other inputs are returned
// unchanged.
func resealState(st []byte) []byte {
	if len(st) < 5 || st[0] != stateVersion {
		return st
	}
	b := bytes.Clone(st)
	n := len(b) - 4
	binary.BigEndian.PutUint32(b[n:], crc32.Checksum(b[:n], stateCRC))
	return b
}

// exercise drives a restored group through the operations a member
// would run next. Errors are fine; panics are not (the caller's recover
// reports them).
func exercise(g *Group, msg []byte) {
	g.Members()
	g.Epoch()
	_, _ = g.Export("e", nil, 16)
	_, _ = g.MarshalBinary()
	if msg != nil {
		_, _ = g.Process(msg)
	}
	_, _ = g.Protect([]byte("x"), nil)
	_, _ = g.ProposeUpdate()
	if res, err := g.Commit(CommitOptions{}); err == nil && res != nil {
		_ = g.ConfirmCommit()
	}
	_, _ = g.GroupInfo()
	_, _ = g.MarshalBinary()
}

// restoreAndExercise restores data and, when that succeeds, exercises the
// group. It returns an error for a panic.
func restoreAndExercise(data, msg []byte) (restored bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	g, rerr := RestoreGroup(data, nil)
	if rerr != nil {
		return false, nil
	}
	exercise(g, msg)
	return true, nil
}

// TestRestoreOwnLeafOutOfRange: a state whose own leaf index lies outside
// the tree is refused. Before, it restored and ProposeUpdate panicked.
func TestRestoreOwnLeafOutOfRange(t *testing.T) {
	_, alice, _ := twoMembers(t, nil)
	st := fingerprint(t, alice)
	// version (1 byte), cipher suite (2), own leaf index (4).
	for _, own := range []uint32{2, 1000, 1 << 31} {
		bad := bytes.Clone(st)
		bad[3], bad[4], bad[5], bad[6] = byte(own>>24), byte(own>>16), byte(own>>8), byte(own)
		bad = resealState(bad)
		if _, err := restoreAndExercise(bad, nil); err != nil {
			t.Fatalf("own leaf %d: %v", own, err)
		}
		if _, err := RestoreGroup(bad, nil); err == nil {
			t.Errorf("own leaf %d of a 2-leaf tree restored", own)
		}
	}
}

// TestRestoreBadKeyLengths: a retained ratchet key or nonce of the wrong
// length, or a secret of the wrong length, is refused. Before, an empty
// nonce restored and the late message for it panicked Process.
func TestRestoreBadKeyLengths(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	_ = tg
	m1, err := alice.Protect([]byte("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := alice.Protect([]byte("2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(m2); err != nil {
		t.Fatal(err)
	}
	r := &bob.cur.prot.tree.leaves[alice.LeafIndex()].application
	if len(r.order) != 1 {
		t.Fatalf("%d skipped keys, want 1", len(r.order))
	}
	good := fingerprint(t, bob)
	k := r.skipped[r.order[0]]
	cases := map[string]func(){
		"empty nonce":   func() { k2 := k; k2.nonce = nil; r.skipped[k.generation] = k2 },
		"short nonce":   func() { k2 := k; k2.nonce = k.nonce[:3]; r.skipped[k.generation] = k2 },
		"long key":      func() { k2 := k; k2.key = append(bytes.Clone(k.key), 0); r.skipped[k.generation] = k2 },
		"short secret":  func() { r.secret = r.secret[:5] },
		"sender data":   func() { bob.cur.prot.senderDataSecret = []byte{1} },
		"signature key": func() { bob.sigPriv = bob.sigPriv[:16] },
		"encryption key": func() {
			bob.priv.keys[bob.own.node()] = hpkeKeyPair{priv: []byte{1}, pub: bob.priv.keys[bob.own.node()].pub}
		},
	}
	for name, corrupt := range cases {
		t.Run(name, func(t *testing.T) {
			g, err := RestoreGroup(good, nil)
			if err != nil {
				t.Fatal(err)
			}
			bob = g
			r = &bob.cur.prot.tree.leaves[alice.LeafIndex()].application
			corrupt()
			bad := fingerprint(t, bob)
			if _, err := restoreAndExercise(bad, m1); err != nil {
				t.Fatal(err)
			}
			if _, err := RestoreGroup(bad, nil); err == nil {
				t.Error("restored")
			}
		})
	}
}

// TestRestoreHugeSecretTreeWidth: a secret tree whose width field claims
// billions of leaves is refused without a large allocation. Before, a past
// epoch with such a width made RestoreGroup allocate hundreds of MB.
func TestRestoreHugeSecretTreeWidth(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	if len(bob.past) != 1 {
		t.Fatalf("%d past epochs", len(bob.past))
	}
	for _, width := range []uint32{1 << 31, 1 << 24, 1 << 19} {
		for _, where := range []string{"past", "current"} {
			t.Run(fmt.Sprintf("%s/%d", where, width), func(t *testing.T) {
				g, err := RestoreGroup(fingerprint(t, bob), nil)
				if err != nil {
					t.Fatal(err)
				}
				e := g.cur
				if where == "past" {
					e = g.past[0]
				}
				e.prot.tree.nLeaves = width
				bad := fingerprint(t, g)
				if _, err := RestoreGroup(bad, nil); err == nil {
					t.Fatal("restored")
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				_, _ = RestoreGroup(bad, nil)
				runtime.ReadMemStats(&after)
				if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
					t.Fatalf("restoring a %d-byte state allocated %d bytes", len(bad), n)
				}
			})
		}
	}
}

// TestRestoreAllocations bounds what restoring a small state allocates,
// valid or not.
func TestRestoreAllocations(t *testing.T) {
	states, _ := stateCorpus(t)
	for i, st := range states {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := RestoreGroup(st, nil); err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64*uint64(len(st))+64<<10 {
			t.Errorf("state %d: restoring %d bytes allocated %d", i, len(st), n)
		}
	}
}

// TestRestoreRandomCorruption corrupts real saved states at random (a
// fixed seed): no corrupted state may panic RestoreGroup or any operation
// on a state that restores. As written, every corruption fails the
// checksum. With the checksum recomputed (a hostile file), the field
// checks refuse most; those that restore changed bytes no cheap check can
// judge (a secret, a key or a signature of the right length, a credential,
// an epoch number), which makes later operations fail, not panic.
func TestRestoreRandomCorruption(t *testing.T) {
	states, msgs := stateCorpus(t)
	n := 4000
	if testing.Short() {
		n = 1000
	}
	rng := rand.New(rand.NewPCG(9, 9))
	restored, resealed := 0, 0
	for i := range n {
		k := rng.IntN(len(states))
		bad := corrupt(rng, states[k])
		if bytes.Equal(bad, states[k]) {
			continue
		}
		ok, err := restoreAndExercise(bad, msgs[k])
		if err != nil {
			t.Fatalf("corruption %d of state %d: %v", i, k, err)
		}
		if ok {
			restored++
		}
		ok, err = restoreAndExercise(resealState(bad), msgs[k])
		if err != nil {
			t.Fatalf("corruption %d of state %d, checksum recomputed: %v", i, k, err)
		}
		if ok {
			resealed++
		}
	}
	if restored != 0 {
		t.Errorf("%d of %d corrupted states passed the checksum", restored, n)
	}
	t.Logf("%d of %d corrupted states restored; %d with the checksum recomputed", restored, n, resealed)
}

// corrupt returns a copy of st with one random change: a flipped bit, a
// replaced byte, a truncation, an inserted or deleted byte, or a 4-byte
// field set to an extreme value.
func corrupt(rng *rand.Rand, st []byte) []byte {
	b := bytes.Clone(st)
	i := rng.IntN(len(b))
	switch rng.IntN(6) {
	case 0:
		b[i] ^= 1 << rng.IntN(8)
	case 1:
		b[i] = byte(rng.IntN(256))
	case 2:
		b = b[:i]
	case 3:
		b = append(b[:i], append([]byte{byte(rng.IntN(256))}, b[i:]...)...)
	case 4:
		b = append(b[:i], b[i+1:]...)
	case 5:
		if i+4 <= len(b) {
			v := []uint32{0, 1, 1 << 31, 0xffffffff}[rng.IntN(4)]
			b[i], b[i+1], b[i+2], b[i+3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		}
	}
	return b
}

// TestRestoreSecretTreeFrontier: the secret tree of a restored state must
// hold its secrets as the lazy derivation leaves them (Section 9: a node
// secret is deleted once its children are derived). A state holding a
// node secret next to one of its descendants, or next to a reached leaf
// below it, is refused.
func TestRestoreSecretTreeFrontier(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	tg.add("did:key:alice", "did:key:carol")
	msg, err := alice.Protect([]byte("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(msg); err != nil {
		t.Fatal(err)
	}
	good := fingerprint(t, bob)
	for name, corrupt := range map[string]func(st *secretTree){
		"root held again":     func(st *secretTree) { st.nodes[root(st.nLeaves)] = make([]byte, 32) },
		"reached leaf's node": func(st *secretTree) { st.nodes[leafIndex(alice.LeafIndex()).node()] = make([]byte, 32) },
	} {
		t.Run(name, func(t *testing.T) {
			g, err := RestoreGroup(good, nil)
			if err != nil {
				t.Fatal(err)
			}
			corrupt(g.cur.prot.tree)
			if _, err := RestoreGroup(fingerprint(t, g), nil); err == nil {
				t.Fatal("restored")
			}
		})
	}
}

// TestRestoreVersion1: a state written before the checksum (version 1)
// still restores, and is written back as version 2.
func TestRestoreVersion1(t *testing.T) {
	states, _ := stateCorpus(t)
	for i, st := range states {
		v1 := bytes.Clone(st[:len(st)-4])
		v1[0] = stateVersionV1
		g, err := RestoreGroup(v1, nil)
		if err != nil {
			t.Fatalf("state %d as version 1: %v", i, err)
		}
		if got := fingerprint(t, g); !bytes.Equal(got, st) {
			t.Fatalf("state %d: a version 1 state is not written back as the same version 2 state", i)
		}
	}
}

// TestRestorePastHandshakeRatchet: a version 2 state whose past epoch
// holds a handshake ratchet is refused; past epochs keep only application
// keys.
func TestRestorePastHandshakeRatchet(t *testing.T) {
	tg, alice, bob := twoMembers(t, nil)
	msg, err := alice.Protect([]byte("1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Process(msg); err != nil {
		t.Fatal(err)
	}
	res, err := alice.SelfUpdate()
	if err != nil {
		t.Fatal(err)
	}
	tg.fanOut("did:key:alice", res)
	lr := bob.past[len(bob.past)-1].prot.tree.leaves[alice.LeafIndex()]
	if lr == nil {
		t.Fatal("setup: no ratchets for alice in the past epoch")
	}
	lr.handshake.secret = bytes.Repeat([]byte{1}, 32)
	if _, err := RestoreGroup(fingerprint(t, bob), nil); err == nil {
		t.Fatal("restored a past epoch with a handshake ratchet")
	}
}
