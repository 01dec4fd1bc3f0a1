package seat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// wantRoomError fails unless err is a RoomError naming room whose cause
// matches one of causes.
func wantRoomError(t *testing.T, what string, err error, room string, causes ...error) {
	t.Helper()
	var re *seat.RoomError
	if !errors.As(err, &re) || re.Room != room {
		t.Fatalf("%s: %v, want a RoomError naming %s", what, err, room)
	}
	for _, c := range causes {
		if errors.Is(err, c) {
			return
		}
	}
	t.Fatalf("%s: %v, want one of %v", what, err, causes)
}

// TestRoomHandleStrangerGetsNoRoom: a seat's handle on a room it is not
// in (another org's room, by its channel) refuses every call with
// ErrNoRoom naming the room, and sends nothing; a member's handle on the
// same room refuses the owner's calls.
func TestRoomHandleStrangerGetsNoRoom(t *testing.T) {
	st := skytaletest.NewStack(t)
	ctx := context.Background()
	alice, bob, room := roomOfTwo(t, st, "handle-stranger")
	mallory := newMember(t, st, "mallory")

	h := mallory.Room(room)
	if _, err := h.Send(ctx, "let me in"); err == nil {
		t.Fatal("a stranger's send went through")
	} else {
		wantRoomError(t, "stranger send", err, room, seat.ErrNoRoom)
	}
	if _, err := h.Sync(ctx); err == nil {
		t.Fatal("a stranger synced the room")
	} else {
		wantRoomError(t, "stranger sync", err, room, seat.ErrNoRoom)
	}
	if _, err := h.Members(ctx); err == nil {
		t.Fatal("a stranger read the roster")
	} else {
		wantRoomError(t, "stranger members", err, room, seat.ErrNoRoom)
	}
	if _, err := h.Invite(ctx, nil); err == nil {
		t.Fatal("a stranger minted an invite")
	}
	if err := h.Leave(ctx); !errors.Is(err, seat.ErrNoRoom) {
		t.Fatalf("stranger leave: %v, want ErrNoRoom", err)
	}

	// A member is not the owner: inviting and admitting stay the owner's.
	if _, err := bob.Room(room).Invite(ctx, nil); err == nil {
		t.Fatal("a plain member minted an invite")
	}
	if _, err := bob.Room(room).Admit(ctx); !errors.Is(err, seat.ErrNotOwner) {
		t.Fatalf("member admit: %v, want ErrNotOwner", err)
	}

	// Nothing of the stranger's reached the room.
	msgs, err := alice.Room(room).Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Text == "let me in" {
			t.Fatal("the stranger's text is in the room")
		}
	}
}

