package seat_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestRoomAddOfflinePerson: with the owner's seat closed throughout, an
// admin adds a person who is offline, from the join offers the person's
// two devices left at the directory; each device joins on its next
// command and reads what is sent after. A plain member cannot add anyone
// (and claims nothing), a stranger cannot drain anyone's stock, and when a
// device's one-time offers are used up its last-resort one still works.
func TestRoomAddOfflinePerson(t *testing.T) {
	ctx := context.Background()
	// Rate limits off: the test drains a stock faster than the directory
	// lets one account claim.
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{Limits: directory.Limits{Off: true}}})
	alice, bob, carol, room := roomOfThree(t, st, "ops")
	if err := alice.RoomAdminAdd(ctx, room, bob.did); err != nil {
		t.Fatal(err)
	}
	dave := newMember(t, st, "daveco")
	phone, _, _ := secondDevice(t, st, dave)
	stock, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: dave.acct.APIKey}).Stock(ctx)
	if err != nil || len(stock.Devices) != 2 {
		t.Fatalf("dave's stock: %+v %v", stock, err)
	}
	for _, d := range stock.Devices {
		if d.OneTime < 10 || !d.LastResort {
			t.Fatalf("dave's stock for %s: %+v", d.Device, d)
		}
	}
	alice.Close()
	dave.Close()
	phone.Close()

	if _, err := carol.RoomAdd(ctx, room, dave.acct.AccountID); !errors.Is(err, seat.ErrNotAdmin) {
		t.Fatalf("a plain member adding: %v", err)
	}
	stranger := newMember(t, st, "strangeco")
	if _, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: stranger.acct.APIKey}).ClaimKeyPackages(ctx, dave.acct.AccountID, room); err == nil {
		t.Fatal("a stranger claimed dave's offers")
	}
	added, err := bob.RoomAdd(ctx, room, dave.acct.AccountID)
	if err != nil || len(added) != 2 {
		t.Fatalf("bob adding dave: %+v %v", added, err)
	}
	sendTo(t, bob, room, "welcome, dave")

	// Dave's devices come back; their next command joins.
	var devices []*member
	for _, home := range []string{dave.home, phone.home} {
		d := &member{Seat: openSeat(t, st, home), did: dave.did, acct: dave.acct, home: home}
		expect(t, "dave", received(t, d, room), "welcome, dave")
		devices = append(devices, d)
	}
	sendTo(t, devices[1], room, "hello from dave's phone")
	expect(t, "bob", received(t, bob, room), "hello from dave's phone")
	expect(t, "dave", received(t, devices[0], room), "hello from dave's phone")
	if got := leavesOfPerson(t, bob, room, dave.did); len(got) != 2 {
		t.Fatalf("dave's leaves: %v", got)
	}

	// The last-resort offer, once the one-time ones are gone.
	erin := newMember(t, st, "erinco")
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: bob.acct.APIKey}
	for i := 0; ; i++ {
		cs, err := dc.ClaimKeyPackages(ctx, erin.acct.AccountID, room)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim %d: %+v %v", i, cs, err)
		}
		if cs[0].LastResort {
			break
		}
		if i > 100 {
			t.Fatal("no last-resort offer")
		}
	}
	added, err = bob.RoomAdd(ctx, room, erin.acct.AccountID)
	if err != nil || len(added) != 1 || !added[0].LastResort {
		t.Fatalf("adding erin from her last resort: %+v %v", added, err)
	}
	if joined, err := erin.ProcessInbox(ctx); err != nil || !slices.Equal(joined, []string{room}) {
		t.Fatalf("erin's inbox: %v %v", joined, err)
	}
	// Her next restock replaces the claimed last-resort offer and tops up.
	if n, err := erin.Restock(ctx); err != nil || n == 0 {
		t.Fatalf("erin's restock: %d %v", n, err)
	}
}
