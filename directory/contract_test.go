package directory

// The store's contract: every test here runs unchanged on every backend
// (forBackends), each on a fresh database, and calls the store's
// operations directly.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/feed"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openTestStore opens a store on a fresh database of b, closed when the
// test ends.
func openTestStore(t *testing.T, b testBackend) *store {
	t.Helper()
	return reopenTestStore(t, b.database(t))
}

func reopenTestStore(t *testing.T, database string) *store {
	t.Helper()
	c := Config{Database: database}
	onPostgres(&c)
	st, err := openStore(context.Background(), database, c.Backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	return st
}

// must fails the test unless err is nil.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails the test unless err is target (errors.Is).
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

// fixture is a store with an owner account "owner" of org acme owning
// channel acme/a/b, and an account "joiner" of org globex.
func fixture(t *testing.T, b testBackend) (*store, context.Context) {
	t.Helper()
	st, ctx := openTestStore(t, b), context.Background()
	must(t, st.createAccount(ctx, "owner", "o@acme.example", "acme", nil, false, hashSecret("k-owner"), t0))
	must(t, st.createAccount(ctx, "joiner", "j@globex.example", "globex", nil, false, hashSecret("k-joiner"), t0))
	if _, err := st.registerChannel(ctx, "ch-1", "acme/a/b", "owner", t0); err != nil {
		t.Fatal(err)
	}
	return st, ctx
}

func TestContractAccountsAndOrgs(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := openTestStore(t, b), context.Background()
		must(t, st.createAccount(ctx, "a1", "a1@acme.example", "acme", nil, false, hashSecret("k1"), t0))
		wantErr(t, st.createAccount(ctx, "a2", "a2@acme.example", "acme", nil, false, hashSecret("k2"), t0), errOrgTaken)
		must(t, st.createAccount(ctx, "a3", "a3@acme.example", "acme", nil, true, hashSecret("k3"), t0))

		must(t, st.createOrgInvite(ctx, "acme", "a1", hashSecret("oi"), 1, t0.Add(time.Hour), t0))
		must(t, st.createAccount(ctx, "a4", "a4@acme.example", "acme", hashSecret("oi"), false, hashSecret("k4"), t0))
		wantErr(t, st.createAccount(ctx, "a5", "a5@acme.example", "acme", hashSecret("oi"), false, hashSecret("k5"), t0), errOrgInviteInvalid)
		wantErr(t, st.createAccount(ctx, "a6", "a6@x.example", "globex", hashSecret("oi"), false, hashSecret("k6"), t0), errOrgInviteInvalid)
		must(t, st.createOrgInvite(ctx, "acme", "a1", hashSecret("oi-short"), 5, t0.Add(time.Minute), t0))
		wantErr(t, st.createAccount(ctx, "a7", "a7@acme.example", "acme", hashSecret("oi-short"), false, hashSecret("k7"), t0.Add(time.Minute)), errOrgInviteInvalid)
		// A refused signup leaves nothing behind: its id and key are free.
		must(t, st.createAccount(ctx, "a2", "a2@globex.example", "globex", nil, false, hashSecret("k2"), t0))

		p, revoked, err := st.lookupKey(ctx, hashSecret("k1"))
		if err != nil || revoked || p != (principal{account: "a1", org: "acme", lastSignin: unixDay(t0)}) {
			t.Fatalf("lookupKey = %+v, %v, %v", p, revoked, err)
		}
		_, _, err = st.lookupKey(ctx, hashSecret("k5"))
		wantErr(t, err, errNotFound)
		org, revoked, err := st.lookupAccount(ctx, "a4")
		if err != nil || revoked || org != "acme" {
			t.Fatalf("lookupAccount = %q, %v, %v", org, revoked, err)
		}
		for _, id := range []string{"nobody", "\xff\xfe", "a\x00b"} {
			_, _, err = st.lookupAccount(ctx, id)
			wantErr(t, err, errNotFound)
		}
		must(t, st.revoke(ctx, "a1", t0))
		if _, revoked, _ := st.lookupKey(ctx, hashSecret("k1")); !revoked {
			t.Fatal("a revoked account's key is not reported revoked")
		}
		if _, revoked, _ := st.lookupAccount(ctx, "a1"); !revoked {
			t.Fatal("a revoked account is not reported revoked")
		}
	})
}

