package seat_test

import (
	"context"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestRoomRejoinAfterRetention: a member away while the relay's bounded
// log dropped the commits it needed is told of the gap, rejoins by an
// external Commit that replaces its own leaf, and reads what is sent
// after; the others see one leaf of it, not two.
func TestRoomRejoinAfterRetention(t *testing.T) {
	ctx := context.Background()
	// Four entries of each kind per channel: a handful of commits pushes
	// the early ones out.
	st := skytaletest.NewStackWith(t, skytaletest.Options{Relay: skytale.RelayConfig{ArchiveCap: 4}})
	alice, bob, carol, room := roomOfThree(t, st, "ops")
	sendTo(t, alice, room, "before bob went away")
	expect(t, "bob", received(t, bob, room), "before bob went away")

	// Bob is away: commits and messages he never sees in time.
	for range 3 {
		if err := alice.Room(room).AddAdmin(ctx, carol.did); err != nil {
			t.Fatal(err)
		}
		if err := alice.Room(room).RemoveAdmin(ctx, carol.did); err != nil {
			t.Fatal(err)
		}
	}
	for _, text := range []string{"one", "two", "three", "four", "five", "six"} {
		sendTo(t, alice, room, text)
	}

	msgs, err := bob.Room(room).Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, m := range msgs {
		if m.Kind != "" {
			kinds = append(kinds, m.Kind)
		}
	}
	if !slices.Equal(kinds, []string{seat.NoticeGap, seat.NoticeRejoined}) {
		t.Fatalf("bob was told %v (%+v), want a gap and a rejoin", kinds, msgs)
	}
	sendTo(t, alice, room, "welcome back")
	expect(t, "bob", received(t, bob, room), "welcome back")
	sendTo(t, bob, room, "I am back")
	// Carol, who had read nothing since she joined, was away as long:
	// she rejoins too, and reads what comes after.
	expect(t, "carol", received(t, carol, room), "!"+seat.NoticeRejoined)
	sendTo(t, bob, room, "hello carol")
	expect(t, "carol", received(t, carol, room), "hello carol")
	expect(t, "alice", received(t, alice, room), "I am back", "hello carol")
	for _, m := range []*member{bob, carol} {
		if got := leavesOfPerson(t, alice, room, m.did); len(got) != 1 {
			t.Fatalf("leaves of %s: %v", m.did, got)
		}
	}
	// His history kept what he had.
	hist, err := bob.Room(room).History(ctx)
	if err != nil || hist[0].Text != "before bob went away" {
		t.Fatalf("bob's history: %+v %v", hist, err)
	}
}
