package seat_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

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
	if err := alice.Room(room).AddAdmin(ctx, bob.did); err != nil {
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
	// Dave and bob share no room or org: dave hands bob an add-token.
	daveToken, err := dave.ContactToken(ctx, time.Hour, 1)
	if err != nil || !strings.HasPrefix(daveToken.Token, "skt_add_") {
		t.Fatalf("dave's add-token: %+v %v", daveToken, err)
	}
	alice.Close(context.Background())
	dave.Close(context.Background())
	phone.Close(context.Background())

	if _, err := carol.Room(room).Add(ctx, dave.acct.AccountID, nil); !errors.Is(err, seat.ErrNotAdmin) {
		t.Fatalf("a plain member adding: %v", err)
	}
	stranger := newMember(t, st, "strangeco")
	if _, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: stranger.acct.APIKey}).ClaimKeyPackages(ctx, dave.acct.AccountID, room); err == nil {
		t.Fatal("a stranger claimed dave's offers")
	}
	if _, err := bob.Room(room).Add(ctx, dave.acct.AccountID, nil); !errors.Is(err, seat.ErrNotAllowed) {
		t.Fatalf("bob adding dave without his token: %v", err)
	}
	added, err := bob.Room(room).Add(ctx, dave.acct.AccountID, &seat.AddOptions{Token: daveToken.Token})
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
	erinToken, err := erin.ContactToken(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: bob.acct.APIKey}
	for i := 0; ; i++ {
		cs, err := dc.ClaimKeyPackagesWith(ctx, erin.acct.AccountID, room, erinToken.Token)
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
	// The token alone names erin.
	added, err = bob.Room(room).Add(ctx, erinToken.Token, nil)
	if err != nil || len(added) != 1 || !added[0].LastResort {
		t.Fatalf("adding erin from her last resort: %+v %v", added, err)
	}
	if joined, err := erin.ProcessInbox(ctx); err != nil || !slices.Equal(joined, []string{room}) {
		t.Fatalf("erin's inbox: %v %v", joined, err)
	}
	// Bob took no more than the per-claimer share of her one-time
	// offers in the hour (the rest were answered with the last-resort
	// one); her next restock replaces the claimed last-resort offer.
	if _, err := erin.Restock(ctx); err != nil {
		t.Fatalf("erin's restock: %v", err)
	}
	es, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: erin.acct.APIKey}).Stock(ctx)
	if err != nil || len(es.Devices) != 1 || !es.Devices[0].LastResort || len(es.Claims) != 0 ||
		es.Devices[0].OneTime < 30-directory.ClaimsPerClaimer {
		t.Fatalf("erin's stock after the restock: %+v %v", es, err)
	}
	// Erin sees who claimed what, for which channel, in her home.
	seen, err := erin.ContactClaims(ctx)
	if err != nil || len(seen) < directory.ClaimsPerClaimer+1 {
		t.Fatalf("erin's claims: %d %v", len(seen), err)
	}
	ch, _ := bob.Room(room).Channel(ctx)
	lastResort := 0
	for _, c := range seen {
		if c.ClaimedBy != bob.acct.AccountID || c.Channel != ch || c.Device != erin.did {
			t.Fatalf("a claim erin sees: %+v", c)
		}
		if c.LastResort {
			lastResort++
		}
	}
	if lastResort == 0 || len(seen)-lastResort != directory.ClaimsPerClaimer {
		t.Fatalf("erin sees %d claims, %d of them last-resort", len(seen), lastResort)
	}
}

// addToken is a one-use add-token of m's, for an adder who shares no
// room or org with m.
func addToken(t *testing.T, m *member) string {
	t.Helper()
	tok, err := m.ContactToken(context.Background(), time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}
