package seat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// claimSwapProxy is a directory in front of the real one that rewrites
// the answers of POST /v1/keypackages/claim with swap (when set): the
// "malicious server" of the tests below.
func claimSwapProxy(t *testing.T, apiURL string, swap *atomic.Pointer[func([]seat.Claim) []seat.Claim]) string {
	t.Helper()
	u, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		f := swap.Load()
		if resp.Request.URL.Path != "/v1/keypackages/claim" || resp.StatusCode != 200 || f == nil {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var body struct {
			Claims []seat.Claim `json:"claims"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			return err
		}
		body.Claims = (*f)(body.Claims)
		b, _ = json.Marshal(body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ts := httptest.NewServer(rp)
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestRoomAddRefusesAnotherPersonsOffer: a directory that answers a claim
// for dave with mallory's offer (under dave's device name, under
// mallory's own, or beside dave's real one when dave is asked for by
// account) gets nobody into the room: RoomAdd fails with
// ErrNotThePerson and the room still has its one member. The same add
// through the honest directory adds dave.
func TestRoomAddRefusesAnotherPersonsOffer(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	var swap atomic.Pointer[func([]seat.Claim) []seat.Claim]
	alice := newMemberAt(t, st, claimSwapProxy(t, st.APIURL, &swap), "acme")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := alice.Room(room).Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dave := newMember(t, st, "daveco")
	mallory := newMember(t, st, "malco")
	daveTok, err := dave.ContactToken(ctx, time.Hour, 10)
	if err != nil {
		t.Fatal(err)
	}
	// One of mallory's real offers, as the proxy will hand it out.
	malTok := addToken(t, mallory)
	mal, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: alice.acct.APIKey}).ClaimKeyPackagesWith(ctx, "", ch, malTok)
	if err != nil || len(mal) != 1 {
		t.Fatalf("mallory's offer: %+v %v", mal, err)
	}
	cases := []struct {
		name   string
		person string
		swap   func([]seat.Claim) []seat.Claim
	}{
		{"mallory's offer under dave's device name", dave.did, func(cs []seat.Claim) []seat.Claim {
			cs[0].KeyPackage = mal[0].KeyPackage
			return cs
		}},
		{"mallory's offer under her own name, dave asked by did", dave.did, func(cs []seat.Claim) []seat.Claim {
			return []seat.Claim{mal[0]}
		}},
		{"mallory's offer beside dave's, dave asked by account", dave.acct.AccountID, func(cs []seat.Claim) []seat.Claim {
			return append(cs, mal[0])
		}},
		{"a made-up offer", dave.acct.AccountID, func(cs []seat.Claim) []seat.Claim {
			cs[0].KeyPackage = []byte("not a key package")
			return cs
		}},
	}
	for _, c := range cases {
		f := c.swap
		swap.Store(&f)
		added, err := alice.Room(room).Add(ctx, c.person, &seat.AddOptions{Token: daveTok.Token})
		if !errors.Is(err, seat.ErrNotThePerson) || len(added) != 0 {
			t.Fatalf("%s: %+v %v", c.name, added, err)
		}
		if ms, _, err := roomMembers(alice, ctx, room); err != nil || len(ms) != 1 {
			t.Fatalf("%s: the room has %d members (%v)", c.name, len(ms), err)
		}
	}
	swap.Store(nil)
	added, err := alice.Room(room).Add(ctx, dave.did, &seat.AddOptions{Token: daveTok.Token})
	if err != nil || len(added) != 1 || added[0].Identity != dave.did {
		t.Fatalf("the honest add: %+v %v", added, err)
	}
	// Added by did:key with his token, dave's account is still known to
	// alice's seat: removing him ends his channel membership.
	if joined, err := dave.ProcessInbox(ctx); err != nil || len(joined) != 1 {
		t.Fatalf("dave's inbox: %v %v", joined, err)
	}
	rm, err := alice.Room(room).Remove(ctx, dave.did)
	if err != nil || rm.AccountID != dave.acct.AccountID || !rm.MembershipEnded {
		t.Fatalf("removing dave: %+v %v", rm, err)
	}
}

// TestRoomPendingAndDecline: being added to two rooms makes dave a member
// of neither until his seat accepts; he lists both as pending, declines
// one (the adder sees nothing of it), and his next arrivals join the other
// only, which makes him a member of it.
func TestRoomPendingAndDecline(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, dave, tok := aliceAndDave(t, st, 2)
	var rooms []string
	for _, name := range []string{"ops", "noise"} {
		room, err := alice.Room(name).Create(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if added, err := alice.Room(room).Add(ctx, dave.acct.AccountID, &seat.AddOptions{Token: tok.Token}); err != nil || len(added) != 1 {
			t.Fatalf("adding dave to %s: %+v %v", name, added, err)
		}
		rooms = append(rooms, room)
	}
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: dave.acct.APIKey}
	for _, r := range rooms {
		if _, err := dc.Members(ctx, r); !errors.Is(err, seat.ErrNotMember) {
			t.Fatalf("dave is a member of %s before accepting: %v", r, err)
		}
	}
	pending, err := dave.PendingRooms(ctx)
	if err != nil || len(pending) != 2 || pending[0].Channel != rooms[0] || pending[1].Channel != rooms[1] || pending[0].From != alice.acct.AccountID {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	if n, err := dave.Room(rooms[1]).Decline(ctx); err != nil || n != 1 {
		t.Fatalf("decline: %d %v", n, err)
	}
	if _, err := dave.Room(rooms[1]).Decline(ctx); !errors.Is(err, seat.ErrNotPending) {
		t.Fatalf("declining again: %v", err)
	}
	if joined := dave.Arrivals(ctx); len(joined) != 1 || joined[0] != rooms[0] {
		t.Fatalf("arrivals: %v", joined)
	}
	if _, err := dc.Members(ctx, rooms[0]); err != nil {
		t.Fatalf("dave after joining %s: %v", rooms[0], err)
	}
	if _, err := dc.Members(ctx, rooms[1]); !errors.Is(err, seat.ErrNotMember) {
		t.Fatalf("dave is a member of the room he declined: %v", err)
	}
	sendTo(t, alice, rooms[0], "hello, dave")
	expect(t, "dave", received(t, dave, rooms[0]), "hello, dave")
	if p, err := dave.PendingRooms(ctx); err != nil || len(p) != 0 {
		t.Fatalf("pending after: %+v %v", p, err)
	}
}

// aliceAndDave starts the add-token cases on st: alice of acme, and dave
// of daveco with an add-token of his good for uses adds.
func aliceAndDave(t *testing.T, st *skytaletest.Stack, uses int) (alice, dave *member, tok seat.ContactToken) {
	t.Helper()
	alice, dave = newMember(t, st, "acme"), newMember(t, st, "daveco")
	tok, err := dave.ContactToken(context.Background(), time.Hour, uses)
	if err != nil {
		t.Fatal(err)
	}
	return alice, dave, tok
}