func TestContractChannelsInvitesAndJoins(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		if id, err := st.registerChannel(ctx, "ch-2", ch, "owner", t0); err != nil || id != "ch-1" {
			t.Fatalf("registering again = %q, %v; want the first id", id, err)
		}
		_, err := st.registerChannel(ctx, "ch-3", ch, "joiner", t0)
		wantErr(t, err, errChannelTaken)
		wantErr(t, st.createInvite(ctx, ch, "joiner", hashSecret("x"), 1, false, t0.Add(time.Hour), t0), errNotOwner)
		wantErr(t, st.createInvite(ctx, "acme/no/such", "owner", hashSecret("x"), 1, false, t0.Add(time.Hour), t0), errChannelNotFound)
		must(t, st.createInvite(ctx, ch, "owner", hashSecret("inv"), 3, false, t0.Add(time.Hour), t0))

		joiner := principal{account: "joiner", org: "globex"}
		join := func(id, identity string, inv []byte, maxPending int) error {
			return queue(st, ctx, joinParams{id: id, channel: ch, caller: joiner, inviteHash: inv,
				identity: identity, keyPackage: []byte("kp " + id), maxPending: maxPending, now: t0})
		}
		wantErr(t, queue(st, ctx, joinParams{id: "r0", channel: "acme/no/such", caller: joiner, inviteHash: hashSecret("inv"), identity: "i", keyPackage: []byte("kp"), maxPending: 10, now: t0}), errChannelNotFound)
		wantErr(t, join("r0", "i0", hashSecret("wrong"), 10), errInviteInvalid)
		must(t, join("r1", "i1", hashSecret("inv"), 10))
		must(t, join("r2", "i2", hashSecret("inv"), 10))
		// Over the pending cap: refused, and the invite's last use kept.
		wantErr(t, join("r3", "i3", hashSecret("inv"), 2), errTooManyPending)
		must(t, join("r3", "i3", hashSecret("inv"), 10))
		wantErr(t, join("r4", "i4", hashSecret("inv"), 10), errInviteInvalid)

		_, err = st.pending(ctx, ch, "joiner")
		wantErr(t, err, errNotOwner)
		reqs, err := st.pending(ctx, ch, "owner")
		must(t, err)
		var ids []string
		for _, r := range reqs {
			ids = append(ids, r.id)
			if r.account != "joiner" || !bytes.Equal(r.keyPackage, []byte("kp "+r.id)) || !r.createdAt.Equal(t0) {
				t.Fatalf("pending request %+v", r)
			}
		}
		if !reflect.DeepEqual(ids, []string{"r1", "r2", "r3"}) {
			t.Fatalf("pending %v, want the requests in the order they were made", ids)
		}

		status, _, err := st.requestStatus(ctx, "r1", "joiner", "")
		if err != nil || status != "pending" {
			t.Fatalf("status %q, %v", status, err)
		}
		_, _, err = st.requestStatus(ctx, "r1", "owner", "")
		wantErr(t, err, errNotFound)
		wantErr(t, st.completeRequest(ctx, "r1", "joiner", "", []byte("welcome"), t0), errNotFound)
		wantErr(t, st.completeRequest(ctx, "r1", "owner", "acme/other/x", []byte("welcome"), t0), errNotFound)
		must(t, st.completeRequest(ctx, "r1", "owner", "", []byte("welcome"), t0))
		wantErr(t, st.completeRequest(ctx, "r1", "owner", "", []byte("again"), t0), errNotFound)
		status, welcome, err := st.requestStatus(ctx, "r1", "joiner", ch)
		if err != nil || status != "completed" || string(welcome) != "welcome" {
			t.Fatalf("status %q %q, %v", status, welcome, err)
		}
		_, _, err = st.requestStatus(ctx, "r1", "joiner", "acme/other/x")
		wantErr(t, err, errNotFound)
		if _, ms, err := st.members(ctx, ch, "joiner"); err != nil || len(ms) != 2 {
			t.Fatalf("members after the Welcome: %v, %v", ms, err)
		}
		if acked, err := st.ackRequest(ctx, "r2", "joiner", ""); err != nil || acked {
			t.Fatalf("acked a pending request: %v, %v", acked, err)
		}
		if acked, err := st.ackRequest(ctx, "r1", "joiner", ""); err != nil || !acked {
			t.Fatalf("ack = %v, %v", acked, err)
		}
		if acked, _ := st.ackRequest(ctx, "r1", "joiner", ""); acked {
			t.Fatal("acked twice")
		}
		// Ids no backend could hold find nothing, on every backend.
		for _, id := range []string{"\xff", "r\x001"} {
			_, _, err = st.requestStatus(ctx, id, "joiner", "")
			wantErr(t, err, errNotFound)
			wantErr(t, st.completeRequest(ctx, id, "owner", "", []byte("w"), t0), errNotFound)
			if acked, err := st.ackRequest(ctx, id, "joiner", ""); err != nil || acked {
				t.Fatalf("ack of %q = %v, %v", id, acked, err)
			}
		}

		// Federation invites count uses for one org only.
		must(t, st.createFederationInvite(ctx, ch, "owner", "globex", hashSecret("fed"), 1, false, t0.Add(time.Hour), t0))
		wantErr(t, st.createFederationInvite(ctx, ch, "joiner", "globex", hashSecret("fed2"), 1, false, t0.Add(time.Hour), t0), errNotOwner)
		fed := func(id string, caller principal) error {
			return queue(st, ctx, joinParams{id: id, channel: ch, caller: caller, fedHash: hashSecret("fed"),
				identity: id, keyPackage: []byte("kp"), maxPending: 10, now: t0})
		}
		wantErr(t, fed("f1", principal{account: "owner", org: "acme"}), errFederationDenied)
		must(t, fed("f2", joiner))
		wantErr(t, fed("f3", joiner), errFederationDenied)
	})
}

func TestContractMembersAndFeed(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		must(t, st.createAccount(ctx, "m2", "m2@globex.example", "globex", nil, true, hashSecret("k-m2"), t0))
		wantErr(t, st.addMemberByOwner(ctx, ch, "joiner", "joiner", t0), errNotOwner)
		wantErr(t, st.addMemberByOwner(ctx, ch, "owner", "ghost", t0), errAccountNotFound)
		wantErr(t, st.addMemberByOwner(ctx, ch, "owner", "\xff", t0), errAccountNotFound)
		wantErr(t, st.addMemberByOwner(ctx, "acme/no/such", "owner", "joiner", t0), errChannelNotFound)
		must(t, st.addMemberByOwner(ctx, ch, "owner", "joiner", t0.Add(time.Second)))
		must(t, st.addMemberByOwner(ctx, ch, "owner", "joiner", t0.Add(2*time.Second))) // no second event

		_, _, err := st.members(ctx, ch, "m2")
		wantErr(t, err, errNotMember)
		owner, ms, err := st.members(ctx, ch, "joiner")
		must(t, err)
		if owner != "owner" || len(ms) != 2 || ms[0].account != "owner" || ms[1].account != "joiner" || !ms[1].addedAt.Equal(t0.Add(time.Second)) {
			t.Fatalf("members = %q %+v", owner, ms)
		}
		wantErr(t, st.dropMember(ctx, ch, "m2", "joiner", t0), errNotOwner)
		wantErr(t, st.dropMember(ctx, ch, "owner", "owner", t0), errOwnerCannotLeave)
		must(t, st.dropMember(ctx, ch, "joiner", "joiner", t0))
		must(t, st.dropMember(ctx, ch, "owner", "joiner", t0)) // not a member: no event
		wantErr(t, st.resetFence(ctx, ch, "joiner", "", 3, t0), errNotOwner)
		wantErr(t, st.resetFence(ctx, ch, "owner", "owner", 3, t0), errOwnerCannotLeave)
		must(t, st.addMemberByOwner(ctx, ch, "owner", "m2", t0))
		must(t, st.resetFence(ctx, ch, "owner", "m2", 7, t0))

		evs, next, err := st.channelEventsSince(ctx, 0, 100)
		must(t, err)
		// Each membership's last change, in the order of the ids they
		// were written under: the adds of joiner (2) and m2 (4) went as
		// their removals were written.
		want := []feed.Event{
			{ID: 1, Kind: feed.MemberAdded, Channel: ch, Account: "owner"},
			{ID: 3, Kind: feed.MemberRemoved, Channel: ch, Account: "joiner"},
			{ID: 5, Kind: feed.MemberRemoved, Channel: ch, Account: "m2"},
			{ID: 6, Kind: feed.FenceReset, Channel: ch, Epoch: 7},
		}
		if !reflect.DeepEqual(evs, want) || next != 6 {
			t.Fatalf("feed = %+v, next %d\nwant %+v", evs, next, want)
		}
		evs, next, err = st.channelEventsSince(ctx, 1, 2)
		if err != nil || len(evs) != 2 || evs[0].ID != 3 || next != 5 {
			t.Fatalf("page after 1 = %+v, next %d, %v", evs, next, err)
		}
		evs, next, err = st.channelEventsSince(ctx, 6, 100)
		if err != nil || len(evs) != 0 || next != 6 {
			t.Fatalf("page at the end = %+v, next %d, %v", evs, next, err)
		}
	})
}

