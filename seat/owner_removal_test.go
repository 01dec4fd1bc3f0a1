package seat_test

import (
	"context"
	"testing"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestMemberCannotRemoveOwner reproduces an audit finding, with only
// the API the seat had then, so the same test runs against that seat too
// (where it fails): a plain member removed the owner, and the owner's
// leave and re-create of the same name split the room in two.
func TestMemberCannotRemoveOwner(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	carol := newMember(t, st, "carolco")
	join(t, alice, carol, room)
	if err := removeFrom(bob, ctx, room, alice.did); err == nil {
		t.Fatal("a plain member removed the owner")
	}
	for _, m := range []*member{alice, carol} {
		ms, _, err := roomMembers(m, ctx, room)
		if err != nil || len(ms) != 3 {
			t.Fatalf("the roster after the attempt: %+v %v", ms, err)
		}
	}
	if err := alice.Room(room).Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Room("ops").Create(ctx, nil); err == nil {
		t.Fatal("the owner made a second group on the room's channel, which bob and carol still use")
	}
}
