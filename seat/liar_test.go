package seat_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// shiftedClock is one clock for a whole stack and its seats, which a test
// moves forward instead of sleeping.
type shiftedClock struct{ off atomic.Int64 }

func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *shiftedClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// newClockedStack is a stack whose directory and relay run on c.
func newClockedStack(t *testing.T, c *shiftedClock) *skytaletest.Stack {
	return skytaletest.NewStackWith(t, skytaletest.Options{
		Directory: skytale.DirectoryConfig{Now: c.Now},
		Relay:     skytale.RelayConfig{Now: c.Now},
	})
}

// newMemberClock is newMember with the seat on clock c.
func newMemberClock(t *testing.T, st *skytaletest.Stack, org string, c *shiftedClock) *member {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	s := openSeatClock(t, st, home, c.Now)
	did, err := s.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.SignIn(ctx, org+"@example.test", org)
	if err != nil {
		t.Fatal(err)
	}
	return &member{Seat: s, did: did, acct: a, home: home}
}

// relayRefuses reports, retrying while the relay has not yet applied a
// membership change, whether the relay refuses key's account a
// subscription to ch.
func relayRefuses(t *testing.T, st *skytaletest.Stack, key, ch string) bool {
	t.Helper()
	ctx := context.Background()
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: key}
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(ctx context.Context) (string, error) {
		tok, _, err := dc.Token(ctx)
		return tok, err
	}}
	return waitfor.Poll(15*time.Second, func() error {
		conn, err := rc.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = conn.Subscribe(ctx, ch)
		conn.Close()
		if err == nil {
			return errors.New("the subscription was accepted")
		}
		if !errors.Is(err, seat.ErrNotMember) {
			t.Fatalf("the subscription was refused for another reason: %v", err)
		}
		return nil
	}) == nil
}

