package seat_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestUsedInviteAdmitsNobody: a plain member that joined with a one-use
// auto invite publishes, with the same token, the external Commit of an
// outsider that lent it its key, from the GroupInfo it may fetch. The
// invite is used up in the room itself, so every member refuses the
// outsider, and the room goes on without it.
func TestUsedInviteAdmitsNobody(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	if _, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatalf("carol's join by the auto invite: %v", err)
	}
	want := dids(alice, bob, carol)
	if got := identities(t, bob, room); !slices.Equal(got, want) {
		t.Fatalf("bob's roster: %v, want %v", got, want)
	}

	dave := newMember(t, st, "daveco")
	if err := seat.ForgeInviteJoin(carol.Seat, dave.Seat, ctx, room, tok); err != nil {
		t.Fatalf("carol's publish of dave's join: %v", err)
	}
	for _, m := range []*member{alice, bob, carol} {
		if got := identities(t, m, room); !slices.Equal(got, want) {
			t.Fatalf("%s's roster after the forged join: %v, want %v", m.did, got, want)
		}
	}
	converse(t, room, bob, carol, "still three of us?", "still three")
}

// TestInviteLimitsHeldByMembers: the members count an auto invite's uses
// and watch its lifetime themselves, so a directory that miscounts, or
// keeps an invite alive past its time, admits nobody to the room.
func TestInviteLimitsHeldByMembers(t *testing.T) {
	ctx := context.Background()

	t.Run("a use beyond max_uses", func(t *testing.T) {
		st := skytaletest.NewStack(t)
		alice, bob, room := roomOfTwo(t, st, "ops")
		tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 2, TTL: 0, Auto: true})
		if err != nil {
			t.Fatal(err)
		}
		carol, dave := newMember(t, st, "carolco"), newMember(t, st, "daveco")
		for _, m := range []*member{carol, dave} {
			if _, err := m.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
				t.Fatalf("%s's join, one of the two uses: %v", m.did, err)
			}
		}
		want := dids(alice, bob, carol, dave)
		if got := identities(t, bob, room); !slices.Equal(got, want) {
			t.Fatalf("bob's roster: %v, want %v", got, want)
		}

		// The directory miscounts: it lets a third use through.
		proxy, joiner := miscountingProxy(t, st.APIURL, alice.acct.APIKey)
		erin := newMemberAt(t, st, proxy, "erinco")
		joiner(erin.acct.AccountID)
		if _, err := erin.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err == nil {
			t.Fatal("erin's own seat joined by a used-up invite")
		}
		// Erin's software goes on anyway, with the membership the
		// directory gave it.
		if err := seat.ForgeInviteJoin(erin.Seat, erin.Seat, ctx, room, tok); err != nil {
			t.Fatalf("erin's forged join: %v", err)
		}
		for _, m := range []*member{alice, bob, carol, dave} {
			if got := identities(t, m, room); !slices.Equal(got, want) {
				t.Fatalf("%s's roster after a third use: %v, want %v", m.did, got, want)
			}
		}
	})

	t.Run("a use after expiry", func(t *testing.T) {
		st := skytaletest.NewStack(t)
		alice, bob, room := roomOfTwo(t, st, "ops")
		tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 5, TTL: time.Hour, Auto: true})
		if err != nil {
			t.Fatal(err)
		}
		// The directory's clock says the invite is good; the members'
		// say its hour (and the slack) is over.
		later := func() time.Time { return time.Now().Add(2 * time.Hour) }
		alice.Close(context.Background())
		bob.Close(context.Background())
		alice2 := &member{Seat: openSeatClock(t, st, alice.home, later), did: alice.did, acct: alice.acct, home: alice.home}
		bob2 := &member{Seat: openSeatClock(t, st, bob.home, later), did: bob.did, acct: bob.acct, home: bob.home}
		carol := newMember(t, st, "carolco")
		if _, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
			t.Fatalf("carol's join (her Commit goes out): %v", err)
		}
		want := dids(alice, bob)
		for _, m := range []*member{alice2, bob2} {
			if got := identities(t, m, room); !slices.Equal(got, want) {
				t.Fatalf("%s's roster after a join past the invite's time: %v, want %v", m.did, got, want)
			}
		}
	})
}

