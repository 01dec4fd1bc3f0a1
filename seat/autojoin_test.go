package seat_test

import (
	"context"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestRoomJoinWithoutOwner: with the owner's seat closed for the whole
// join, a newcomer joins by an invite that admits on its own, by external
// Commit, and every member accepts it; the newcomer reads and sends at
// once. The invite's uses are the directory's to count: a second use of a
// one-use invite is refused.
func TestRoomJoinWithoutOwner(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	tok, err := alice.RoomInviteAuto(ctx, room, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	alice.Close()

	carol := newMember(t, st, "carolco")
	if ch, err := carol.RoomJoin(ctx, room, tok, 0); err != nil || ch != room {
		t.Fatalf("carol's join by the auto invite: %q %v", ch, err)
	}
	if got, want := identities(t, bob, room), dids(alice, bob, carol); !slices.Equal(got, want) {
		t.Fatalf("bob's roster: %v, want %v", got, want)
	}
	converse(t, room, carol, bob, "hello, I let myself in", "welcome, carol")

	dave := newMember(t, st, "daveco")
	if _, err := dave.RoomJoin(ctx, room, tok, 0); err == nil {
		t.Fatal("a second use of a one-use invite")
	}
	if got, want := identities(t, bob, room), dids(alice, bob, carol); !slices.Equal(got, want) {
		t.Fatalf("bob's roster after the refused use: %v, want %v", got, want)
	}

	// The owner comes back and sees the newcomer too.
	again := &member{Seat: openSeat(t, st, alice.home), did: alice.did, acct: alice.acct, home: alice.home}
	if got, want := identities(t, again, room), dids(alice, bob, carol); !slices.Equal(got, want) {
		t.Fatalf("alice's roster: %v, want %v", got, want)
	}
}