func TestContractSeats(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		must(t, st.registerSeat(ctx, "s1", "ch-9", "did:key:z1", "owner", "acme/seat/home", hashSecret("sk1"), t0))
		p, _, err := st.lookupKey(ctx, hashSecret("sk1"))
		p.lastSignin = 0 // the owner's signup day; TestIdleAccounts checks it
		if err != nil || p != (principal{account: "owner", org: "acme", channel: "acme/seat/home"}) {
			t.Fatalf("seat credential = %+v, %v", p, err)
		}
		wantErr(t, st.registerSeat(ctx, "s2", "ch-10", "did:key:z1", "owner", "acme/seat/other", hashSecret("sk2"), t0), errSeatExists)
		// A seat on a channel someone else owns is refused whole: the
		// identity stays free and no credential is stored.
		wantErr(t, st.registerSeat(ctx, "s3", "ch-11", "did:key:z3", "joiner", "acme/a/b", hashSecret("sk3"), t0), errChannelTaken)
		if _, _, err := st.lookupKey(ctx, hashSecret("sk3")); !errors.Is(err, errNotFound) {
			t.Fatalf("a refused seat's credential: %v", err)
		}
		must(t, st.registerSeat(ctx, "s3", "ch-11", "did:key:z3", "joiner", "globex/seat/home", hashSecret("sk3"), t0))
		// The seat's channel was registered for the account, with it as a member.
		if _, ms, err := st.members(ctx, "globex/seat/home", "joiner"); err != nil || len(ms) != 1 {
			t.Fatalf("seat channel members %+v, %v", ms, err)
		}
	})
}

func TestContractDeviceGrants(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		codes := []string{"BCDF-GHJK", "BCDF-GHJL", "BCDF-GHJM", "BCDF-GHJN"}
		grant := func(id, remote string, maxOpen int) (string, error) {
			n := 0
			return st.createGrant(ctx, grantParams{id: id, deviceKey: []byte("device key " + id), label: "laptop",
				pollHash: hashSecret("poll-" + id), remote: remote, maxOpen: maxOpen,
				// Each call draws the codes from the start, so every grant
				// after the first meets taken codes and must draw again.
				newCode: func() (string, error) {
					n++
					return codes[n-1], nil
				},
				expires: t0.Add(GrantLifetime), now: t0})
		}
		code1, err := grant("g1", "10.0.0.1", 2)
		must(t, err)
		code2, err := grant("g2", "10.0.0.1", 2)
		must(t, err)
		if code1 != codes[0] || code2 != codes[1] {
			t.Fatalf("codes %q %q: a taken code was not drawn again", code1, code2)
		}
		_, err = grant("g3", "10.0.0.1", 2)
		var ce *grantCapError
		if !errors.As(err, &ce) || ce.retry != GrantLifetime {
			t.Fatalf("third open grant of one address: %v", err)
		}
		if _, err := grant("g3", "10.0.0.2", 2); err != nil {
			t.Fatal(err)
		}

		g, err := st.lookupGrant(ctx, code1, t0)
		if err != nil || g.id != "g1" || string(g.deviceKey) != "device key g1" || g.label != "laptop" || !g.expires.Equal(t0.Add(GrantLifetime)) {
			t.Fatalf("lookup = %+v, %v", g, err)
		}
		_, err = st.lookupGrant(ctx, "ZZZZ-ZZZZ", t0)
		wantErr(t, err, errNotFound)
		seal := func(deviceKey []byte) ([]byte, []byte, error) {
			return append([]byte("sealed for "), deviceKey...), hashSecret("granted key"), nil
		}
		id, _, err := st.approveGrant(ctx, code1, principal{account: "owner"}, []byte("seat box"), nil, t0, seal)
		if err != nil || id != "g1" {
			t.Fatalf("approve = %q, %v", id, err)
		}
		_, _, err = st.approveGrant(ctx, code1, principal{account: "owner"}, nil, nil, t0, seal)
		wantErr(t, err, errGrantNotPending)
		_, err = st.lookupGrant(ctx, code1, t0)
		wantErr(t, err, errGrantNotPending)
		if p, _, err := st.lookupKey(ctx, hashSecret("granted key")); err != nil || p.account != "owner" {
			t.Fatalf("granted key = %+v, %v", p, err)
		}

		_, err = st.pollGrant(ctx, "g1", hashSecret("poll-g2"), t0)
		wantErr(t, err, errNotFound)
		_, err = st.pollGrant(ctx, "\xff", hashSecret("poll-g1"), t0)
		wantErr(t, err, errNotFound)
		d, err := st.pollGrant(ctx, "g1", hashSecret("poll-g1"), t0)
		if err != nil || d.status != "approved" || string(d.sealed) != "sealed for device key g1" || string(d.sealedSeat) != "seat box" || d.account != "owner" || d.org != "acme" {
			t.Fatalf("poll = %+v, %v", d, err)
		}
		d, err = st.pollGrant(ctx, "g1", hashSecret("poll-g1"), t0)
		if err != nil || d.status != "approved" || d.sealed != nil || d.sealedSeat != nil {
			t.Fatalf("second poll = %+v, %v: the credential must come back once", d, err)
		}

		// Approved but not collected in time: the credential and its key
		// are withdrawn.
		if _, _, err := st.approveGrant(ctx, code2, principal{account: "owner"}, nil, nil, t0, func([]byte) ([]byte, []byte, error) {
			return []byte("sealed 2"), hashSecret("granted key 2"), nil
		}); err != nil {
			t.Fatal(err)
		}
		late := t0.Add(GrantLifetime)
		d, err = st.pollGrant(ctx, "g2", hashSecret("poll-g2"), late)
		if err != nil || d.status != "expired" || d.sealed != nil {
			t.Fatalf("late poll = %+v, %v", d, err)
		}
		if _, _, err := st.lookupKey(ctx, hashSecret("granted key 2")); !errors.Is(err, errNotFound) {
			t.Fatalf("the key of an uncollected grant survived: %v", err)
		}
		// Pending past its lifetime: expired, and no longer approvable.
		_, _, err = st.approveGrant(ctx, codes[2], principal{account: "owner"}, nil, nil, late, seal)
		wantErr(t, err, errNotFound)
		if d, err := st.pollGrant(ctx, "g3", hashSecret("poll-g3"), late); err != nil || d.status != "expired" {
			t.Fatalf("poll of an expired pending grant = %+v, %v", d, err)
		}
	})
}

func TestContractRevocations(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := openTestStore(t, b), context.Background()
		for _, sub := range []string{"x", "y", "x", "z"} {
			must(t, st.revoke(ctx, sub, t0))
		}
		subs, next, err := st.revokedSince(ctx, 0, 10)
		if err != nil || !reflect.DeepEqual(subs, []string{"x", "y", "z"}) || next != 3 {
			t.Fatalf("revocations = %v, next %d, %v: want x y z with ids 1..3", subs, next, err)
		}
		subs, next, err = st.revokedSince(ctx, 1, 1)
		if err != nil || !reflect.DeepEqual(subs, []string{"y"}) || next != 2 {
			t.Fatalf("page after 1 = %v, next %d, %v", subs, next, err)
		}
		subs, next, err = st.revokedSince(ctx, 3, 10)
		if err != nil || len(subs) != 0 || next != 3 {
			t.Fatalf("page at the end = %v, next %d, %v", subs, next, err)
		}
	})
}

