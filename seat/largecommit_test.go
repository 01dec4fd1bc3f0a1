package seat_test

import (
	"context"
	"testing"

	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/seat"
)

// TestRoomLargeCommit: in a post-quantum room of 1,000 members that one
// member added in batches, nobody else has committed, so the tree is
// sparse and every Commit's UpdatePath encrypts to most leaves one by one
// (1,120 bytes of KEM output each): the owner's Commits grow past the
// relay's 1 MiB cap for application messages. They still go through the
// relay as handshakes (up to relay.MaxHandshakePayload), a member who was
// there all along catches up on every one from the archive, a newcomer
// joins with the tree out of band, and the room goes on. Not in -short: it makes a thousand KeyPackages and a
// dozen megabyte Commits.
func TestRoomLargeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1,000-member post-quantum room")
	}
	ctx := context.Background()
	st, alice, room := pqRoom(t, "big", 0, 0)
	bob := newMember(t, st, "bobco")
	join(t, alice, bob, room)
	fillRoom(t, alice, room, seat.SuitePQ, 998, 125)

	// The archive holds the Commits as they went out.
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return st.Token(t, alice.acct.APIKey), nil }}
	largest := 0
	if _, err := rc.SyncAll(ctx, room, 0, func(e seat.RelayEntry) error {
		if e.EntryType == seat.EntryCommit {
			largest = max(largest, len(e.Payload))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if largest <= relay.MaxPayload {
		t.Fatalf("the largest Commit is %d bytes, not over the %d-byte cap for other messages", largest, relay.MaxPayload)
	}
	t.Logf("largest Commit %d bytes", largest)

	// Bob processed every one of them: he and alice are in one epoch.
	converse(t, room, alice, bob, "a thousand of us", "and still one room")
	if m, _, err := roomMembers(bob, ctx, room); err != nil || len(m) != 1000 {
		t.Fatalf("bob sees %d members: %v", len(m), err)
	}

	// A newcomer: her Welcome leaves the 1.4 MB tree out, and the Commit
	// that adds her is another large one bob processes.
	carol := newMember(t, st, "carolco")
	join(t, alice, carol, room)
	sendTo(t, carol, room, "late but in")
	expect(t, "bob", received(t, bob, room), "late but in")
}
