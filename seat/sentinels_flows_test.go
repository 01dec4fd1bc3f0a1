package seat_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/directory"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// The sentinels of refusals a caller meets in the flows of devices and
// adds, each provoked on a real stack and matched with errors.Is.

// TestLinkedHomeTakesNoPhrase: a linked device's home holds no phrase and
// takes none: Restore and Init refuse with ErrLinkedHome, and so does a
// device grant of the phrase kind (RequestDevice).
func TestLinkedHomeTakesNoPhrase(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	laptop, _, _ := linkDevice(t, st, alice, "laptop")
	words, err := alice.Phrase()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := laptop.Restore(ctx, strings.Join(words, " ")); !errors.Is(err, seat.ErrLinkedHome) {
		t.Errorf("Restore on a linked home: %v, want ErrLinkedHome", err)
	}
	if _, err := laptop.Init(ctx); !errors.Is(err, seat.ErrLinkedHome) {
		t.Errorf("Init on a linked home: %v, want ErrLinkedHome", err)
	}
	if _, err := laptop.RequestDevice(ctx, "again"); !errors.Is(err, seat.ErrLinkedHome) {
		t.Errorf("RequestDevice on a linked home: %v, want ErrLinkedHome", err)
	}
	if !laptop.IsLinked() || laptop.HoldsIdentity() {
		t.Fatal("the refusals changed what the home is")
	}
}

// TestLinkApprovedWithoutABox: a link grant approved by someone holding
// the account's API key but not the person's identity (a plain device
// approval, with no box or a box that is not the identity's) links
// nothing: the new device's WaitLink refuses with ErrBadLinkBox.
func TestLinkApprovedWithoutABox(t *testing.T) {
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: alice.acct.APIKey}
	for _, c := range []struct {
		name string
		box  []byte
	}{
		{"no box", nil},
		{"a box of made-up bytes", []byte(strings.Repeat("not sealed to the device ", 8))},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		d := openSeat(t, st, t.TempDir())
		g, err := d.RequestLink(ctx, "tablet")
		if err != nil {
			t.Fatal(err)
		}
		g.PollInterval = 20 * time.Millisecond
		if _, err := dc.ApproveDeviceGrant(ctx, g.UserCode, c.box); err != nil {
			t.Fatalf("%s: the directory refused the approval: %v", c.name, err)
		}
		if r, err := d.WaitLink(ctx, g); !errors.Is(err, seat.ErrBadLinkBox) || r.Person != "" {
			t.Errorf("%s: WaitLink: %+v %v, want ErrBadLinkBox", c.name, r, err)
		}
		cancel()
	}
}

// TestDeviceGrantExpires: a device grant nobody approves within its ten
// minutes expires, and the waiting device is told ErrGrantExpired.
func TestDeviceGrantExpires(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := &shiftedClock{}
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{Now: clock.Now}})
	device := openSeat(t, st, t.TempDir())
	if _, err := device.Init(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := device.RequestDevice(ctx, "second home")
	if err != nil {
		t.Fatal(err)
	}
	g.PollInterval = 20 * time.Millisecond
	clock.Advance(10*time.Minute + time.Second)
	if _, err := device.WaitDevice(ctx, g); !errors.Is(err, seat.ErrGrantExpired) {
		t.Fatalf("WaitDevice on an expired grant: %v, want ErrGrantExpired", err)
	}
}

// TestRateLimitedIsMatched: a request the directory refuses for load is
// ErrRateLimited, with the APIError's RetryAfter telling when to ask
// again. Device grants take no credential, so they are limited per
// address; one in half an hour here, so the second is refused.
func TestRateLimitedIsMatched(t *testing.T) {
	ctx := context.Background()
	one := directory.Bucket{Burst: 1, Every: 30 * time.Minute}
	st := skytaletest.NewStackWith(t, skytaletest.Options{Directory: skytale.DirectoryConfig{
		Limits: directory.Limits{Grant: directory.Rate{PerAddr: one, PerAccount: one}},
	}})
	device := openSeat(t, st, t.TempDir())
	if _, err := device.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := device.RequestDevice(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	_, err := device.RequestDevice(ctx, "second")
	var ae *seat.APIError
	if !errors.Is(err, seat.ErrRateLimited) || !errors.As(err, &ae) || ae.Status != 429 || ae.RetryAfter <= 0 {
		t.Fatalf("a grant over the limit: %v (%+v), want ErrRateLimited with a RetryAfter", err, ae)
	}
}

// TestAddWithABadAddToken: an add-token that is used up, or that nobody
// made, adds nobody: an Add by the token alone (which names its maker)
// refuses with ErrInvalidAddToken. (Naming the person as well, the
// directory answers not_allowed, ErrNotAllowed, as for no token.)
func TestAddWithABadAddToken(t *testing.T) {
	ctx := context.Background()
	alice, dave, tok := aliceAndDave(t, skytaletest.NewStack(t), 1)
	var rooms []string
	for _, name := range []string{"ops", "noise"} {
		room, err := alice.Room(name).Create(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		rooms = append(rooms, room)
	}
	if added, err := alice.Room(rooms[0]).Add(ctx, dave.acct.AccountID, &seat.AddOptions{Token: tok.Token}); err != nil || len(added) != 1 {
		t.Fatalf("the add with the token's one use: %+v %v", added, err)
	}
	if added, err := alice.Room(rooms[1]).Add(ctx, "", &seat.AddOptions{Token: tok.Token}); !errors.Is(err, seat.ErrInvalidAddToken) || len(added) != 0 {
		t.Errorf("an add with the used-up token: %+v %v, want ErrInvalidAddToken", added, err)
	}
	made := "skt_add_" + strings.Repeat("x", len(tok.Token)-len("skt_add_"))
	if added, err := alice.Room(rooms[1]).Add(ctx, "", &seat.AddOptions{Token: made}); !errors.Is(err, seat.ErrInvalidAddToken) || len(added) != 0 {
		t.Errorf("an add with a made-up token: %+v %v, want ErrInvalidAddToken", added, err)
	}
	if added, err := alice.Room(rooms[1]).Add(ctx, dave.acct.AccountID, &seat.AddOptions{Token: tok.Token}); !errors.Is(err, seat.ErrNotAllowed) || len(added) != 0 {
		t.Errorf("an add of dave with the used-up token: %+v %v, want ErrNotAllowed", added, err)
	}
	if ms, _, err := roomMembers(alice, ctx, rooms[1]); err != nil || len(ms) != 1 {
		t.Fatalf("the second room has %d members (%v)", len(ms), err)
	}
}

// TestAddOfAPersonWithNoOffers: a person who agreed to be added (an
// add-token of theirs) but whose devices left no join offers (no seat of
// theirs ever signed in) cannot be added: Add refuses with ErrNoStock,
// naming them.
func TestAddOfAPersonWithNoOffers(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	erin := st.NewAccount(t, "erinco")
	tok, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: erin.APIKey}).CreateAddToken(ctx, 1, 3600)
	if err != nil {
		t.Fatal(err)
	}
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	added, err := alice.Room(room).Add(ctx, erin.ID, &seat.AddOptions{Token: tok.Token})
	if !errors.Is(err, seat.ErrNoStock) || !strings.Contains(err.Error(), erin.ID) || len(added) != 0 {
		t.Fatalf("adding a person with no offers: %+v %v, want ErrNoStock naming them", added, err)
	}
}