func TestContractSweep(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		joiner := principal{account: "joiner", org: "globex"}
		must(t, st.createInvite(ctx, ch, "owner", hashSecret("inv"), 10, false, t0.Add(3*time.Hour), t0))
		must(t, st.createInvite(ctx, ch, "owner", hashSecret("inv-old"), 10, false, t0.Add(time.Minute), t0))
		for _, id := range []string{"done", "stale"} {
			must(t, queue(st, ctx, joinParams{id: id, channel: ch, caller: joiner, inviteHash: hashSecret("inv"), identity: id, keyPackage: []byte("kp"), maxPending: 10, now: t0}))
		}
		must(t, st.completeRequest(ctx, "done", "owner", "", []byte("w"), t0))
		later := t0.Add(2 * time.Hour)
		must(t, queue(st, ctx, joinParams{id: "fresh", channel: ch, caller: joiner, inviteHash: hashSecret("inv"), identity: "fresh", keyPackage: []byte("kp"), maxPending: 10, now: t0.Add(70 * time.Minute)}))

		n, err := st.sweep(ctx, later, time.Hour)
		must(t, err)
		// done, stale and the expired invite.
		if n != 3 {
			t.Fatalf("swept %d rows, want 3", n)
		}
		for _, id := range []string{"done", "stale"} {
			_, _, err := st.requestStatus(ctx, id, "joiner", "")
			wantErr(t, err, errNotFound)
		}
		if s, _, err := st.requestStatus(ctx, "fresh", "joiner", ""); err != nil || s != "pending" {
			t.Fatalf("fresh request %q, %v", s, err)
		}
		if n, err := st.sweep(ctx, later, time.Hour); err != nil || n != 0 {
			t.Fatalf("second sweep: %d, %v", n, err)
		}
	})
}

// TestContractRestart: what a durable backend acknowledged is there after
// the store is closed and opened again.
func TestContractRestart(t *testing.T) {
	for _, b := range testBackends {
		if !b.durable {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			db := b.database(t)
			st, ctx := reopenTestStore(t, db), context.Background()
			must(t, st.createAccount(ctx, "owner", "o@acme.example", "acme", nil, false, hashSecret("k"), t0))
			_, err := st.registerChannel(ctx, "ch-1", "acme/a/b", "owner", t0)
			must(t, err)
			must(t, st.createInvite(ctx, "acme/a/b", "owner", hashSecret("inv"), 2, false, t0.Add(time.Hour), t0))
			must(t, queue(st, ctx, joinParams{id: "r1", channel: "acme/a/b", caller: principal{account: "owner", org: "acme"}, inviteHash: hashSecret("inv"), identity: "i", keyPackage: []byte("kp"), maxPending: 10, now: t0}))
			must(t, st.revoke(ctx, "gone", t0))
			must(t, st.close())

			st = reopenTestStore(t, db)
			if p, _, err := st.lookupKey(ctx, hashSecret("k")); err != nil || p.account != "owner" {
				t.Fatalf("key after reopen: %+v, %v", p, err)
			}
			if reqs, err := st.pending(ctx, "acme/a/b", "owner"); err != nil || len(reqs) != 1 || reqs[0].id != "r1" {
				t.Fatalf("pending after reopen: %+v, %v", reqs, err)
			}
			// One use left, and the feeds go on from where they were.
			p := joinParams{channel: "acme/a/b", caller: principal{account: "owner", org: "acme"}, inviteHash: hashSecret("inv"), identity: "i", keyPackage: []byte("kp"), maxPending: 10, now: t0}
			p.id = "r2"
			must(t, queue(st, ctx, p))
			p.id = "r3"
			wantErr(t, queue(st, ctx, p), errInviteInvalid)
			must(t, st.revoke(ctx, "gone-too", t0))
			if subs, next, err := st.revokedSince(ctx, 0, 10); err != nil || len(subs) != 2 || next != 2 {
				t.Fatalf("revocations after reopen: %v, %d, %v", subs, next, err)
			}
			must(t, st.addMemberByOwner(ctx, "acme/a/b", "owner", "owner", t0))
			must(t, st.resetFence(ctx, "acme/a/b", "owner", "", 1, t0))
			if evs, _, err := st.channelEventsSince(ctx, 0, 10); err != nil || len(evs) != 2 || evs[1].ID != 2 {
				t.Fatalf("feed after reopen: %+v, %v", evs, err)
			}
		})
	}
}

// TestContractFeedsNeverSkip runs writers that change memberships (and
// revoke) concurrently while a reader polls each feed with its cursor, as
// a relay does: every id the reader sees must be the one after the last
// it saw. On a backend that numbered rows in the order transactions asked
// (a sequence) rather than the order they commit, the reader would
// sometimes see an id before a lower one became visible, and then skip
// the lower one for ever.
func TestContractFeedsNeverSkip(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := openTestStore(t, b), context.Background()
		const writers, changes = 6, 20
		must(t, st.createAccount(ctx, "owner", "o@acme.example", "acme", nil, false, hashSecret("k"), t0))
		for w := range writers {
			_, err := st.registerChannel(ctx, fmt.Sprint("ch-", w), fmt.Sprintf("acme/feed/w%d", w), "owner", t0)
			must(t, err)
			for i := range changes {
				id := fmt.Sprintf("m-%d-%d", w, i)
				must(t, st.createAccount(ctx, id, "m@acme.example", "acme", nil, true, hashSecret(id), t0))
			}
		}
		base, _, err := st.channelEventsSince(ctx, 0, 1000)
		must(t, err)
		var wg sync.WaitGroup
		errs := make(chan error, 2*writers)
		start := make(chan struct{})
		for w := range writers {
			wg.Go(func() {
				<-start
				ch := fmt.Sprintf("acme/feed/w%d", w)
				for i := range changes {
					id := fmt.Sprintf("m-%d-%d", w, i)
					if err := st.addMemberByOwner(ctx, ch, "owner", id, t0); err != nil {
						errs <- err
						return
					}
					if err := st.revoke(ctx, id, t0); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()

		events, revocations := int64(len(base)), int64(0)
		poll := func() {
			evs, _, err := st.channelEventsSince(ctx, events, 1000)
			must(t, err)
			for _, ev := range evs {
				if ev.ID != events+1 {
					t.Fatalf("channel feed: saw id %d after %d", ev.ID, events)
				}
				events = ev.ID
			}
			subs, next, err := st.revokedSince(ctx, revocations, 1000)
			must(t, err)
			if next != revocations+int64(len(subs)) {
				t.Fatalf("revocations: %d subs took the cursor from %d to %d", len(subs), revocations, next)
			}
			revocations = next
		}
		close(start)
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			poll()
		}
		poll()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if want := int64(len(base) + writers*changes); events != want {
			t.Fatalf("reader saw %d events, want %d", events, want)
		}
		if revocations != writers*changes {
			t.Fatalf("reader saw %d revocations, want %d", revocations, writers*changes)
		}
	})
}

// queue is st.join for tests that only care whether it succeeded.
func queue(st *store, ctx context.Context, p joinParams) error {
	_, err := st.join(ctx, p)
	return err
}

// seqIDs returns a newID for claimStock that hands out prefix-1,
// prefix-2, … (fresh ids again if the transaction runs again).
func seqIDs(prefix string) func() (string, error) {
	n := 0
	return func() (string, error) {
		n++
		return fmt.Sprintf("%s-%d", prefix, n), nil
	}
}

// kps returns n distinct key packages named after tag.
func kps(tag string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("kp %s %d", tag, i))
	}
	return out
}

