package seat_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

func personIdentity(t *testing.T, m *member) *seat.Identity {
	t.Helper()
	words, err := m.Phrase()
	if err != nil {
		t.Fatal(err)
	}
	p, err := seat.ParsePhrase(strings.Join(words, " "))
	if err != nil {
		t.Fatal(err)
	}
	return p.Seed().Identity()
}

// TestRoomDeviceIdentities: a leaf signed by a device key joins as the
// person who signed that key: shown as that person, with that person's
// role, and its messages show as the person's. A leaf that claims a
// person without the person's signature over its own key is refused by
// every member and changes nothing.
func TestRoomDeviceIdentities(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	carol := newMember(t, st, "carolco")
	bobID, carolID := personIdentity(t, bob), personIdentity(t, carol)
	cfg := seat.MLSConfig(alice.Seat)

	device := func() (ed25519.PublicKey, ed25519.PrivateKey) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return pub, priv
	}
	keyPackage := func(identity string, priv ed25519.PrivateKey) []byte {
		kp, err := mls.NewKeyPackage(seat.Suite, identity, priv.Seed(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return kp.Bytes()
	}

	// Hostile leaves, each refused with the room unchanged.
	pub, priv := device()
	otherPub, _ := device()
	sigOver := func(by *seat.Identity, key ed25519.PublicKey) string {
		id := seat.DeviceIdentity(by, key)
		return id[strings.Index(id, "#"):]
	}
	_, epoch, err := roomMembers(alice, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	for name, identity := range map[string]string{
		"carol's did, bob's signature":       carolID.DID() + sigOver(bobID, pub),
		"bob's signature over another key":   seat.DeviceIdentity(bobID, otherPub),
		"no signature":                       bobID.DID() + "#dev:z",
		"a signature cut short":              seat.DeviceIdentity(bobID, pub)[:len(seat.DeviceIdentity(bobID, pub))-2],
		"bob's did without a device mark":    bobID.DID(),
		"a second spelling of the signature": strings.Replace(seat.DeviceIdentity(bobID, pub), "#dev:z", "#dev:z1", 1),
	} {
		if _, err := seat.AddKeyPackage(alice.Seat, ctx, room, keyPackage(identity, priv)); err == nil {
			t.Errorf("%s: added", name)
		}
	}
	if _, got, err := roomMembers(alice, ctx, room); err != nil || got != epoch {
		t.Fatalf("after the refused adds: epoch %d (was %d) %v", got, epoch, err)
	}
	// The person's own key as a "device" has one identity only: its did.
	if _, err := seat.AddKeyPackage(alice.Seat, ctx, room, keyPackage(seat.DeviceIdentity(bobID, bobID.PublicKey()), bobID.PrivateKey())); err == nil {
		t.Error("a device identity for the person's own key: added")
	}

	// Bob's device, vouched for by bob.
	devID := seat.DeviceIdentity(bobID, pub)
	kp, err := mls.NewKeyPackage(seat.Suite, devID, priv.Seed(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	welcome, err := seat.AddKeyPackage(alice.Seat, ctx, room, kp.Bytes())
	if err != nil {
		t.Fatalf("bob's device: %v", err)
	}
	ms, _, err := roomMembers(alice, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	var leaves int
	for _, m := range ms {
		if m.Person == bob.did {
			leaves++
			if m.Role != seat.RoleMember {
				t.Errorf("bob's leaf %s has role %q", m.Identity, m.Role)
			}
		}
	}
	if leaves != 2 {
		t.Fatalf("bob has %d leaves: %+v", leaves, ms)
	}
	// The device speaks as bob.
	g, err := mls.Join(welcome, kp, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := seat.PublishToRoomGroup(bob.Seat, ctx, room, func(*mls.Group) ([]byte, error) { return g.Protect(append([]byte{0x01}, "from bob's phone"...), nil) }); err != nil {
		t.Fatal(err)
	}
	msgs, err := alice.Room(room).Sync(ctx)
	if err != nil || len(msgs) != 1 || msgs[0].Sender != bob.did || msgs[0].Text != "from bob's phone" {
		t.Fatalf("alice reads %+v %v", msgs, err)
	}
	// Removing bob removes every leaf of his.
	if err := removeFrom(alice, ctx, room, bob.did); err != nil {
		t.Fatal(err)
	}
	for _, m := range identities(t, alice, room) {
		if seat.PersonOf(m) == bob.did {
			t.Fatalf("bob's leaf %s is still in the room", m)
		}
	}
	if err := removeFrom(alice, ctx, room, bob.did); err == nil || errors.Is(err, seat.ErrRemoveOwner) {
		t.Fatalf("removing bob again: %v", err)
	}
}

func randomKey(t *testing.T) ed25519.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func randomSeed(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv.Seed()
}
