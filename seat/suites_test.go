package seat_test

import (
	"context"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestRoomSuites: rooms are created in the classic suite by default or in
// the post-quantum one on request; a joiner, who cannot know the room's
// suite, offers both and is added with the right one; a seat that offers
// only a classic KeyPackage (as older seats do) joins a classic room and
// is skipped by a post-quantum one.
func TestRoomSuites(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	bob := newMember(t, st, "bobco")
	pq, err := alice.Room("pq").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	classic, err := alice.Room("classic").Create(ctx, &seat.RoomOptions{Suite: seat.SuiteClassic})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room("x448").Create(ctx, &seat.RoomOptions{Suite: mls.MLS_256_DHKEMX448_AES256GCM_SHA512_Ed448}); err == nil {
		t.Fatal("a room in another suite")
	}
	for room, want := range map[string]mls.CipherSuite{pq: seat.SuitePQ, classic: seat.SuiteClassic} {
		join(t, alice, bob, room)
		for _, m := range []*member{alice, bob} {
			if got, err := m.Room(room).Suite(ctx); err != nil || got != want {
				t.Fatalf("%s: suite %v %v, want %v", room, got, err, want)
			}
		}
		sendTo(t, bob, room, "hello in "+seat.SuiteName(want))
		expect(t, "alice", received(t, alice, room), "hello in "+seat.SuiteName(want))
	}
	if seat.Suite != seat.SuitePQ {
		t.Fatalf("new rooms default to %v", seat.Suite)
	}

	// An older seat's offer: one bare classic KeyPackage.
	carol := newMember(t, st, "carolco")
	old := func(room string) string {
		t.Helper()
		tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
		if err != nil {
			t.Fatal(err)
		}
		id := personIdentity(t, carol)
		kp, err := mls.NewKeyPackage(seat.SuiteClassic, carol.did, id.PrivateKey().Seed(), seat.MLSConfig(carol.Seat))
		if err != nil {
			t.Fatal(err)
		}
		dir := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: carol.acct.APIKey}
		req, err := dir.Join(ctx, room, tok, carol.did, kp.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	reqPQ, reqClassic := old(pq), old(classic)
	if adm, err := alice.Room(pq).Admit(ctx); err != nil || len(adm) != 0 {
		t.Fatalf("the post-quantum room admitted a classic KeyPackage: %+v %v", adm, err)
	}
	adm, err := alice.Room(classic).Admit(ctx)
	if err != nil || len(adm) != 1 || adm[0].RequestID != reqClassic {
		t.Fatalf("the classic room's admit: %+v %v", adm, err)
	}
	dir := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: carol.acct.APIKey}
	if w, err := dir.PollWelcome(ctx, reqPQ); err != nil || w != nil {
		t.Fatalf("a Welcome for the skipped request: %d bytes, %v", len(w), err)
	}
	waitfor.True(t, 10*time.Second, func() bool {
		w, err := dir.PollWelcome(ctx, reqClassic)
		if err != nil {
			t.Fatal(err)
		}
		return w != nil
	}, "no Welcome for the classic request")
}
