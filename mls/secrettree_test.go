package mls

import (
	"bytes"
	"errors"
	"testing"
)

func testSecretTree(t *testing.T, nLeaves uint32, limits secretTreeLimits) *secretTree {
	t.Helper()
	s, err := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := newSecretTree(s, bytes.Repeat([]byte{7}, s.hashLen()), nLeaves, limits)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func TestSecretTreeSizes(t *testing.T) {
	s, _ := suiteFor(MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519)
	for _, n := range []uint32{0, 3, 10000, 1<<31 + 1} {
		if _, err := newSecretTree(s, make([]byte, 32), n, secretTreeLimits{}); err == nil {
			t.Errorf("size %d accepted", n)
		}
	}
	if _, err := newSecretTree(s, make([]byte, 16), 4, secretTreeLimits{}); err == nil {
		t.Error("short encryption secret accepted")
	}
}

// TestSecretTreeLazyAndDeletion checks that only the path to a used leaf is
// derived, that consumed node secrets are deleted (§9.2), and that the
// number of secrets held stays logarithmic in the group size.
func TestSecretTreeLazyAndDeletion(t *testing.T) {
	tree := testSecretTree(t, 16384, secretTreeLimits{})
	if len(tree.nodes) != 1 {
		t.Fatalf("fresh tree holds %d node secrets, want 1", len(tree.nodes))
	}
	if _, err := tree.nextSendKey(9999, applicationRatchet); err != nil {
		t.Fatal(err)
	}
	// Deriving down 14 levels leaves one sibling secret per level.
	if got := len(tree.nodes); got != 14 {
		t.Errorf("after one leaf: %d node secrets held, want 14", got)
	}
	if _, ok := tree.nodes[root(16384)]; ok {
		t.Error("root secret (encryption_secret) still held")
	}
	if _, ok := tree.nodes[leafIndex(9999).node()]; ok {
		t.Error("leaf secret still held after its ratchets were derived")
	}
	// The sibling leaf is the cheapest next one: its secret is held.
	if _, err := tree.nextSendKey(9998, handshakeRatchet); err != nil {
		t.Fatal(err)
	}
	if got := len(tree.nodes); got != 13 {
		t.Errorf("after sibling leaf: %d node secrets held, want 13", got)
	}
	if _, err := tree.nextSendKey(16384, handshakeRatchet); !errors.Is(err, errLeafOutOfRange) {
		t.Errorf("leaf out of range: got %v", err)
	}
}

func TestSecretTreeSendAndReceive(t *testing.T) {
	sender := testSecretTree(t, 4, secretTreeLimits{})
	receiver := testSecretTree(t, 4, secretTreeLimits{})
	var sent []ratchetKey
	for i := 0; i < 5; i++ {
		k, err := sender.nextSendKey(2, applicationRatchet)
		if err != nil {
			t.Fatal(err)
		}
		if k.generation != uint32(i) {
			t.Fatalf("generation %d, want %d", k.generation, i)
		}
		sent = append(sent, ratchetKey{k.generation, bytes.Clone(k.key), bytes.Clone(k.nonce)})
	}
	// Receive out of order: 3, 0, 4, then 0 again (a replay).
	for _, g := range []uint32{3, 0, 4} {
		k, pending, err := receiver.receiveKey(2, applicationRatchet, g)
		if err != nil {
			t.Fatalf("generation %d: %v", g, err)
		}
		if !bytes.Equal(k.key, sent[g].key) || !bytes.Equal(k.nonce, sent[g].nonce) {
			t.Fatalf("generation %d: key mismatch", g)
		}
		pending.commit()
	}
	if _, _, err := receiver.receiveKey(2, applicationRatchet, 0); !errors.Is(err, errGenerationConsumed) {
		t.Errorf("replayed generation: got %v", err)
	}
	r, _ := receiver.ratchet(2, applicationRatchet)
	if len(r.skipped) != 2 { // generations 1 and 2
		t.Errorf("%d skipped keys kept, want 2", len(r.skipped))
	}
	// Handshake and application ratchets are independent.
	hk, _, err := receiver.receiveKey(2, handshakeRatchet, 0)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(hk.key, sent[0].key) {
		t.Error("handshake and application keys coincide")
	}
}

// TestSecretTreeUncommittedLookup checks that a lookup that is not committed
// (the message failed to decrypt) changes nothing.
func TestSecretTreeUncommittedLookup(t *testing.T) {
	tree := testSecretTree(t, 2, secretTreeLimits{})
	if _, _, err := tree.receiveKey(1, applicationRatchet, 500); err != nil {
		t.Fatal(err)
	}
	r, _ := tree.ratchet(1, applicationRatchet)
	if r.gen != 0 || len(r.skipped) != 0 {
		t.Fatalf("uncommitted lookup moved the ratchet to %d with %d skipped", r.gen, len(r.skipped))
	}
	k, pending, err := tree.receiveKey(1, applicationRatchet, 0)
	if err != nil || k.generation != 0 {
		t.Fatal(err)
	}
	pending.commit()
	if r.gen != 1 {
		t.Fatalf("ratchet at %d after committing generation 0", r.gen)
	}
}

func TestSecretTreeLimits(t *testing.T) {
	tree := testSecretTree(t, 2, secretTreeLimits{MaxForwardSkip: 10, MaxRetainedKeys: 3})
	if _, _, err := tree.receiveKey(0, applicationRatchet, 11); !errors.Is(err, errGenerationTooFar) {
		t.Fatalf("skip of 11: got %v", err)
	}
	_, pending, err := tree.receiveKey(0, applicationRatchet, 10)
	if err != nil {
		t.Fatal(err)
	}
	pending.commit()
	r, _ := tree.ratchet(0, applicationRatchet)
	if len(r.skipped) != 3 || len(r.order) != 3 {
		t.Fatalf("%d skipped keys kept, want 3", len(r.skipped))
	}
	// Only the newest skipped generations (7, 8, 9) are kept.
	for g := uint32(0); g < 10; g++ {
		_, _, err := tree.receiveKey(0, applicationRatchet, g)
		if (g >= 7) != (err == nil) {
			t.Errorf("generation %d: got %v", g, err)
		}
	}
	_, pending, err = tree.receiveKey(0, applicationRatchet, 8)
	if err != nil {
		t.Fatal(err)
	}
	pending.commit()
	if _, ok := r.skipped[8]; ok || len(r.order) != 2 {
		t.Error("used skipped key not deleted")
	}
	// The window is relative to the ratchet's position: it moves on.
	if _, _, err := tree.receiveKey(0, applicationRatchet, 21); err != nil {
		t.Errorf("skip of 10 from generation 11: %v", err)
	}
}

func TestSecretTreeRatchetExhaustion(t *testing.T) {
	tree := testSecretTree(t, 1, secretTreeLimits{})
	r, _ := tree.ratchet(0, handshakeRatchet)
	r.gen = 1<<32 - 1
	k, err := tree.nextSendKey(0, handshakeRatchet)
	if err != nil || k.generation != 1<<32-1 {
		t.Fatalf("last generation: %v", err)
	}
	if _, err := tree.nextSendKey(0, handshakeRatchet); !errors.Is(err, errRatchetExhausted) {
		t.Fatalf("after the last generation: got %v", err)
	}
	if _, _, err := tree.receiveKey(0, handshakeRatchet, 5); !errors.Is(err, errGenerationConsumed) {
		t.Fatalf("receive on exhausted ratchet: got %v", err)
	}
}

// TestSecretTreeWipes checks that consumed secrets are overwritten, not
// just dropped (§9.2): tree node secrets once their children exist, and
// ratchet secrets once the ratchet has moved past them.
func TestSecretTreeWipes(t *testing.T) {
	tree := testSecretTree(t, 4, secretTreeLimits{})
	rootSecret := tree.nodes[root(4)]
	if _, err := tree.nextSendKey(3, applicationRatchet); err != nil {
		t.Fatal(err)
	}
	zero := func(b []byte) bool { return bytes.Equal(b, make([]byte, len(b))) }
	if !zero(rootSecret) {
		t.Error("root secret not wiped")
	}
	r, _ := tree.ratchet(3, applicationRatchet)
	old := r.secret
	if _, err := tree.nextSendKey(3, applicationRatchet); err != nil {
		t.Fatal(err)
	}
	if !zero(old) || zero(r.secret) {
		t.Error("ratchet secret not wiped when the ratchet moved on")
	}
	// Receiving: a skipped key is wiped when used.
	_, pending, err := tree.receiveKey(2, handshakeRatchet, 3)
	if err != nil {
		t.Fatal(err)
	}
	pending.commit()
	h, _ := tree.ratchet(2, handshakeRatchet)
	kept := h.skipped[1]
	_, pending, err = tree.receiveKey(2, handshakeRatchet, 1)
	if err != nil {
		t.Fatal(err)
	}
	pending.commit()
	if !zero(kept.key) || !zero(kept.nonce) {
		t.Error("used skipped key not wiped")
	}
}
