package seat_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// secondDevice restores m's phrase in a new home and signs it in by a
// device grant m approves.
func secondDevice(t *testing.T, st *skytaletest.Stack, m *member) (*member, seat.DeviceApproval, seat.DeviceResult) {
	t.Helper()
	words, err := m.Phrase()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	d := openSeat(t, st, home)
	did, err := d.Recover(context.Background(), strings.Join(words, " "))
	if err != nil || did != m.did {
		t.Fatalf("recover: %q %v", did, err)
	}
	a, r := approveFrom(t, m.Seat, d)
	return &member{Seat: d, did: did, acct: m.acct, home: home}, a, r
}

func leavesOfPerson(t *testing.T, viewer *member, room, did string) []string {
	t.Helper()
	ms, _, err := roomMembers(viewer, context.Background(), room)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.Person == did {
			out = append(out, m.Identity)
		}
	}
	return out
}

// TestEveryDeviceInEveryRoom: a person's second device, approved from the
// first, is in all three of the person's rooms once the first device (or
// the room's owner) saw its offers, with a leaf of its own shown as the
// person; it reads and sends in each. An offer for someone who is not in
// the room, or for a device the person did not vouch for, brings nobody
// in. A revoked device is out of every room and reads nothing sent after.
func TestEveryDeviceInEveryRoom(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, own := roomOfTwo(t, st, "ops")
	pq, err := alice.Room("pq").Create(ctx, &seat.RoomOptions{Suite: seat.SuitePQ})
	if err != nil {
		t.Fatal(err)
	}
	join(t, alice, bob, pq)
	// A room bob owns, where alice is a plain member.
	theirs, err := bob.Room("bobs").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	join(t, bob, alice, theirs)
	rooms := []string{own, pq, theirs}

	phone, approval, res := secondDevice(t, st, alice)
	if approval.Rooms != 3 || approval.RoomsLeft != 0 || res.OfferErr != nil || len(res.Offered) != 3 {
		t.Fatalf("approval %+v, result %+v", approval, res)
	}
	if joined, err := phone.JoinDeviceRooms(ctx); err != nil || len(joined) != 0 {
		t.Fatalf("joined before anyone added the device: %v %v", joined, err)
	}
	// Alice's first device adds it in her rooms and in bob's, as a
	// device of hers; bob adds it in his own room if he sees it first.
	for _, room := range rooms {
		if got := leavesOfPerson(t, alice, room, alice.did); len(got) != 2 {
			t.Fatalf("alice's leaves in %s: %v", room, got)
		}
	}
	joined, err := phone.JoinDeviceRooms(ctx)
	slices.Sort(joined)
	want := slices.Clone(rooms)
	slices.Sort(want)
	if err != nil || !slices.Equal(joined, want) {
		t.Fatalf("the phone joined %v (%v), want %v", joined, err, want)
	}
	for _, room := range rooms {
		sendTo(t, phone, room, "from the phone in "+room)
		msgs, err := bob.Room(room).Sync(ctx)
		if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Sender != alice.did || msgs[len(msgs)-1].Text != "from the phone in "+room {
			t.Fatalf("bob reads in %s: %+v %v", room, msgs, err)
		}
		sendTo(t, bob, room, "to both of alice's devices")
		expect(t, "alice's phone", received(t, phone, room), "to both of alice's devices")
		if got, _ := alice.Room(room).Suite(ctx); got == 0 {
			t.Fatal("no suite")
		}
		if a, p := roleOf(t, bob, room, alice.did), roleOf(t, bob, room, leavesOfPerson(t, bob, room, alice.did)[1]); a != p {
			t.Fatalf("alice's devices have roles %q and %q in %s", a, p, room)
		}
	}
	devs, err := alice.Devices(ctx)
	if err != nil || len(devs) != 2 || devs[0].This == devs[1].This || len(devs[0].Rooms) != 3 || len(devs[1].Rooms) != 3 {
		t.Fatalf("alice's devices: %+v %v", devs, err)
	}

	// Offers that bring nobody in: carol's device (carol is not in the
	// room) and a device alice never vouched for.
	carol := newMember(t, st, "carolco")
	carolID := personIdentity(t, carol)
	bobID := personIdentity(t, bob)
	before := identities(t, alice, own)
	for name, identity := range map[string]string{
		"carol's device":                    seat.DeviceIdentity(carolID, randomKey(t)),
		"a device bob vouches for as alice": alice.did + seat.DeviceIdentity(bobID, randomKey(t))[len(bob.did):],
	} {
		kp, err := mls.NewKeyPackage(seat.Suite, identity, randomSeed(t), seat.MLSConfig(bob.Seat))
		if err != nil {
			t.Fatal(err)
		}
		if err := seat.PublishToRoomGroup(bob.Seat, ctx, own, func(*mls.Group) ([]byte, error) {
			return append([]byte("SKD1"), kp.Bytes()...), nil
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := identities(t, alice, own); !slices.Equal(got, before) {
		t.Fatalf("the roster after the hostile offers: %v, was %v", got, before)
	}

	// Revoking the phone takes it out of every room.
	var phoneID string
	for _, d := range devs {
		if !d.This {
			phoneID = d.ID
		}
	}
	out, err := alice.RevokeDevice(ctx, phoneID)
	if err != nil || len(out) != 3 {
		t.Fatalf("revoke: %v %v", out, err)
	}
	for _, room := range rooms {
		if got := leavesOfPerson(t, bob, room, alice.did); len(got) != 1 {
			t.Fatalf("alice's leaves in %s after the revocation: %v", room, got)
		}
		sendTo(t, bob, room, "after the revocation")
		msgs, err := phone.Room(room).Sync(ctx)
		for _, m := range msgs {
			if m.Text == "after the revocation" {
				t.Fatalf("the revoked phone read %q in %s", m.Text, room)
			}
		}
		if err != nil && !errors.Is(err, seat.ErrNotMember) {
			t.Fatal(err)
		}
	}
	if _, err := alice.RevokeDevice(ctx, phoneID); !errors.Is(err, seat.ErrNoDevice) {
		t.Fatalf("revoking again: %v", err)
	}
}