// TestRoomHandleMembersSendSyncRemove: the owner's and a member's handles
// carry a conversation, show one roster, and once the owner removes the
// member, the removed member's handle can neither read nor send, with an
// error naming the room.
func TestRoomHandleMembersSendSyncRemove(t *testing.T) {
	st := skytaletest.NewStack(t)
	ctx := context.Background()
	alice := newMember(t, st, "acme")
	bob := newMember(t, st, "bobco")

	room, err := alice.Room("handle-life").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room("handle-life").Create(ctx, nil); !errors.Is(err, seat.ErrRoomExists) {
		t.Fatalf("second create: %v, want ErrRoomExists", err)
	}
	owner := alice.Room(room)
	tok, err := owner.Invite(ctx, &seat.InviteOptions{Uses: 1})
	if err != nil {
		t.Fatal(err)
	}
	mine := bob.Room(room)
	if _, err := mine.Join(ctx, tok, nil); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatalf("join before admit: %v, want ErrWelcomeWait", err)
	}
	adm, err := owner.Admit(ctx)
	if err != nil || len(adm) != 1 || adm[0].Identity != bob.did {
		t.Fatalf("admit: %+v %v", adm, err)
	}
	if ch, err := mine.Join(ctx, "", &seat.JoinOptions{Wait: 30 * time.Second}); err != nil || ch != room {
		t.Fatalf("join: %q %v, want %q", ch, err, room)
	}

	seq, err := owner.Send(ctx, "hello bob")
	if err != nil || seq == 0 {
		t.Fatalf("send: %d %v", seq, err)
	}
	msgs, err := mine.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !hasText(msgs, "hello bob") {
		t.Fatalf("bob read %+v, want hello bob", msgs)
	}
	hist, err := mine.History(ctx)
	if err != nil || !hasText(hist, "hello bob") {
		t.Fatalf("bob's history %+v %v", hist, err)
	}

	roster, err := owner.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(roster.Members) != 2 || roster.Epoch == 0 {
		t.Fatalf("roster %+v", roster)
	}
	theirs, err := mine.Members(ctx)
	if err != nil || theirs.Epoch != roster.Epoch || len(theirs.Members) != 2 {
		t.Fatalf("bob's roster %+v %v, alice's %+v", theirs, err, roster)
	}

	if _, err := owner.Remove(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Send(ctx, "after bob"); err != nil {
		t.Fatal(err)
	}
	// The removed member's handle: no read, no send, the room named.
	// (Its sync processes the removal, so it may end without an error.)
	if got, _ := mine.Sync(ctx); hasText(got, "after bob") {
		t.Fatal("the removed member read a message sent after its removal")
	}
	_, err = mine.Members(ctx)
	wantRoomError(t, "removed members", err, room, seat.ErrRemovedRoom, seat.ErrNotMember, seat.ErrNoRoom)
	if _, err := mine.Send(ctx, "still here?"); err == nil {
		t.Fatal("the removed member sent")
	} else {
		wantRoomError(t, "removed send", err, room, seat.ErrRemovedRoom, seat.ErrNotMember, seat.ErrNoRoom)
	}
	msgs, err = owner.Sync(ctx)
	if err != nil || hasText(msgs, "still here?") {
		t.Fatalf("owner read %+v %v", msgs, err)
	}
}

// TestRoomHandleWatch: a member's handle watches the room until its
// context ends, and gets what the owner sends.
func TestRoomHandleWatch(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "handle-watch")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan seat.RoomMessage, 16)
	done := make(chan error, 1)
	go func() {
		done <- bob.Room(room).Watch(ctx, &seat.WatchOptions{OnMessage: func(m seat.RoomMessage) { got <- m }})
	}()
	if _, err := alice.Room(room).Send(context.Background(), "watched"); err != nil {
		t.Fatal(err)
	}
	for m := range got {
		if m.Text == "watched" {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch: %v", err)
	}
}

// TestRoomHandleClosedSeat: after Close, a handle's calls return
// ErrClosed and touch nothing; closing again does nothing, even with a
// context that is done.
func TestRoomHandleClosedSeat(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice, _, room := roomOfTwo(t, st, "handle-closed")
	h := alice.Room(room)
	if err := alice.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Send(ctx, "after close"); !errors.Is(err, seat.ErrClosed) {
		t.Fatalf("send on a closed seat: %v, want ErrClosed", err)
	}
	if _, err := alice.Room(room).Sync(ctx); !errors.Is(err, seat.ErrClosed) {
		t.Fatalf("sync on a closed seat: %v, want ErrClosed", err)
	}
	if err := h.Watch(ctx, nil); !errors.Is(err, seat.ErrClosed) {
		t.Fatalf("watch on a closed seat: %v, want ErrClosed", err)
	}
	if _, err := alice.Room("new-room").Create(ctx, nil); !errors.Is(err, seat.ErrClosed) {
		t.Fatalf("create on a closed seat: %v, want ErrClosed", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := alice.Close(done); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func hasText(ms []seat.RoomMessage, text string) bool {
	for _, m := range ms {
		if m.Text == text {
			return true
		}
	}
	return false
}