func TestContractKeyPackageStock(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		must(t, st.createAccount(ctx, "stranger", "s@initech.example", "initech", nil, false, hashSecret("k-s"), t0))
		stockFixture(t, st, "stranger")

		// Hostile first: claims by an account that is not in the channel,
		// on a channel that does not exist, of oneself, of nobody, and of
		// an account with no stock.
		_, err := st.claimStock(ctx, "stranger", "joiner", ch, nil, seqIDs("c"), t0)
		wantErr(t, err, errNotAMember)
		_, err = st.claimStock(ctx, "owner", "joiner", "acme/no/such", nil, seqIDs("c"), t0)
		wantErr(t, err, errChannelNotFound)
		_, err = st.claimStock(ctx, "owner", "owner", ch, nil, seqIDs("c"), t0)
		wantErr(t, err, errSelfClaim)
		_, err = st.claimStock(ctx, "owner", "ghost", ch, nil, seqIDs("c"), t0)
		wantErr(t, err, errNotAllowed)
		_, err = st.claimStock(ctx, "owner", "joiner", ch, nil, seqIDs("c"), t0)
		wantErr(t, err, errNoKeyPackages)

		sc, err := st.putStock(ctx, "joiner", "laptop", personOf("joiner"), kps("laptop", 3), []byte("lr laptop"), t0)
		if err != nil || sc != (stockCount{"laptop", 3, true}) {
			t.Fatalf("put = %+v, %v", sc, err)
		}
		// Past the per-device cap: refused whole.
		_, err = st.putStock(ctx, "joiner", "laptop", personOf("joiner"), kps("more", MaxStockPerDevice-2), nil, t0)
		wantErr(t, err, errStockFull)
		sc, err = st.putStock(ctx, "joiner", "laptop", personOf("joiner"), kps("fill", MaxStockPerDevice-3), nil, t0)
		if err != nil || sc.oneTime != MaxStockPerDevice {
			t.Fatalf("filling to the cap = %+v, %v", sc, err)
		}
		_, err = st.putStock(ctx, "joiner", "laptop", personOf("joiner"), kps("one more", 1), nil, t0)
		wantErr(t, err, errStockFull)
		// A full device still takes a new last-resort key package, which
		// replaces the old one; an empty upload reports the stock.
		mustPut(t, st, "joiner", "laptop", nil, []byte("lr laptop 2"), t0)
		sc, err = st.putStock(ctx, "joiner", "laptop", personOf("joiner"), nil, nil, t0)
		if err != nil || sc != (stockCount{"laptop", MaxStockPerDevice, true}) {
			t.Fatalf("empty put = %+v, %v", sc, err)
		}
		// Past the device cap: refused, while the devices there take more.
		for i := 1; i < MaxStockDevices; i++ {
			mustPut(t, st, "joiner", fmt.Sprint("dev", i), nil, []byte("lr"), t0)
		}
		_, err = st.putStock(ctx, "joiner", "one too many", personOf("joiner"), kps("x", 1), nil, t0)
		wantErr(t, err, errStockFull)
		_, err = st.putStock(ctx, "joiner", "one too many", personOf("joiner"), nil, []byte("lr"), t0)
		wantErr(t, err, errStockFull)
		mustPut(t, st, "joiner", "dev1", kps("dev1", 1), nil, t0)
		// Another account's stock is its own.
		sc, err = st.putStock(ctx, "owner", "laptop", personOf("owner"), kps("owner", 1), nil, t0)
		if err != nil || sc != (stockCount{"laptop", 1, false}) {
			t.Fatalf("owner's stock = %+v, %v", sc, err)
		}

		devices, claims, err := st.stock(ctx, "joiner", 100)
		must(t, err)
		if len(devices) != MaxStockDevices || len(claims) != 0 {
			t.Fatalf("stock %+v, claims %+v", devices, claims)
		}
		if devices[0] != (stockCount{"dev1", 1, true}) || devices[9] != (stockCount{"laptop", MaxStockPerDevice, true}) {
			t.Fatalf("stock %+v", devices)
		}

		// The owner claims: one key package per device, the oldest
		// one-time one where there is one, else the last-resort one.
		got, err := st.claimStock(ctx, "owner", "joiner", ch, nil, seqIDs("c1"), t0)
		must(t, err)
		if len(got) != MaxStockDevices {
			t.Fatalf("%d claims, want one per device", len(got))
		}
		byDevice := map[string]claim{}
		for _, c := range got {
			byDevice[c.device] = c
		}
		if c := byDevice["laptop"]; string(c.keyPackage) != "kp laptop 0" || c.lastResort {
			t.Fatalf("laptop claim %+v", c)
		}
		if c := byDevice["dev1"]; string(c.keyPackage) != "kp dev1 0" || c.lastResort {
			t.Fatalf("dev1 claim %+v", c)
		}
		if c := byDevice["dev2"]; string(c.keyPackage) != "lr" || !c.lastResort {
			t.Fatalf("dev2 claim %+v", c)
		}
		// A member claims next: dev1's one-time stock is gone, so it gets
		// dev1's last-resort key package, which stays.
		must(t, st.addMemberByOwner(ctx, ch, "owner", "stranger", t0))
		for i := range 2 {
			got, err = st.claimStock(ctx, "stranger", "joiner", ch, nil, seqIDs(fmt.Sprint("c", i+2)), t0.Add(time.Second))
			must(t, err)
			for _, c := range got {
				if c.device == "dev1" && (string(c.keyPackage) != "lr" || !c.lastResort) {
					t.Fatalf("dev1 after its one-time stock ran out: %+v", c)
				}
				if c.device == "laptop" && string(c.keyPackage) != fmt.Sprint("kp laptop ", i+1) {
					t.Fatalf("laptop claim %d: %+v", i, c)
				}
			}
		}
		devices, claims, err = st.stock(ctx, "joiner", 100)
		must(t, err)
		if devices[0] != (stockCount{"dev1", 0, true}) || devices[9] != (stockCount{"laptop", MaxStockPerDevice - 3, true}) {
			t.Fatalf("stock after claims %+v", devices)
		}
		if len(claims) != 3*MaxStockDevices {
			t.Fatalf("%d claims recorded, want %d", len(claims), 3*MaxStockDevices)
		}
		first := claims[0]
		if first.claimedBy != "owner" || first.channel != ch || !first.at.Equal(t0) || claims[len(claims)-1].claimedBy != "stranger" {
			t.Fatalf("claims %+v … %+v", first, claims[len(claims)-1])
		}
		// The claimer's own stock shows none of this.
		if _, oc, err := st.stock(ctx, "owner", 100); err != nil || len(oc) != 0 {
			t.Fatalf("owner sees claims %+v, %v", oc, err)
		}
		_, claims, err = st.stock(ctx, "joiner", 5)
		if err != nil || len(claims) != 5 || claims[0] != first {
			t.Fatalf("a page of 5 claims: %+v, %v", claims, err)
		}

		// Acknowledging: only through one's own claims.
		wantErr(t, st.ackClaims(ctx, "owner", claims[1].id), errNotFound)
		wantErr(t, st.ackClaims(ctx, "joiner", "no such claim"), errNotFound)
		wantErr(t, st.ackClaims(ctx, "joiner", "\xff"), errNotFound)
		must(t, st.ackClaims(ctx, "joiner", claims[1].id))
		_, rest, err := st.stock(ctx, "joiner", 100)
		if err != nil || len(rest) != 3*MaxStockDevices-2 || rest[0] != claims[2] {
			t.Fatalf("after acking two: %d claims, first %+v, %v", len(rest), rest[0], err)
		}
		// Acknowledging again (or an older claim) changes nothing.
		must(t, st.ackClaims(ctx, "joiner", claims[0].id))
		if _, again, _ := st.stock(ctx, "joiner", 100); len(again) != len(rest) {
			t.Fatalf("re-ack changed the claims: %d, want %d", len(again), len(rest))
		}
	})
}

