package seat_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

func randomDID(t testing.TB) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return seat.DIDKey(pub)
}

func TestRoomRolesEncoding(t *testing.T) {
	admins := []string{randomDID(t), randomDID(t), randomDID(t)}
	slices.Sort(admins)
	r := seat.RoomRoles{Owner: randomDID(t), Admins: admins}
	data, err := r.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := seat.UnmarshalRoomRoles(data)
	if err != nil || got.Owner != r.Owner || !slices.Equal(got.Admins, r.Admins) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	bad := map[string][]byte{
		"empty":     nil,
		"trailing":  append(bytes.Clone(data), 0),
		"truncated": data[:len(data)-1],
		// The owner's length 56 written in two bytes.
		"non-minimal length": append([]byte{0x40, data[0]}, data[1:]...),
	}
	for name, r := range map[string]seat.RoomRoles{
		"not a did":     {Owner: "alice"},
		"owner admin":   {Owner: admins[0], Admins: admins},
		"unsorted":      {Owner: r.Owner, Admins: []string{admins[2], admins[0]}},
		"repeated":      {Owner: r.Owner, Admins: []string{admins[0], admins[0]}},
		"bad admin did": {Owner: r.Owner, Admins: []string{"did:key:zz"}},
	} {
		if _, err := r.MarshalBinary(); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	// Hand-made encodings the encoder refuses to make.
	vec := func(b []byte) []byte { return append([]byte{byte(len(b))}, b...) }
	bad["owner as admin"] = append(vec([]byte(r.Owner)), vec(vec([]byte(r.Owner)))...)
	bad["repeated admin"] = append(vec([]byte(r.Owner)), vec(append(vec([]byte(admins[0])), vec([]byte(admins[0]))...))...)
	bad["owner not a did"] = append(vec([]byte("did:key:alice")), 0)
	for name, b := range bad {
		if _, err := seat.UnmarshalRoomRoles(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzRoomRoles checks that the roles decoder never panics and that what
// it accepts re-encodes to the same bytes.
func FuzzRoomRoles(f *testing.F) {
	r := seat.RoomRoles{Owner: randomDID(f), Admins: []string{randomDID(f)}}
	data, err := r.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{0})
	f.Add([]byte{0x40, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := seat.UnmarshalRoomRoles(b)
		if err != nil {
			return
		}
		again, err := got.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x re-encodes to %x (%v)", b, again, err)
		}
	})
}

// memberOf is the member of room whose identity or person is did, as m
// sees the room; ok is false when there is none.
func memberOf(t *testing.T, m *member, room, did string) (rm seat.RoomMember, ok bool) {
	t.Helper()
	ms, _, err := roomMembers(m, context.Background(), room)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ms {
		if x.Identity == did || x.Person == did {
			return x, true
		}
	}
	return rm, false
}

func roleOf(t *testing.T, m *member, room, did string) string {
	t.Helper()
	if x, ok := memberOf(t, m, room, did); ok {
		return x.Role
	}
	return "absent"
}

// TestRoomMemberCannotRemoveOwner: a member that is not the owner could
// once remove the owner. Now its seat refuses before sending anything, and
// when a hostile member forces the Commit with an engine that ignores the
// roles, every other member refuses it and the room goes on without it.
func TestRoomMemberCannotRemoveOwner(t *testing.T) {
	st := skytaletest.NewStack(t)
	ctx := context.Background()
	alice, bob, carol, room := roomOfThree(t, st, "ops")
	if got := roleOf(t, carol, room, alice.did); got != seat.RoleOwner {
		t.Fatalf("carol sees alice as %q", got)
	}
	if got := roleOf(t, carol, room, bob.did); got != seat.RoleMember {
		t.Fatalf("carol sees bob as %q", got)
	}
	if err := removeFrom(bob, ctx, room, alice.did); !errors.Is(err, seat.ErrRemoveOwner) {
		t.Fatalf("bob removing the owner: %v", err)
	}
	if err := removeFrom(bob, ctx, room, carol.did); !errors.Is(err, seat.ErrNotAdmin) {
		t.Fatalf("bob removing carol: %v", err)
	}
	// A hostile bob whose engine ignores the roles.
	seat.SetTestOnlyNoRoleRules(bob.Seat, true)
	if err := removeFrom(bob, ctx, room, alice.did); !errors.Is(err, seat.ErrRemoveOwner) {
		t.Fatalf("bob's seat still checks before sending: %v", err)
	}
	if err := seat.ForceRoomRemove(bob.Seat, ctx, room, alice.did); err != nil {
		t.Fatalf("the forced commit: %v", err)
	}
	for _, m := range []*member{alice, carol} {
		ms, _, err := roomMembers(m, ctx, room)
		if err != nil || len(ms) != 3 {
			t.Fatalf("after the hostile commit: %v %v", ms, err)
		}
	}
	sendTo(t, alice, room, "still here")
	expect(t, "carol", received(t, carol, room), "still here")
	if got := roleOf(t, carol, room, alice.did); got != seat.RoleOwner {
		t.Fatalf("carol sees alice as %q", got)
	}
	// The relay accepted the refused commit and fences the epoch after
	// it: TestRoomFenceResetAfterRefusedCommit shows the owner's seat
	// resetting the fence so honest commits go through again.
}

// TestRoomAdmins checks that the owner names admins, that an admin may
// remove a member but not the owner, and that only the owner changes the
// roles.
func TestRoomAdmins(t *testing.T) {
	st := skytaletest.NewStack(t)
	ctx := context.Background()
	alice, bob, carol, room := roomOfThree(t, st, "ops")
	if err := bob.Room(room).AddAdmin(ctx, bob.did); !errors.Is(err, seat.ErrNotOwner) {
		t.Fatalf("bob making himself admin: %v", err)
	}
	if err := alice.Room(room).AddAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	if got := roleOf(t, carol, room, bob.did); got != seat.RoleAdmin {
		t.Fatalf("carol sees bob as %q", got)
	}
	if err := bob.Room(room).AddAdmin(ctx, carol.did); !errors.Is(err, seat.ErrNotOwner) {
		t.Fatalf("admin bob naming an admin: %v", err)
	}
	if err := removeFrom(bob, ctx, room, alice.did); !errors.Is(err, seat.ErrRemoveOwner) {
		t.Fatalf("admin bob removing the owner: %v", err)
	}
	if err := removeFrom(bob, ctx, room, carol.did); err != nil {
		t.Fatalf("admin bob removing carol: %v", err)
	}
	if err := alice.Room(room).RemoveAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	if got := roleOf(t, bob, room, bob.did); got != seat.RoleMember {
		t.Fatalf("bob sees himself as %q", got)
	}
}

// TestRoomCreateRefusesLiveChannel: the owner's `room leave` and `room
// create` of the same name once silently split the room into two groups on
// one channel. Now create refuses while other accounts are still members of
// the channel.
func TestRoomCreateRefusesLiveChannel(t *testing.T) {
	st := skytaletest.NewStack(t)
	ctx := context.Background()
	alice, bob, room := roomOfTwo(t, st, "ops")
	if err := alice.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room("ops").Create(ctx, nil); !errors.Is(err, seat.ErrRoomLive) {
		t.Fatalf("create over a live room: %v", err)
	}
	// Once the others have left, the name is free again.
	if err := bob.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room("ops").Create(ctx, nil); err != nil {
		t.Fatalf("create over an empty channel: %v", err)
	}
}

// TestJoinRefusesUnreadableRoles: a hostile owner's engine commits roles
// nobody can decode; a newcomer's join refuses the room rather than keep
// a room whose every Commit and roster would fail.
func TestJoinRefusesUnreadableRoles(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	bob := newMember(t, st, "bobco")
	seat.SetTestOnlyNoRoleRules(alice.Seat, true)
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := seat.ForceRoomRoles(alice.Seat, ctx, room, []byte{0xff}); err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatalf("join before admit: %v", err)
	}
	if _, err := alice.Room(room).Admit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Room(room).Join(ctx, "", &seat.JoinOptions{Wait: time.Minute}); err == nil || !strings.Contains(err.Error(), "roles that cannot be read") {
		t.Fatalf("join of a room with unreadable roles: %v", err)
	}
	if rooms, _ := bob.Rooms(ctx); len(rooms) != 0 {
		t.Fatalf("bob kept the room: %+v", rooms)
	}
}