// openSeatClock is openSeat with the seat's clock now.
func openSeatClock(t *testing.T, st *skytaletest.Stack, home string, now func() time.Time) *seat.Seat {
	t.Helper()
	s, err := seat.Open(context.Background(), seat.Config{Home: home, APIURL: st.APIURL, RelayURL: st.RelayURL, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// miscountingProxy is a directory in front of the real one that lets
// every refused join through as an auto join: with the owner's key
// (ownerKey) it makes the joiner's account (set with the returned
// function) a member and hands it the GroupInfo, as a directory that
// kept the invite or miscounts its uses would.
func miscountingProxy(t *testing.T, apiURL, ownerKey string) (string, func(account string)) {
	t.Helper()
	target, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var account string
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/v1/channels/join" {
			rp.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		if rec.Code == http.StatusCreated {
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		var req struct {
			Channel string `json:"channel"`
		}
		json.Unmarshal(body, &req)
		mu.Lock()
		acct := account
		mu.Unlock()
		dc := &seat.DirectoryClient{BaseURL: apiURL, Credential: ownerKey}
		if err := dc.AddMember(r.Context(), req.Channel, acct); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		epoch, gi, err := dc.GroupInfo(r.Context(), req.Channel)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"request_id": "let-through", "auto": true, "epoch": epoch, "group_info": gi})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func(a string) {
		mu.Lock()
		account = a
		mu.Unlock()
	}
}

// TestRemovedInviteJoinerIsOut: a member that joined by auto invite and is
// removed loses its account's membership of the channel with the removal
// (the relay refuses it), and every way back is closed: its rejoin and its
// join with the old token get ErrRemovedRoom from the directory, and when
// a directory lets the join through anyway, every member refuses it,
// since the room remembers who used the invite.
func TestRemovedInviteJoinerIsOut(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 3, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	if _, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatal(err)
	}
	rm, err := alice.Room(room).Remove(ctx, carol.did)
	if err != nil {
		t.Fatal(err)
	}
	if !rm.MembershipEnded || rm.AccountID != carol.acct.AccountID {
		t.Fatalf("the removal: %+v, want carol's account %s ended", rm, carol.acct.AccountID)
	}
	if got, want := memberAccounts(t, st, alice, room), sorted(alice.acct.AccountID, bob.acct.AccountID); !slices.Equal(got, want) {
		t.Fatalf("channel members after the removal: %v, want %v", got, want)
	}
	if _, err := carol.Room(room).Send(ctx, "still here?"); err == nil {
		t.Fatal("the relay took a removed member's publish")
	}
	if err := carol.Room(room).Rejoin(ctx); !errors.Is(err, seat.ErrRemovedRoom) {
		t.Fatalf("the removed member's rejoin: %v, want ErrRemovedRoom", err)
	}
	if err := carol.Room(room).Leave(ctx); err != nil {
		t.Fatalf("forgetting the room: %v", err)
	}
	if _, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrRemovedRoom) {
		t.Fatalf("the removed member's join with its old token: %v, want ErrRemovedRoom", err)
	}

	// A directory that lets it through: carol's own seat stops, and her
	// software going on is refused by every member.
	proxy, joiner := miscountingProxy(t, st.APIURL, alice.acct.APIKey)
	joiner(carol.acct.AccountID)
	carol.Close(context.Background())
	back := &member{Seat: openSeatAt(t, st, proxy, carol.home), did: carol.did, acct: carol.acct, home: carol.home}
	if _, err := back.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrInviteUsed) {
		t.Fatalf("carol's own seat with a directory that lets her in: %v, want ErrInviteUsed", err)
	}
	if err := seat.ForgeInviteJoin(back.Seat, back.Seat, ctx, room, tok); err != nil {
		t.Fatalf("carol's forged rejoin: %v", err)
	}
	want := dids(alice, bob)
	for _, m := range []*member{alice, bob} {
		if got := identities(t, m, room); !slices.Equal(got, want) {
			t.Fatalf("%s's roster after carol's rejoin by her invite: %v, want %v", m.did, got, want)
		}
	}
	converse(t, room, alice, bob, "just us", "just us")
}

// TestAdminRemovalEndsMembership: an admin removes a member that joined
// by auto invite; only the owner may end memberships at the directory, and
// the owner's seat does when it reads the removal, after which the
// removed member is out at the relay and the directory too.
func TestAdminRemovalEndsMembership(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	if err := alice.Room(room).AddAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	if _, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatal(err)
	}
	if rm, err := bob.Room(room).Remove(ctx, carol.did); err != nil || !rm.OwnerEnds || rm.MembershipEnded {
		t.Fatalf("the admin's removal: %+v %v", rm, err)
	}
	if got := identities(t, alice, room); !slices.Equal(got, dids(alice, bob)) {
		t.Fatalf("alice's roster: %v", got)
	}
	if got, want := memberAccounts(t, st, alice, room), sorted(alice.acct.AccountID, bob.acct.AccountID); !slices.Equal(got, want) {
		t.Fatalf("channel members once the owner read the removal: %v, want %v", got, want)
	}
	if err := carol.Room(room).Rejoin(ctx); !errors.Is(err, seat.ErrRemovedRoom) {
		t.Fatalf("the removed member's rejoin: %v, want ErrRemovedRoom", err)
	}
}