// personOf is the seat identity stockFixture registers for a test
// account.
func personOf(account string) string { return "did:key:z" + account }

// stockFixture registers a seat identity (personOf) for each account, so
// that it may upload stock, and lets the owner and the other accounts
// claim the joiner's (a channel of the joiner's that they are members
// of).
func stockFixture(t *testing.T, st *store, accounts ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := st.registerChannel(ctx, "ch-rel", "globex/rel/x", "joiner", t0); err != nil {
		t.Fatal(err)
	}
	for i, a := range append([]string{"owner", "joiner"}, accounts...) {
		org := map[string]string{"owner": "acme", "joiner": "globex"}[a]
		if org == "" {
			org = "initech"
		}
		must(t, st.registerSeat(ctx, fmt.Sprint("seat-", i), fmt.Sprint("ch-seat-", i), personOf(a), a, org+"/tally/"+a, hashSecret("sk-"+a), t0))
		if a != "joiner" {
			must(t, st.addMemberByOwner(ctx, "globex/rel/x", "joiner", a, t0))
		}
	}
}

// mustPut is putStock that must succeed.
func mustPut(t *testing.T, st *store, account, device string, oneTime [][]byte, lastResort []byte, now time.Time) {
	t.Helper()
	_, err := st.putStock(context.Background(), account, device, personOf(account), oneTime, lastResort, now)
	must(t, err)
}

func TestContractInbox(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		must(t, st.createAccount(ctx, "stranger", "s@initech.example", "initech", nil, false, hashSecret("k-s"), t0))
		must(t, st.createAccount(ctx, "member", "m@initech.example", "initech", nil, true, hashSecret("k-m"), t0))
		must(t, st.addMemberByOwner(ctx, ch, "owner", "member", t0))
		stockFixture(t, st, "member")
		mustPut(t, st, "joiner", "phone", nil, []byte("lr phone"), t0)
		got, err := st.claimStock(ctx, "owner", "joiner", ch, nil, seqIDs("c"), t0)
		must(t, err)
		claimID := got[0].id
		feedBefore, _, err := st.channelEventsSince(ctx, 0, 100)
		must(t, err)

		// Deliveries for a claim one did not make, for no claim, on the
		// wrong channel scope: not found, and nothing changes.
		for _, caller := range []string{"stranger", "member", "joiner"} {
			wantErr(t, st.deliver(ctx, "i0", claimID, caller, "", []byte("w"), t0), errNotFound)
		}
		wantErr(t, st.deliver(ctx, "i0", "no such claim", "owner", "", []byte("w"), t0), errNotFound)
		wantErr(t, st.deliver(ctx, "i0", "\xff", "owner", "", []byte("w"), t0), errNotFound)
		wantErr(t, st.deliver(ctx, "i0", claimID, "owner", "acme/other/x", []byte("w"), t0), errNotFound)

		must(t, st.deliver(ctx, "i1", claimID, "owner", ch, []byte("welcome 1"), t0.Add(time.Second)))
		// Replayed: refused, also once the target has deleted the entry.
		wantErr(t, st.deliver(ctx, "i2", claimID, "owner", "", []byte("again"), t0), errAlreadyDelivered)
		// A delivery makes nobody a member.
		if _, _, err := st.members(ctx, ch, "joiner"); !errors.Is(err, errNotMember) {
			t.Fatalf("a delivery made the target a member: %v", err)
		}
		if evs, _, err := st.channelEventsSince(ctx, int64(len(feedBefore)), 100); err != nil || len(evs) != 0 {
			t.Fatalf("feed after the delivery: %+v, %v", evs, err)
		}

		entries, more, err := st.inbox(ctx, "joiner", 0, 50, 4<<20)
		must(t, err)
		want := inboxEntry{seq: entries[0].seq, id: "i1", channel: ch, device: "phone", from: "owner", welcome: []byte("welcome 1"), at: t0.Add(time.Second)}
		if len(entries) != 1 || more || !reflect.DeepEqual(entries[0], want) {
			t.Fatalf("inbox %+v, want %+v", entries, want)
		}
		if others, _, err := st.inbox(ctx, "owner", 0, 50, 4<<20); err != nil || len(others) != 0 {
			t.Fatalf("the claimer's inbox: %+v, %v", others, err)
		}
		// Accepting: the person's own entry only, once; it makes them a
		// member (one member_added event) and drops the entry.
		_, err = st.acceptInbox(ctx, "owner", "i1", t0)
		wantErr(t, err, errNotFound)
		_, err = st.acceptInbox(ctx, "joiner", "\xff", t0)
		wantErr(t, err, errNotFound)
		if c, err := st.acceptInbox(ctx, "joiner", "i1", t0); err != nil || c != ch {
			t.Fatalf("accept = %q, %v", c, err)
		}
		_, err = st.acceptInbox(ctx, "joiner", "i1", t0)
		wantErr(t, err, errNotFound)
		if _, ms, err := st.members(ctx, ch, "joiner"); err != nil || len(ms) != 3 {
			t.Fatalf("members after the accept: %+v, %v", ms, err)
		}
		evs, _, err := st.channelEventsSince(ctx, int64(len(feedBefore)), 100)
		if err != nil || len(evs) != 1 || evs[0].Kind != feed.MemberAdded || evs[0].Account != "joiner" || evs[0].Channel != ch {
			t.Fatalf("feed after the accept: %+v, %v", evs, err)
		}
		wantErr(t, st.dropInboxEntry(ctx, "joiner", "i1"), errNotFound)
		wantErr(t, st.deliver(ctx, "i3", claimID, "owner", "", []byte("again"), t0), errAlreadyDelivered)
		must(t, st.dropMember(ctx, ch, "owner", "joiner", t0))

		// A claimer that left the channel since cannot deliver.
		got, err = st.claimStock(ctx, "member", "joiner", ch, nil, seqIDs("m"), t0)
		must(t, err)
		must(t, st.dropMember(ctx, ch, "member", "member", t0))
		wantErr(t, st.deliver(ctx, "i4", got[0].id, "member", "", []byte("w"), t0), errNotAMember)

		// One sender's share: MaxInboxPerSender entries, then it waits;
		// declining (dropping) one makes room.
		k := 0
		deliverNew := func(sender, id string, welcome []byte) error {
			t.Helper()
			k++
			got, err := st.claimStock(ctx, sender, "joiner", ch, nil, seqIDs(fmt.Sprint("q", k)), t0)
			must(t, err)
			return st.deliver(ctx, id, got[0].id, sender, "", welcome, t0)
		}
		for i := range MaxInboxPerSender {
			must(t, deliverNew("owner", fmt.Sprint("fill-", i), []byte("w")))
		}
		wantErr(t, deliverNew("owner", "over", []byte("w")), errSenderQuota)
		must(t, st.dropInboxEntry(ctx, "joiner", "fill-0"))
		must(t, deliverNew("owner", "over", []byte("w")))

		// Paging: by entries, and by bytes (a page holds one entry at least).
		page, more, err := st.inbox(ctx, "joiner", 0, 4, 4<<20)
		if err != nil || len(page) != 4 || !more || page[0].id != "fill-1" {
			t.Fatalf("a page of 4: %d entries, more %v, %v", len(page), more, err)
		}
		rest, more, err := st.inbox(ctx, "joiner", page[3].seq, 50, 4<<20)
		if err != nil || len(rest) != MaxInboxPerSender-4 || more || rest[len(rest)-1].id != "over" {
			t.Fatalf("the page after: %d entries, more %v, %v", len(rest), more, err)
		}
		if one, more, err := st.inbox(ctx, "joiner", 0, 50, 0); err != nil || len(one) != 1 || !more {
			t.Fatalf("a page of no bytes: %d entries, more %v, %v", len(one), more, err)
		}

		// The sweep deletes entries and claims past the inbox retention.
		n, err := st.sweepInbox(ctx, t0.Add(30*24*time.Hour), 30*24*time.Hour)
		if err != nil || n != 0 {
			t.Fatalf("sweep at the retention: %d, %v", n, err)
		}
		n, err = st.sweepInbox(ctx, t0.Add(30*24*time.Hour+2*time.Second), 30*24*time.Hour)
		must(t, err)
		if entries, _, _ := st.inbox(ctx, "joiner", 0, 50, 4<<20); len(entries) != 0 || n == 0 {
			t.Fatalf("after the sweep: %d entries left, %d rows swept", len(entries), n)
		}
		if _, claims, _ := st.stock(ctx, "joiner", 100); len(claims) != 0 {
			t.Fatalf("after the sweep: %d claims left", len(claims))
		}
		wantErr(t, st.deliver(ctx, "late", claimID, "owner", "", []byte("w"), t0), errNotFound)
	})
}

