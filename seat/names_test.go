package seat_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

func nameOf(t *testing.T, m *member, room, did string) string {
	t.Helper()
	if x, ok := memberOf(t, m, room, did); ok {
		return x.Name
	}
	return "absent"
}

// TestRoomNames: a person's name reaches every member, newcomers
// included, shows with messages and members, and changes leave one notice
// each; a name no one could be shown safely is refused when set and
// ignored when received.
func TestRoomNames(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	for _, bad := range []string{"", " Alice", "Al\x00ice", "Ali\u202ece", strings.Repeat("a", 65), "\xff"} {
		if err := alice.SetName(ctx, bad); !errors.Is(err, seat.ErrName) {
			t.Errorf("name %q: %v", bad, err)
		}
	}
	if err := alice.SetName(ctx, "Alice Ångström"); err != nil {
		t.Fatal(err)
	}
	sendTo(t, alice, room, "hi")
	msgs, err := bob.Room(room).Sync(ctx)
	if err != nil || len(msgs) != 2 || msgs[0].Kind != seat.NoticeName || msgs[1].Text != "hi" || msgs[1].SenderName != "Alice Ångström" {
		t.Fatalf("bob reads %+v %v", msgs, err)
	}
	if got := nameOf(t, bob, room, alice.did); got != "Alice Ångström" {
		t.Fatalf("bob sees alice as %q", got)
	}

	// A newcomer learns the name without anyone setting it again, and the
	// repeat leaves the others' history as it was.
	carol := newMember(t, st, "carolco")
	join(t, alice, carol, room)
	if got := nameOf(t, carol, room, alice.did); got != "Alice Ångström" {
		t.Fatalf("carol sees alice as %q", got)
	}
	if got := received(t, bob, room); len(got) != 0 {
		t.Fatalf("bob's new entries after carol joined: %q", got)
	}

	// A change: one notice.
	if err := alice.SetName(ctx, "Alice"); err != nil {
		t.Fatal(err)
	}
	sendTo(t, alice, room, "renamed")
	expect(t, "bob", received(t, bob, room), "!"+seat.NoticeName, "renamed")
	hist, err := bob.Room(room).History(ctx)
	if err != nil || hist[len(hist)-1].SenderName != "Alice" {
		t.Fatalf("bob's history: %+v %v", hist, err)
	}

	// A hostile bob sends names no one should be shown.
	for _, bad := range []string{"Bob\u202egnp.exe", "", strings.Repeat("b", 65), "x\nAlice: hi"} {
		if err := seat.PublishToRoomGroup(bob.Seat, ctx, room, func(g *mls.Group) ([]byte, error) {
			return g.Protect(append([]byte{0x02}, bad...), nil)
		}); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, "alice", received(t, alice, room))
	if got := nameOf(t, alice, room, bob.did); got != "" {
		t.Fatalf("alice sees bob as %q", got)
	}
}
