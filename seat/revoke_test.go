package seat_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestRevokedAccountRefused: once the directory revokes a seat's account,
// the seat can no longer push, pull, send to a room or watch, even with
// relay tokens it minted before the revocation still cached.
func TestRevokedAccountRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{DBPath: filepath.Join(dir, "relay.db")},
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dir, "directory.db")},
	})
	alice := newMember(t, st, "acme")
	bob := newMember(t, st, "bobco")
	if _, err := alice.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Add(ctx, "before the revocation"); err != nil {
		t.Fatal(err)
	}
	if n, err := alice.Push(ctx); err != nil || n != 1 {
		t.Fatalf("push = %d, %v", n, err)
	}
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	join(t, alice, bob, room)
	sendTo(t, alice, room, "hello before")
	expect(t, "bob", received(t, bob, room), "hello before")

	// The account revokes itself (a lost device); the seat's cached relay
	// tokens are still within their lifetime.
	sub, err := skytaletest.Subject(st.Token(t, alice.acct.APIKey))
	if err != nil {
		t.Fatal(err)
	}
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: alice.acct.APIKey}
	if err := dc.Revoke(ctx, sub); err != nil {
		t.Fatal(err)
	}

	// The directory refuses at once: a fresh handle on the home, with no
	// cached token, cannot mint one.
	again := openSeat(t, st, alice.home)
	if _, err := again.Add(ctx, "after the revocation"); err != nil {
		t.Fatal(err) // the local log still works
	}
	var ae *seat.APIError
	if _, err := again.Push(ctx); !errors.As(err, &ae) || ae.Code != "revoked" {
		t.Errorf("push from a fresh handle of a revoked account: %v, want revoked", err)
	}
	// The relay learns the revocation within its poll interval; from then
	// on the tokens alice's first handle cached are refused too.
	waitfor.True(t, 10*time.Second, func() bool {
		_, err := alice.Room(room).Send(ctx, "hello after")
		return err != nil
	}, "room message of a revoked account still accepted after 10s")
	// Bob takes in what got through before the relay learned it; from now
	// on nothing does.
	received(t, bob, room)
	if _, err := alice.Room(room).Send(ctx, "hello after"); err == nil {
		t.Error("room message of a revoked account succeeded")
	}
	if _, err := alice.Push(ctx); err == nil {
		t.Error("push of a revoked account succeeded")
	}
	if _, err := alice.Pull(ctx, nil); err == nil {
		t.Error("pull of a revoked account succeeded")
	}
	if _, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0}); err == nil {
		t.Error("invite of a revoked account succeeded")
	}
	if _, err := alice.Room(room).Admit(ctx); err == nil {
		t.Error("admit of a revoked account succeeded")
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	err = alice.WatchWith(wctx, []string{room}, seat.WatchOptions{OnMessage: func(seat.RoomMessage) {}})
	wcancel()
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("watch of a revoked account: %v, want a refusal", err)
	}

	// Bob is unaffected and saw nothing from alice after the revocation.
	sendTo(t, bob, room, "still here")
	expect(t, "bob", received(t, bob, room))

	words, _ := alice.Phrase()
	secrets := []string{"before the revocation", "after the revocation", "hello before", "hello after", "still here",
		strings.Join(words, " "), alice.acct.APIKey}
	scanForSecrets(t, filepath.Join(dir, "relay.db"), secrets)
	scanForSecrets(t, filepath.Join(dir, "directory.db"), secrets)
}