// TestDirectoryCannotForgeInvites: the inviting seat makes an auto
// invite's token, and the directory sees only what counts its uses. A
// directory that kept everything it was given and saw (every request
// and answer of the invite and the join through it) and that can make
// anyone a member still cannot produce a join the room admits: every
// string it holds, taken as a token or as the secret of one, yields a key
// the room does not list.
func TestDirectoryCannotForgeInvites(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	proxy, seen := recordingProxy(t, st.APIURL)
	alice := newMemberAt(t, st, proxy, "acme")
	bob := newMember(t, st, "bobco")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	join(t, alice, bob, room)
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 2, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMemberAt(t, st, proxy, "carolco")
	if _, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatal(err)
	}
	want := dids(alice, bob, carol)

	var candidates []string
	var sawToken bool
	for _, s := range seen() {
		if strings.Contains(s, strings.TrimPrefix(tok, "skt_room_")) {
			t.Fatalf("the directory saw the invite's secret: %q", s)
		}
		sawToken = sawToken || strings.HasPrefix(s, "skt_inv_")
		candidates = append(candidates, s)
		for _, dec := range []func(string) ([]byte, error){base64.StdEncoding.DecodeString, base64.RawURLEncoding.DecodeString} {
			if b, err := dec(strings.TrimPrefix(s, "skt_inv_")); err == nil && len(b) == 32 {
				candidates = append(candidates, "skt_room_"+base64.RawURLEncoding.EncodeToString(b))
			}
		}
	}
	if !sawToken {
		t.Fatal("the directory saw no invite token: the test looks at the wrong traffic")
	}
	// The directory makes dave a member, and dave tries each.
	dave := newMember(t, st, "daveco")
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: alice.acct.APIKey}
	if err := dc.AddMember(ctx, room, dave.acct.AccountID); err != nil {
		t.Fatal(err)
	}
	for _, c := range candidates {
		for attempt := 0; ; attempt++ {
			err := seat.ForgeInviteJoin(dave.Seat, dave.Seat, ctx, room, c)
			if err == nil {
				break
			}
			if !errors.Is(err, seat.ErrStaleEpoch) || attempt == 50 {
				t.Fatalf("the join forged from %q did not go out: %v", c, err)
			}
			// The owner resets the fence the last refused join moved.
			identities(t, alice, room)
			// Time passes for the reset to reach the relay: another
			// attempt at once would only move the fence again.
			time.Sleep(20 * time.Millisecond)
		}
		for _, m := range []*member{alice, bob} {
			if got := identities(t, m, room); !slices.Equal(got, want) {
				t.Fatalf("%s admitted a join forged from %q: %v", m.did, c, got)
			}
		}
	}
}

