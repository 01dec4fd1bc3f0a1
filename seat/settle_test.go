package seat_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

func identities(t *testing.T, m *member, room string) []string {
	t.Helper()
	ms, _, err := roomMembers(m, context.Background(), room)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range ms {
		out = append(out, x.Identity)
	}
	slices.Sort(out)
	return out
}

func dids(ms ...*member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.did)
	}
	slices.Sort(out)
	return out
}

// TestRoomLeaveIsCommitted: `room leave` proposes the leaver's own
// removal. With no owner or admin online, the next member to send
// commits it first; an owner who sees a pending leave commits it at
// once. Either way the leaver's leaf is gone and its account is no longer
// a member of the channel.
func TestRoomLeaveIsCommitted(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, carol, room := roomOfThree(t, st, "ops")

	if err := carol.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := memberAccounts(t, st, alice, room), sorted(alice.acct.AccountID, bob.acct.AccountID); !slices.Equal(got, want) {
		t.Fatalf("channel members after carol left: %v, want %v", got, want)
	}
	// Bob, a plain member, sends: the pending leave is committed first.
	sendTo(t, bob, room, "carol left")
	if got, want := identities(t, bob, room), dids(alice, bob); !slices.Equal(got, want) {
		t.Fatalf("bob's roster after his send: %v, want %v", got, want)
	}
	expect(t, "alice", received(t, alice, room), "carol left")
	if got, want := identities(t, alice, room), dids(alice, bob); !slices.Equal(got, want) {
		t.Fatalf("alice's roster: %v, want %v", got, want)
	}

	// Dave joins and leaves; the owner commits the leave on her next
	// command, before anyone sends.
	dave := newMember(t, st, "daveco")
	join(t, alice, dave, room)
	_, epoch, err := roomMembers(alice, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	if err := dave.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	ms, after, err := roomMembers(alice, ctx, room)
	if err != nil || len(ms) != 2 || after != epoch+1 {
		t.Fatalf("alice after dave's leave: %+v epoch %d (was %d) %v", ms, after, epoch, err)
	}
	if got, want := identities(t, bob, room), dids(alice, bob); !slices.Equal(got, want) {
		t.Fatalf("bob's roster after dave left: %v, want %v", got, want)
	}
	sendTo(t, alice, room, "two of us")
	expect(t, "bob", received(t, bob, room), "two of us")
}

// TestRoomPendingProposalsCannotBlockSends: proposals a member sends,
// valid or refused by the room's rules, never stop another member from
// sending: the sender commits what is pending first (RFC 9420 §12.4) and
// the commit leaves out what the rules refuse.
func TestRoomPendingProposalsCannotBlockSends(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, carol, room := roomOfThree(t, st, "ops")

	// A hostile bob whose engine ignores the roles proposes an update of
	// his own leaf (valid) and the removal of carol (refused: he is not
	// an admin) and of the owner (refused for anyone).
	seat.SetTestOnlyNoRoleRules(bob.Seat, true)
	for _, build := range []func(g *mls.Group) ([]byte, error){
		func(g *mls.Group) ([]byte, error) { return g.ProposeUpdate() },
		func(g *mls.Group) ([]byte, error) {
			m, _ := g.MemberByIdentity(carol.did)
			return g.ProposeRemove(m.LeafIndex)
		},
		func(g *mls.Group) ([]byte, error) {
			m, _ := g.MemberByIdentity(alice.did)
			return g.ProposeRemove(m.LeafIndex)
		},
	} {
		if err := seat.PublishToRoomGroup(bob.Seat, ctx, room, build); err != nil {
			t.Fatal(err)
		}
	}
	sendTo(t, carol, room, "from carol")
	sendTo(t, alice, room, "from alice")
	expect(t, "alice", received(t, alice, room))
	if got, want := identities(t, alice, room), dids(alice, bob, carol); !slices.Equal(got, want) {
		t.Fatalf("roster after the proposals: %v, want %v", got, want)
	}
	seat.SetTestOnlyNoRoleRules(bob.Seat, false)
	expect(t, "bob", received(t, bob, room), "from carol", "from alice")
}

// TestRoomFenceResetAfterRefusedCommit: a hostile member's commit that
// the relay accepted and every other member refused leaves the relay
// expecting an epoch no honest member has. An admin's commit then fails
// with ErrFenceAhead, the owner's seat resets the fence on its next
// command, and the admin's commit goes through. The owner also ends the
// channel membership of the member the admin removed, and that member's
// running watch is told it was removed.
func TestRoomFenceResetAfterRefusedCommit(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, carol, room := roomOfThree(t, st, "ops")
	mallory := newMember(t, st, "malco")
	join(t, alice, mallory, room)
	if err := alice.Room(room).AddAdmin(ctx, carol.did); err != nil {
		t.Fatal(err)
	}

	// Mallory's engine ignores the roles and accepts her own commit.
	seat.SetTestOnlyNoRoleRules(mallory.Seat, true)
	if err := seat.ForceRoomRemove(mallory.Seat, ctx, room, alice.did); err != nil {
		t.Fatalf("the hostile commit: %v", err)
	}

	// Bob watches; what he is told of his removal arrives here.
	w := startWatch(t, bob.Seat, room)
	w.connected(t)

	if err := removeFrom(carol, ctx, room, bob.did); !errors.Is(err, seat.ErrFenceAhead) {
		t.Fatalf("the admin's commit while the fence is ahead: %v, want ErrFenceAhead", err)
	}
	if got, want := identities(t, alice, room), dids(alice, bob, carol, mallory); !slices.Equal(got, want) {
		t.Fatalf("alice's roster: %v, want %v", got, want)
	}
	rm, err := carol.Room(room).Remove(ctx, bob.did)
	if err != nil {
		t.Fatalf("the admin's commit after the owner's fence reset: %v", err)
	}
	if rm.AccountID != "" || rm.MembershipEnded {
		t.Fatalf("the admin learned an account it never admitted: %+v", rm)
	}
	// Bob's account is a member until the owner's seat sees the commit.
	if got := memberAccounts(t, st, alice, room); !slices.Contains(got, bob.acct.AccountID) {
		t.Fatalf("members before the owner saw the removal: %v", got)
	}
	if got, want := identities(t, alice, room), dids(alice, carol, mallory); !slices.Equal(got, want) {
		t.Fatalf("alice's roster after the removal: %v, want %v", got, want)
	}
	if got, want := memberAccounts(t, st, alice, room), sorted(alice.acct.AccountID, carol.acct.AccountID, mallory.acct.AccountID); !slices.Equal(got, want) {
		t.Fatalf("members after the owner saw the removal: %v, want %v", got, want)
	}
	var werr error
	select {
	case werr = <-w.done:
		w.done <- werr
	case <-time.After(20 * time.Second):
		t.Fatal("bob's watch goes on after his account's membership ended")
	}
	if !errors.Is(werr, seat.ErrNotMember) {
		t.Fatalf("bob's watch ended with %v, want ErrNotMember", werr)
	}
	var notices []seat.RoomMessage
	for len(w.msgs) > 0 {
		if m := <-w.msgs; m.Kind != "" {
			notices = append(notices, m)
		}
	}
	if len(notices) != 1 || notices[0].Kind != seat.NoticeRemoved || notices[0].Sender != carol.did || !strings.Contains(notices[0].Text, "removed") {
		t.Fatalf("bob's watch was told %+v, want one removal notice from carol", notices)
	}
	if _, err := bob.Room(room).Send(ctx, "still here?"); !errors.Is(err, seat.ErrRemovedRoom) && !errors.Is(err, seat.ErrNotMember) {
		t.Fatalf("bob's send after his removal: %v", err)
	}
}
