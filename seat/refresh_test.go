package seat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestConnRefreshesItsToken: the relay closes a socket when its token
// expires unless the client sends a fresh one first. A connection on
// 2-second tokens sends fresh ones on its own and outlives several of
// them: its requests are answered and pushes still arrive. One whose
// fresh tokens cannot be minted is closed by the relay.
func TestConnRefreshesItsToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := skytaletest.NewStack(t)
	a := st.NewAccount(t, "acme")
	dir := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey, TokenTTL: 2 * time.Second}
	const ch = "acme/ops/refresh"
	if err := dir.RegisterChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}
	mint := func(ctx context.Context) (string, error) {
		tok, _, err := dir.Token(ctx)
		return tok, err
	}
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: mint}

	reader, err := rc.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := reader.Subscribe(ctx, ch); err != nil {
		t.Fatal(err)
	}
	pub, err := rc.DialPublisher(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	first := pub.Expiry()
	if first.IsZero() {
		t.Fatal("no expiry read from the token")
	}

	// A connection whose refreshes fail: the relay ends it at expiry.
	failing := &seat.RelayClient{BaseURL: st.RelayURL, Token: mint,
		Refresh: func(context.Context) (string, error) { return "", errors.New("directory unreachable") }}
	stale, err := failing.DialPublisher(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()

	// Time passes: past three lifetimes of the first tokens.
	time.Sleep(time.Until(first.Add(4 * time.Second)))
	for i := range 3 {
		if _, err := pub.Publish(ctx, ch, []byte("after expiry")); err != nil {
			t.Fatalf("publish %d after the first token expired: %v", i, err)
		}
		select {
		case p, ok := <-reader.Pushes():
			if !ok {
				t.Fatalf("the reader's connection ended: %v", reader.Err())
			}
			if string(p.Payload) != "after expiry" {
				t.Fatalf("push %q", p.Payload)
			}
		case <-ctx.Done():
			t.Fatal("no push after the first token expired")
		}
	}
	if !pub.Expiry().After(first) || !reader.Expiry().After(first) {
		t.Fatalf("expiries did not move: %v, %v, first %v", pub.Expiry(), reader.Expiry(), first)
	}

	if _, err := stale.Publish(ctx, ch, []byte("expired")); err == nil {
		t.Fatal("a connection whose token expired could still publish")
	}
}

// TestWatchOutlivesShortTokens: a watch on 2-second tokens stays on one
// connection for several token lifetimes and delivers a message sent
// after them.
func TestWatchOutlivesShortTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	short, err := seat.Open(ctx, seat.Config{Home: bob.home, APIURL: st.APIURL, RelayURL: st.RelayURL, TokenTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close(context.Background())

	events := make(chan seat.WatchEvent, 16)
	msgs := make(chan seat.RoomMessage, 16)
	done := make(chan error, 1)
	go func() {
		done <- short.WatchWith(ctx, []string{room}, seat.WatchOptions{
			OnMessage: func(m seat.RoomMessage) { msgs <- m },
			OnEvent:   func(ev seat.WatchEvent) { events <- ev },
		})
	}()
	if ev := <-events; !ev.Connected {
		t.Fatalf("first watch event: %+v", ev)
	}
	time.Sleep(7 * time.Second) // time passes: three token lifetimes and more
	sendTo(t, alice, room, "still listening?")
	select {
	case m := <-msgs:
		if m.Text != "still listening?" {
			t.Fatalf("watch delivered %q", m.Text)
		}
	case ev := <-events:
		t.Fatalf("the watch's connection changed: %+v", ev)
	case err := <-done:
		t.Fatalf("watch ended: %v", err)
	case <-ctx.Done():
		t.Fatal("the message did not arrive")
	}
	select {
	case ev := <-events:
		t.Fatalf("the watch's connection changed: %+v", ev)
	default:
	}
}

// A token whose expiry reads as past (a clock ahead of the directory's,
// or a directory that writes a nonsense exp) is still not refreshed in a
// tight loop: the wait has a floor of a twentieth of the lifetime.
func TestRefreshDueHasAFloor(t *testing.T) {
	life := 300 * time.Second
	if got := seat.RefreshDue(time.Now().Add(-time.Hour), life); got != life/20 {
		t.Fatalf("expired token: wait %v, want %v", got, life/20)
	}
	if got := seat.RefreshDue(time.Now().Add(life), life); got < life*2/3-time.Second || got > life*2/3 {
		t.Fatalf("fresh token: wait %v, want about %v", got, life*2/3)
	}
	if got := seat.RefreshDue(time.Now().Add(10*life), life); got != life*2/3 {
		t.Fatalf("token far in the future: wait %v, want %v", got, life*2/3)
	}
}
