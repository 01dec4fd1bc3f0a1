package mls

import (
	"errors"
	"math"
	"testing"
)

// resignBundle re-signs a bundle's leaf and KeyPackage after a test has
// changed them.
func resignBundle(t testing.TB, b *KeyPackageBundle) {
	t.Helper()
	sk, err := b.s.signKey(b.sigPriv)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.kp.signWithLeaf(sk); err != nil {
		t.Fatal(err)
	}
}

// TestNoMaxLeafLifetime checks the interop knob of Section 7.3: other
// implementations send KeyPackages whose lifetime is 0..2^63-1 by default.
// With the default maximum (365 days) they are refused; with
// NoMaxLeafLifetime the committer, the other members and the joiner all
// accept them.
func TestNoMaxLeafLifetime(t *testing.T) {
	forever := func(t *testing.T) *KeyPackageBundle {
		b := newTestBundle(t, "did:key:forever")
		b.kp.LeafNode.Lifetime = Lifetime{NotBefore: 0, NotAfter: math.MaxInt64}
		resignBundle(t, b)
		return b
	}

	t.Run("default refuses", func(t *testing.T) {
		tg := newTestGroup(t, "did:key:alice", nil)
		if _, err := tg.members["did:key:alice"].AddMembers(forever(t).Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
			t.Fatalf("AddMembers of a 0..2^63-1 lifetime with the default maximum: %v, want ErrInvalidLeafNode", err)
		}
	})

	t.Run("no maximum accepts", func(t *testing.T) {
		cfg := &Config{MaxLeafLifetime: NoMaxLeafLifetime}
		tg := newTestGroup(t, "did:key:alice", cfg)
		tg.add("did:key:alice", "did:key:bob")
		b := forever(t)
		res, err := tg.members["did:key:alice"].AddMembers(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		tg.fanOut("did:key:alice", res)
		g, err := Join(res.Welcome, b, nil, cfg)
		if err != nil {
			t.Fatalf("joining with a 0..2^63-1 lifetime: %v", err)
		}
		if g.Epoch() != tg.members["did:key:alice"].Epoch() {
			t.Fatal("joiner in another epoch")
		}
	})

	t.Run("not covering now", func(t *testing.T) {
		// No maximum still checks that the lifetime covers the current time.
		cfg := &Config{MaxLeafLifetime: NoMaxLeafLifetime}
		tg := newTestGroup(t, "did:key:alice", cfg)
		b := newTestBundle(t, "did:key:late")
		b.kp.LeafNode.Lifetime = Lifetime{NotBefore: math.MaxInt64 - 1, NotAfter: math.MaxInt64}
		resignBundle(t, b)
		if _, err := tg.members["did:key:alice"].AddMembers(b.Bytes()); !errors.Is(err, ErrInvalidLeafNode) {
			t.Fatalf("AddMembers of a future lifetime: %v, want ErrInvalidLeafNode", err)
		}
	})
}
