package seat_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale/seat"
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
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	alice.Close(context.Background())

	carol := newMember(t, st, "carolco")
	if ch, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil || ch != room {
		t.Fatalf("carol's join by the auto invite: %q %v", ch, err)
	}
	if got, want := identities(t, bob, room), dids(alice, bob, carol); !slices.Equal(got, want) {
		t.Fatalf("bob's roster: %v, want %v", got, want)
	}
	converse(t, room, carol, bob, "hello, I let myself in", "welcome, carol")

	dave := newMember(t, st, "daveco")
	if _, err := dave.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err == nil {
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

// TestRoomJoinAfterGroupInfoJam: a member puts a GroupInfo of epoch
// 2^63-1 at the directory, which would have refused every later one as
// stale, so nobody could join by an auto invite again. The directory
// keeps a GroupInfo only for the epoch the relay's fence has reached: the
// jam is refused, the owner's next commit shares its GroupInfo, and a
// newcomer joins with the owner away.
func TestRoomJoinAfterGroupInfoJam(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	mallory := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: bob.acct.APIKey}
	err := mallory.PutGroupInfo(ctx, room, math.MaxInt64, []byte("not a GroupInfo"))
	var ae *seat.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != "epoch_not_reached" {
		t.Fatalf("the far-epoch put: %v, want 409 epoch_not_reached", err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	alice.Close(context.Background())
	carol := newMember(t, st, "carolco")
	if ch, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil || ch != room {
		t.Fatalf("carol's join by the auto invite: %q %v", ch, err)
	}
	converse(t, room, carol, bob, "in despite the jam", "welcome, carol")
}