// TestContractInboxBytes: one sender holds at most MaxInboxSenderBytes of
// an inbox, and an inbox at most MaxInboxBytes, whatever the senders.
func TestContractInboxBytes(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		senders := []string{"owner"}
		for i := range MaxInboxBytes / MaxInboxSenderBytes {
			id := fmt.Sprint("s", i)
			must(t, st.createAccount(ctx, id, id+"@initech.example", "initech", nil, true, hashSecret("k-"+id), t0))
			must(t, st.addMemberByOwner(ctx, ch, "owner", id, t0))
			senders = append(senders, id)
		}
		stockFixture(t, st, senders[1:]...)
		mustPut(t, st, "joiner", "phone", nil, []byte("lr phone"), t0)
		n := 0
		deliverNew := func(sender string, size int) error {
			t.Helper()
			n++
			got, err := st.claimStock(ctx, sender, "joiner", ch, nil, seqIDs(fmt.Sprint("b", n)), t0)
			must(t, err)
			return st.deliver(ctx, fmt.Sprint("e", n), got[0].id, sender, "", make([]byte, size), t0)
		}
		big := MaxInboxSenderBytes / 2
		must(t, deliverNew("owner", big))
		must(t, deliverNew("owner", big))
		wantErr(t, deliverNew("owner", 1), errSenderQuota)
		for _, s := range senders[1 : len(senders)-1] {
			must(t, deliverNew(s, big))
			must(t, deliverNew(s, big))
		}
		// The inbox is full now (8 senders' full shares): the last sender
		// is refused for the inbox, not for its share.
		wantErr(t, deliverNew(senders[len(senders)-1], 1), errInboxFull)
		page, more, err := st.inbox(ctx, "joiner", 0, 50, 4<<20)
		if err != nil || len(page) != 4 || !more {
			t.Fatalf("a page of 1 MiB Welcomes: %d entries, more %v, %v", len(page), more, err)
		}
	})
}

func TestContractGroupInfo(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		wantErr(t, st.putGroupInfo(ctx, ch, "joiner", 1, []byte("gi"), -1, t0), errNotAMember)
		_, err := st.getGroupInfo(ctx, ch, "joiner")
		wantErr(t, err, errNotAMember)
		wantErr(t, st.putGroupInfo(ctx, "acme/no/such", "owner", 1, []byte("gi"), -1, t0), errChannelNotFound)
		_, err = st.getGroupInfo(ctx, ch, "owner")
		wantErr(t, err, errNotFound)

		must(t, st.putGroupInfo(ctx, ch, "owner", 5, []byte("gi 5"), -1, t0))
		must(t, st.addMemberByOwner(ctx, ch, "owner", "joiner", t0))
		// An equal epoch replaces (a retry), a lower one is refused with
		// the epoch kept, a higher one wins.
		must(t, st.putGroupInfo(ctx, ch, "joiner", 5, []byte("gi 5 again"), -1, t0))
		err = st.putGroupInfo(ctx, ch, "joiner", 4, []byte("gi 4"), -1, t0)
		var se *staleEpochError
		if !errors.As(err, &se) || se.epoch != 5 || !errors.Is(err, errStaleEpoch) {
			t.Fatalf("a lower epoch: %v", err)
		}
		gi, err := st.getGroupInfo(ctx, ch, "joiner")
		if err != nil || gi.epoch != 5 || string(gi.data) != "gi 5 again" {
			t.Fatalf("kept %+v, %v", gi, err)
		}
		must(t, st.putGroupInfo(ctx, ch, "joiner", 1<<40, []byte("gi big"), -1, t0))
		err = st.putGroupInfo(ctx, ch, "owner", 5, []byte("gi 5"), -1, t0)
		if !errors.As(err, &se) || se.epoch != 1<<40 {
			t.Fatalf("after a higher epoch: %v", err)
		}
		// One found beyond the fence is replaced when named.
		must(t, st.putGroupInfo(ctx, ch, "owner", 5, []byte("gi 5 owner"), 1<<40, t0))
		if gi, err := st.getGroupInfo(ctx, ch, "joiner"); err != nil || gi.epoch != 5 || string(gi.data) != "gi 5 owner" {
			t.Fatalf("after replacing the one beyond the fence: %+v, %v", gi, err)
		}
		must(t, st.putGroupInfo(ctx, ch, "joiner", 6, []byte("gi 6"), -1, t0))
		// A member that left can no longer read it, and what it put is gone.
		must(t, st.dropMember(ctx, ch, "joiner", "joiner", t0))
		_, err = st.getGroupInfo(ctx, ch, "joiner")
		wantErr(t, err, errNotAMember)
		_, err = st.getGroupInfo(ctx, ch, "owner")
		wantErr(t, err, errNotFound)
		wantErr(t, st.putGroupInfo(ctx, ch, "joiner", 6, []byte("gi 6"), -1, t0), errNotAMember)
	})
}