// recordingProxy is a directory in front of the real one that keeps every
// value of a token field (token, token_hash, ...) of every JSON request and
// answer that passes it: what a directory could keep of an invite.
func recordingProxy(t *testing.T, apiURL string) (string, func() []string) {
	t.Helper()
	target, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kept []string
	keep := func(b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		var walk func(key string, v any)
		walk = func(key string, v any) {
			switch x := v.(type) {
			case string:
				if strings.Contains(key, "token") && !slices.Contains(kept, x) {
					kept = append(kept, x)
				}
			case []any:
				for _, e := range x {
					walk(key, e)
				}
			case map[string]any:
				for k, e := range x {
					walk(k, e)
				}
			}
		}
		mu.Lock()
		walk("", v)
		mu.Unlock()
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		keep(body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		rp.ServeHTTP(rec, r)
		keep(rec.Body.Bytes())
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(kept)
	}
}

// TestRemovedPersonBarredFromEveryInvite: a removed person that knows the
// token of another invite the room listed at its removal (one it never
// used, say shared in the room) is refused by every member even when the
// directory lets it through, and by the directory itself; an invite made
// after the removal admits it again.
func TestRemovedPersonBarredFromEveryInvite(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	first, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	if _, err := carol.Room(room).Join(ctx, first, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatal(err)
	}
	shared, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 5, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room(room).Remove(ctx, carol.did); err != nil {
		t.Fatal(err)
	}
	if err := carol.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Room(room).Join(ctx, shared, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrRemovedRoom) {
		t.Fatalf("the directory's answer to the removed person: %v, want ErrRemovedRoom", err)
	}
	proxy, joiner := miscountingProxy(t, st.APIURL, alice.acct.APIKey)
	joiner(carol.acct.AccountID)
	carol.Close(context.Background())
	back := &member{Seat: openSeatAt(t, st, proxy, carol.home), did: carol.did, acct: carol.acct, home: carol.home}
	if _, err := back.Room(room).Join(ctx, shared, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrRemovedRoom) {
		t.Fatalf("carol's own seat, let through: %v, want ErrRemovedRoom", err)
	}
	if err := seat.ForgeInviteJoin(back.Seat, back.Seat, ctx, room, shared); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*member{alice, bob} {
		if got := identities(t, m, room); !slices.Equal(got, dids(alice, bob)) {
			t.Fatalf("%s's roster after the removed person's join by another invite: %v", m.did, got)
		}
	}

	// Alice invites her again, on purpose.
	again, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	back.Close(context.Background())
	carol2 := &member{Seat: openSeat(t, st, carol.home), did: carol.did, acct: carol.acct, home: carol.home}
	if err := carol2.Room(room).Leave(ctx); err != nil && !errors.Is(err, seat.ErrNoRoom) {
		t.Fatal(err)
	}
	if _, err := carol2.Room(room).Join(ctx, again, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatalf("the join by an invite made after the removal: %v", err)
	}
	if got := identities(t, bob, room); !slices.Equal(got, dids(alice, bob, carol)) {
		t.Fatalf("bob's roster after carol's invited return: %v", got)
	}
}

// TestInviteJoinerThatLiedIsRemoved: carol holds an auto invite, names at
// the directory another key of hers (one the directory's proof check
// lets through, and that never joins), and joins the room as herself, an
// identity the directory never tied to her account: a removal of it could
// not end her membership. The first
// seat that may remove members and reads her join (an admin's here, the
// owner's in the second part) removes her at once; every member's roster
// is without her, and the invite does not take her back (the removal
// bars her from it). An honest joiner by the same invite stays, and the room
// goes on.
func TestInviteJoinerThatLiedIsRemoved(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	if err := alice.Room(room).AddAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 5, TTL: 0, Auto: true})
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	if _, err := seat.LieAtInviteJoinAs(carol.Seat, ctx, room, tok, newKey(t)); err != nil {
		t.Fatalf("the lying join: %v", err)
	}
	want := dids(alice, bob)
	if got := identities(t, bob, room); !slices.Equal(got, want) {
		t.Fatalf("the admin's roster once it read the lying join: %v, want %v", got, want)
	}
	if got := identities(t, alice, room); !slices.Equal(got, want) {
		t.Fatalf("the owner's roster: %v, want %v", got, want)
	}
	if err := seat.ForgeInviteJoin(carol.Seat, carol.Seat, ctx, room, tok); err != nil {
		t.Fatalf("the liar's second join: %v", err)
	}
	if got := identities(t, alice, room); !slices.Equal(got, want) {
		t.Fatalf("the owner's roster after the liar's second join by the invite: %v, want %v", got, want)
	}

	// The owner's seat does the same when it is the first to read.
	frank := newMember(t, st, "frankco")
	if _, err := seat.LieAtInviteJoinAs(frank.Seat, ctx, room, tok, newKey(t)); err != nil {
		t.Fatalf("the second lying join: %v", err)
	}
	if got := identities(t, alice, room); !slices.Equal(got, want) {
		t.Fatalf("the owner's roster once it read the second lying join: %v, want %v", got, want)
	}
	if got := identities(t, bob, room); !slices.Equal(got, want) {
		t.Fatalf("the admin's roster: %v, want %v", got, want)
	}

	// An honest joiner by the same invite stays, and an admin's removal
	// of it ends its membership once the owner reads it.
	erin := newMember(t, st, "erinco")
	if _, err := erin.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
		t.Fatal(err)
	}
	want = dids(alice, bob, erin)
	for _, m := range []*member{bob, alice, erin} {
		if got := identities(t, m, room); !slices.Equal(got, want) {
			t.Fatalf("%s's roster after the honest join: %v, want %v", m.did, got, want)
		}
	}
	converse(t, room, erin, bob, "hello", "welcome")
	if rm, err := bob.Room(room).Remove(ctx, erin.did); err != nil || !rm.OwnerEnds {
		t.Fatalf("the admin's removal of the honest joiner: %+v %v", rm, err)
	}
	identities(t, alice, room)
	if got := memberAccounts(t, st, alice, room); slices.Contains(got, erin.acct.AccountID) {
		t.Fatalf("channel members once the owner read the removal: %v, still erin's account", got)
	}
}

// newKey is a fresh Ed25519 key: a second identity a person holds.
func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
