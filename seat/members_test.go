package seat_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// memberAccounts lists a channel's member accounts as its owner sees them.
func memberAccounts(t *testing.T, st *skytaletest.Stack, owner *member, ch string) []string {
	t.Helper()
	m, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: owner.acct.APIKey}).Members(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range m.Members {
		out = append(out, x.AccountID)
	}
	sort.Strings(out)
	return out
}

func sorted(ids ...string) []string {
	sort.Strings(ids)
	return ids
}

// TestRoomMembershipFollowsTheGroup: admitting a seat makes its account a
// member of the room's channel, and the owner's seat learns which account
// it is; removing the seat from the group also ends that membership, after
// which the relay refuses the removed account with ErrNotMember, on a
// send, a watch that was live at the removal, and a new watch; leaving a
// room ends the leaver's own membership.
func TestRoomMembershipFollowsTheGroup(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	bob := newMember(t, st, "bobco")
	carol := newMember(t, st, "carolco")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := memberAccounts(t, st, alice, room); strings.Join(got, ",") != alice.acct.AccountID {
		t.Fatalf("members of a new room: %v", got)
	}
	for _, m := range []*member{bob, carol} {
		if adm := join(t, alice, m, room); adm.AccountID != m.acct.AccountID {
			t.Fatalf("admitted %s as account %q, want %s", adm.Identity, adm.AccountID, m.acct.AccountID)
		}
	}
	if got, want := memberAccounts(t, st, alice, room), sorted(alice.acct.AccountID, bob.acct.AccountID, carol.acct.AccountID); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("members after two admits: %v, want %v", got, want)
	}
	sendTo(t, bob, room, "hello from bob")
	expect(t, "alice", received(t, alice, room), "hello from bob")

	// Bob watches live while alice removes him.
	w := startWatch(t, bob.Seat, room)
	w.connected(t)

	rm, err := alice.Room(room).Remove(ctx, bob.did)
	if err != nil {
		t.Fatal(err)
	}
	if rm.AccountID != bob.acct.AccountID || !rm.MembershipEnded || rm.OtherSeats {
		t.Fatalf("removal %+v", rm)
	}
	if got, want := memberAccounts(t, st, alice, room), sorted(alice.acct.AccountID, carol.acct.AccountID); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("members after the removal: %v, want %v", got, want)
	}
	err = <-w.done
	w.done <- err
	var re *seat.RoomError
	if !errors.Is(err, seat.ErrNotMember) || !errors.As(err, &re) || re.Room != room {
		t.Fatalf("bob's live watch after his removal: %v, want ErrNotMember for %s", err, room)
	}
	if _, err := bob.Room(room).Send(ctx, "still here?"); !errors.Is(err, seat.ErrNotMember) {
		t.Fatalf("bob's send after his removal: %v, want ErrNotMember", err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := bob.WatchWith(wctx, []string{room}, seat.WatchOptions{OnMessage: nil}); !errors.Is(err, seat.ErrNotMember) {
		t.Fatalf("bob's new watch after his removal: %v, want ErrNotMember", err)
	}
	// Bob's account left already; leaving forgets the room all the same.
	if err := bob.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}

	// Carol leaves on her own: her account is no longer a member, and
	// the room goes on for alice.
	if err := carol.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got := memberAccounts(t, st, alice, room); strings.Join(got, ",") != alice.acct.AccountID {
		t.Fatalf("members after carol left: %v", got)
	}
	if err := carol.Room(room).Leave(ctx); !errors.Is(err, seat.ErrNoRoom) {
		t.Fatalf("second leave: %v", err)
	}
	sendTo(t, alice, room, "alone now")
	if _, err := alice.Room(room).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The owner's leave forgets the room here; the directory keeps its
	// owner a member.
	if err := alice.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got := memberAccounts(t, st, alice, room); strings.Join(got, ",") != alice.acct.AccountID {
		t.Fatalf("members after the owner's leave: %v", got)
	}
}

// TestRoomRemoveUnknownAccount: a member this home did not admit (another
// home of the owner did, or an older build) is removed from the group; its
// account's membership is left as is, and the removal says so.
func TestRoomRemoveUnknownAccount(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	// Forget what admitting bob taught this home, as a home that did not
	// admit him would not know it.
	db := openDB(t, alice.home)
	if _, err := db.Exec(`DELETE FROM room_accounts`); err != nil {
		t.Fatal(err)
	}
	rm, err := alice.Room(room).Remove(ctx, bob.did)
	if err != nil {
		t.Fatal(err)
	}
	if rm.AccountID != "" || rm.MembershipEnded {
		t.Fatalf("removal of a member of unknown account: %+v", rm)
	}
	members, _, err := roomMembers(alice, ctx, room)
	if err != nil || len(members) != 1 {
		t.Fatalf("roster after removal: %+v %v", members, err)
	}
}

// openDB opens a home's SQLite file for a test to change it.
func openDB(t *testing.T, home string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(home, "seat.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestRoomRemoveFinishesAnInterruptedRemoval: a removal whose commit went
// through but whose membership change did not (the directory was away)
// is finished by removing the identity again: no second commit, the
// membership ends.
func TestRoomRemoveFinishesAnInterruptedRemoval(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	if _, err := alice.Room(room).Remove(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	_, epoch, err := roomMembers(alice, ctx, room)
	if err != nil {
		t.Fatal(err)
	}
	// Put back what a failed membership change leaves: the account still
	// a member, and this home still knowing whose it is.
	if err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: alice.acct.APIKey}).AddMember(ctx, room, bob.acct.AccountID); err != nil {
		t.Fatal(err)
	}
	if _, err := openDB(t, alice.home).Exec(`INSERT INTO room_accounts(channel, identity, account_id) VALUES (?, ?, ?)`, room, bob.did, bob.acct.AccountID); err != nil {
		t.Fatal(err)
	}
	rm, err := alice.Room(room).Remove(ctx, bob.did)
	if err != nil || !rm.MembershipEnded || rm.AccountID != bob.acct.AccountID {
		t.Fatalf("second removal: %+v, %v", rm, err)
	}
	if got := memberAccounts(t, st, alice, room); strings.Join(got, ",") != alice.acct.AccountID {
		t.Fatalf("members after the finished removal: %v", got)
	}
	if _, again, err := roomMembers(alice, ctx, room); err != nil || again != epoch {
		t.Fatalf("epoch %d after finishing the removal, was %d (%v): a second commit", again, epoch, err)
	}
	// With nothing left to finish, removing a non-member is an error.
	if _, err := alice.Room(room).Remove(ctx, bob.did); err == nil {
		t.Fatal("removing a non-member again succeeded")
	}
}

// TestRoomRemoveKeepsSharedAccount: when another identity still in the
// room is recorded for the removed identity's account, the account's
// membership stays.
func TestRoomRemoveKeepsSharedAccount(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	// Record alice's identity, which stays in the room, as a seat of
	// bob's account.
	db := openDB(t, alice.home)
	if _, err := db.Exec(`INSERT INTO room_accounts(channel, identity, account_id) VALUES (?, ?, ?)`, room, alice.did, bob.acct.AccountID); err != nil {
		t.Fatal(err)
	}
	rm, err := alice.Room(room).Remove(ctx, bob.did)
	if err != nil {
		t.Fatal(err)
	}
	if rm.AccountID != bob.acct.AccountID || !rm.OtherSeats || rm.MembershipEnded {
		t.Fatalf("removal of one seat of a shared account: %+v", rm)
	}
	if got := memberAccounts(t, st, alice, room); !slices.Contains(got, bob.acct.AccountID) {
		t.Fatalf("members after the removal: %v", got)
	}
}