func TestContractAutoInvites(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		const ch = "acme/a/b"
		for _, id := range []string{"j2", "j3"} {
			must(t, st.createAccount(ctx, id, id+"@globex.example", "globex", nil, true, hashSecret("k-"+id), t0))
		}
		must(t, st.createInvite(ctx, ch, "owner", hashSecret("auto"), 2, true, t0.Add(time.Hour), t0))
		must(t, st.createInvite(ctx, ch, "owner", hashSecret("manual"), 1, false, t0.Add(time.Hour), t0))
		p := func(id, account string, inv []byte, kp []byte) joinParams {
			return joinParams{id: id, channel: ch, caller: principal{account: account, org: "globex"}, inviteHash: inv,
				identity: "did:key:" + id, keyPackage: kp, maxPending: 10, now: t0}
		}

		// Without a key package, a manual invite is refused and its use
		// kept; an auto one admits at once.
		_, err := st.join(ctx, p("r0", "joiner", hashSecret("manual"), nil))
		wantErr(t, err, errKeyPackageRequired)
		j, err := st.join(ctx, p("r1", "joiner", hashSecret("auto"), nil))
		if err != nil || !j.auto || j.groupInfo != nil {
			t.Fatalf("auto join = %+v, %v", j, err)
		}
		if _, ms, err := st.members(ctx, ch, "joiner"); err != nil || len(ms) != 2 {
			t.Fatalf("members after the auto join: %+v, %v", ms, err)
		}
		if reqs, err := st.pending(ctx, ch, "owner"); err != nil || len(reqs) != 0 {
			t.Fatalf("an auto join is pending for the owner: %+v, %v", reqs, err)
		}
		status, welcome, err := st.requestStatus(ctx, "r1", "joiner", "")
		if err != nil || status != "completed" || welcome != nil {
			t.Fatalf("auto request status %q %q, %v", status, welcome, err)
		}
		must(t, st.putGroupInfo(ctx, ch, "joiner", 3, []byte("gi 3"), -1, t0))
		j, err = st.join(ctx, p("r2", "j2", hashSecret("auto"), []byte("kp j2")))
		if err != nil || !j.auto || j.groupInfo == nil || j.groupInfo.epoch != 3 || string(j.groupInfo.data) != "gi 3" {
			t.Fatalf("auto join with a GroupInfo = %+v, %v", j, err)
		}
		// Used up.
		_, err = st.join(ctx, p("r3", "j3", hashSecret("auto"), nil))
		wantErr(t, err, errInviteInvalid)
		if _, _, err := st.members(ctx, ch, "j3"); !errors.Is(err, errNotMember) {
			t.Fatalf("a refused auto join made a member: %v", err)
		}
		// The manual invite's use was kept: it still queues a request.
		j, err = st.join(ctx, p("r4", "j3", hashSecret("manual"), []byte("kp j3")))
		if err != nil || j.auto {
			t.Fatalf("manual join = %+v, %v", j, err)
		}
		if reqs, err := st.pending(ctx, ch, "owner"); err != nil || len(reqs) != 1 || reqs[0].id != "r4" {
			t.Fatalf("pending %+v, %v", reqs, err)
		}

		// Auto federation invites: still for their org only.
		must(t, st.createFederationInvite(ctx, ch, "owner", "globex", hashSecret("fed auto"), 5, true, t0.Add(time.Hour), t0))
		fp := p("f1", "owner", nil, nil)
		fp.fedHash, fp.caller = hashSecret("fed auto"), principal{account: "owner", org: "acme"}
		_, err = st.join(ctx, fp)
		wantErr(t, err, errFederationDenied)
		fp.caller = principal{account: "j3", org: "globex"}
		if j, err := st.join(ctx, fp); err != nil || !j.auto || j.groupInfo == nil {
			t.Fatalf("auto federated join = %+v, %v", j, err)
		}
		if _, _, err := st.members(ctx, ch, "j3"); err != nil {
			t.Fatalf("the federated auto joiner is not a member: %v", err)
		}
	})
}

// TestContractStockAccount: a claim by identity names the account whose
// seat registered the person's did:key (the identity, or its part before
// "#"); an identity no seat registered is answered as a stranger is, and
// stock uploaded by anyone else under it changes nothing.
func TestContractStockAccount(t *testing.T) {
	forBackends(t, func(t *testing.T, b testBackend) {
		st, ctx := fixture(t, b)
		must(t, st.createAccount(ctx, "stranger", "s@initech.example", "initech", nil, false, hashSecret("k-s"), t0))
		_, err := st.stockAccount(ctx, "owner", "acme/a/b", personOf("joiner"))
		wantErr(t, err, errNotAllowed)
		stockFixture(t, st)
		// A stranger to the channel learns nothing.
		_, err = st.stockAccount(ctx, "stranger", "acme/a/b", personOf("joiner"))
		wantErr(t, err, errNotAMember)
		for _, id := range []string{personOf("joiner"), personOf("joiner") + "#dev:zSig"} {
			if a, err := st.stockAccount(ctx, "owner", "acme/a/b", id); err != nil || a != "joiner" {
				t.Fatalf("%s: %q %v", id, a, err)
			}
		}
		// A prefix that is not a person's whole did names nobody.
		_, err = st.stockAccount(ctx, "owner", "acme/a/b", "did:key:zjoin")
		wantErr(t, err, errNotAllowed)
		// Stock under another account's identity is refused.
		_, err = st.putStock(ctx, "owner", personOf("joiner")+"#dev:zOther", personOf("joiner"), kps("c", 1), nil, t0)
		wantErr(t, err, errIdentityNotYours)
		if a, err := st.stockAccount(ctx, "owner", "acme/a/b", personOf("joiner")); err != nil || a != "joiner" {
			t.Fatalf("after the refused upload: %q %v", a, err)
		}
	})
}