// TestLyingInviteJoinerLosesItsMembership: carol holds an auto invite of
// a room. Naming dave's identity at the directory, whose key she does not
// hold, is refused (403 invalid_proof) and makes her nothing. Naming a
// second key of her own, X, and joining the room as herself, Y, gets her
// leaf removed at once by the admin's seat; and once the join's grace is
// over the owner's seat lapses the record of X, which never joined the
// group, and with it her account's channel membership: the relay refuses
// her subscription and the directory her GroupInfo fetch. Erin, an honest
// joiner by the same invite, stays; gina, who redeemed and never
// committed in her grace, loses her membership as carol does, but, since
// a lapse is not a removal, joins by the invite afterwards. Neither the
// admin nor the liar can lapse anyone.
func TestLyingInviteJoinerLosesItsMembership(t *testing.T) {
	ctx := context.Background()
	clock := &shiftedClock{}
	st := newClockedStack(t, clock)
	alice := newMemberClock(t, st, "acme", clock)
	bob := newMemberClock(t, st, "bobco", clock)
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	join(t, alice, bob, room)
	if err := alice.Room(room).AddAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 10, TTL: 2 * time.Hour, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMemberClock(t, st, "carolco", clock)
	dave := newMemberClock(t, st, "daveco", clock)
	erin := newMemberClock(t, st, "erinco", clock)
	gina := newMemberClock(t, st, "ginaco", clock)

	// Dave's identity needs dave's key.
	err = seat.LieAtInviteJoin(carol.Seat, ctx, room, tok, dave.did)
	var ae *seat.APIError
	if !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "invalid_proof" {
		t.Fatalf("carol naming dave: %v, want 403 invalid_proof", err)
	}
	if got := memberAccounts(t, st, alice, room); slices.Contains(got, carol.acct.AccountID) {
		t.Fatalf("members after carol's refused join: %v", got)
	}

	// Her own second key passes the directory; the room sees Y join.
	if _, err := seat.LieAtInviteJoinAs(carol.Seat, ctx, room, tok, newKey(t)); err != nil {
		t.Fatalf("the lying join: %v", err)
	}
	want := dids(alice, bob)
	if got := identities(t, bob, room); !slices.Equal(got, want) {
		t.Fatalf("the admin's roster once it read the lying join: %v, want %v", got, want)
	}
	if _, err := erin.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatalf("erin's honest join: %v", err)
	}
	if err := seat.RedeemInvite(gina.Seat, ctx, room, tok); err != nil {
		t.Fatalf("gina's redemption: %v", err)
	}
	want = dids(alice, bob, erin)
	if got := identities(t, alice, room); !slices.Equal(got, want) {
		t.Fatalf("the owner's roster: %v, want %v", got, want)
	}
	// Within the grace, carol's account is still served: the gap the
	// lapse closes.
	if got := memberAccounts(t, st, alice, room); !slices.Contains(got, carol.acct.AccountID) || !slices.Contains(got, gina.acct.AccountID) {
		t.Fatalf("members within the grace: %v, want carol's and gina's accounts among them", got)
	}

	// The grace passes; the owner's next room command settles the room.
	clock.Advance(11 * time.Minute)
	if got := identities(t, alice, room); !slices.Equal(got, want) {
		t.Fatalf("the owner's roster after the grace: %v, want %v", got, want)
	}
	got := memberAccounts(t, st, alice, room)
	if slices.Contains(got, carol.acct.AccountID) || slices.Contains(got, gina.acct.AccountID) {
		t.Fatalf("members after the grace: %v, still carol's or gina's account", got)
	}
	for _, m := range []*member{alice, bob, erin} {
		if !slices.Contains(got, m.acct.AccountID) {
			t.Fatalf("members after the grace: %v, without %s", got, m.did)
		}
	}
	if !relayRefuses(t, st, carol.acct.APIKey, room) {
		t.Fatal("the relay still lets carol's account subscribe to the room")
	}
	_, _, err = (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: carol.acct.APIKey}).GroupInfo(ctx, room)
	if !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "not_a_member" {
		t.Fatalf("carol's GroupInfo fetch after the lapse: %v, want 403 not_a_member", err)
	}
	converse(t, room, erin, bob, "still here", "welcome")
	// Only the owner lapses: the admin and the liar are refused, whatever
	// they name.
	for _, m := range []*member{bob, carol} {
		_, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: m.acct.APIKey}).LapseInviteJoins(ctx, room, 0, []string{erin.did})
		if !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "not_owner" {
			t.Fatalf("a lapse by %s: %v, want 403 not_owner", m.did, err)
		}
	}

	// A lapse is not a removal: gina, too slow the first time, joins.
	if _, err := gina.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatalf("gina's join after her record lapsed: %v", err)
	}
	want = dids(alice, bob, erin, gina)
	if got := identities(t, alice, room); !slices.Equal(got, want) {
		t.Fatalf("the owner's roster after gina's join: %v, want %v", got, want)
	}
	// Her record, in the group now, outlives another grace and sweep.
	clock.Advance(11 * time.Minute)
	identities(t, alice, room)
	if got := memberAccounts(t, st, alice, room); !slices.Contains(got, gina.acct.AccountID) || !slices.Contains(got, erin.acct.AccountID) {
		t.Fatalf("members once gina and erin are in the group: %v", got)
	}
}

// TestDeviceJoinsByAutoInvite: a person's second device joins a room by
// auto invite as the device identity it is in rooms, its proof signed by
// the device key and vouched for by the person's certificate; the
// directory records that identity, which the owner's seat finds in the
// group, so the record stands past its grace.
func TestDeviceJoinsByAutoInvite(t *testing.T) {
	ctx := context.Background()
	clock := &shiftedClock{}
	st := newClockedStack(t, clock)
	alice := newMemberClock(t, st, "acme", clock)
	dave := newMemberClock(t, st, "daveco", clock)
	room, err := dave.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	phone, _, _ := secondDevice(t, st, alice)
	tok, err := dave.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := phone.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatalf("the device's join: %v", err)
	}
	leaves := leavesOfPerson(t, dave, room, alice.did)
	if len(leaves) != 1 || leaves[0] == alice.did {
		t.Fatalf("alice's leaves in dave's room: %v, want her phone's device identity", leaves)
	}
	converse(t, room, phone, dave, "from the phone", "hello phone")
	// (The phone's seat keeps its own clock, so it goes quiet before the
	// stack's moves on.)
	clock.Advance(11 * time.Minute)
	identities(t, dave, room)
	if got := memberAccounts(t, st, dave, room); !slices.Contains(got, alice.acct.AccountID) {
		t.Fatalf("members past the grace: %v, without alice's account", got)
	}
}
