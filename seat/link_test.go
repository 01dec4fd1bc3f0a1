package seat_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// linkDevice links a new, empty home to approver's account with
// `signin --link`'s library calls, approved by approver.
func linkDevice(t *testing.T, st *skytaletest.Stack, approver *member, label string) (*member, seat.LinkResult, seat.DeviceApproval) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	home := t.TempDir()
	d := openSeat(t, st, home)
	g, err := d.RequestLink(ctx, label)
	if err != nil {
		t.Fatal(err)
	}
	g.PollInterval = 20 * time.Millisecond
	type result struct {
		r   seat.LinkResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := d.WaitLink(ctx, g)
		done <- result{r, err}
	}()
	p, err := approver.PendingDevice(ctx, g.UserCode)
	if err != nil || p.Fingerprint != g.Fingerprint || !p.Link || p.Label != label {
		t.Fatalf("pending %+v %v; the device shows %q", p, err, g.Fingerprint)
	}
	if _, err := approver.ApproveDevice(ctx, g.UserCode, "0000 0000 0000"); !errors.Is(err, seat.ErrFingerprintMismatch) {
		t.Fatalf("approve with a wrong fingerprint: %v", err)
	}
	a, err := approver.ApproveDevice(ctx, g.UserCode, g.Fingerprint)
	if err != nil || !a.Linked || a.DeviceID == "" {
		t.Fatalf("approve: %+v %v", a, err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("wait: %v", res.err)
	}
	if res.r.Person != approver.did || res.r.DeviceID != a.DeviceID {
		t.Fatalf("linked as %+v, approved %+v", res.r, a)
	}
	return &member{Seat: d, did: approver.did, acct: approver.acct, home: home}, res.r, a
}

// scanHome reports every file of home holding one of the secrets, raw or
// in hex or base64.
func scanHome(t *testing.T, home string, phrase []string, secrets [][]byte) []string {
	t.Helper()
	var needles [][]byte
	needles = append(needles, []byte(strings.Join(phrase, " ")))
	// Any two consecutive words: a phrase in any spacing or part of it.
	for i := 0; i+1 < len(phrase); i++ {
		needles = append(needles, []byte(phrase[i]+" "+phrase[i+1]), []byte(phrase[i]+phrase[i+1]))
	}
	for _, s := range secrets {
		needles = append(needles, s, []byte(hex.EncodeToString(s)), []byte(base64.StdEncoding.EncodeToString(s)),
			[]byte(base64.RawURLEncoding.EncodeToString(s)))
	}
	var found []string
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(bytes.ToLower(b), bytes.ToLower(n)) {
				found = append(found, filepath.Base(path))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestLinkedHomeHoldsNoPhrase: a device linked with signin --link reads
// the person's log and rooms, yet no file of its home holds the phrase,
// any two of its words, the seed, the identity's private key, or a key
// the phrase derives beyond the sync key it was given. The same scan
// over a home restored from the phrase (the only second device there was
// before) finds them, so the scan can fail.
func TestLinkedHomeHoldsNoPhrase(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	if _, err := alice.Add(ctx, "before the laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Push(ctx); err != nil {
		t.Fatal(err)
	}
	laptop, res, a := linkDevice(t, st, alice, "laptop")
	if a.Rooms != 1 || len(res.Offered) != 1 || res.OfferErr != nil || !slices.Equal(res.Epochs, []uint32{0}) {
		t.Fatalf("approval %+v, result %+v", a, res)
	}
	if laptop.HoldsIdentity() || !laptop.IsLinked() {
		t.Fatal("the laptop holds the identity")
	}
	if n, err := laptop.Pull(ctx, nil); err != nil || n != 1 {
		t.Fatalf("laptop pull: %d %v", n, err)
	}
	// Alice's device adds the laptop when it next looks at the room.
	if _, err := alice.Room(room).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if joined, err := laptop.JoinDeviceRooms(ctx); err != nil || len(joined) != 1 {
		t.Fatalf("laptop joined %v %v", joined, err)
	}
	sendTo(t, bob, room, "hello laptop")
	expect(t, "the laptop", received(t, laptop, room), "hello laptop")
	sendTo(t, laptop, room, "from the laptop")
	msgs, err := bob.Room(room).Sync(ctx)
	if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Text != "from the laptop" || msgs[len(msgs)-1].Sender != alice.did {
		t.Fatalf("bob reads %+v %v", msgs, err)
	}
	// The laptop's log entries reach alice's device too.
	if _, err := laptop.Add(ctx, "written on the laptop"); err != nil {
		t.Fatal(err)
	}
	if _, err := laptop.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Pull(ctx, nil); err != nil || !slices.Contains(texts(t, alice.Seat), "written on the laptop") {
		t.Fatalf("alice's log: %v %v", texts(t, alice.Seat), err)
	}

	words, err := alice.Phrase()
	if err != nil {
		t.Fatal(err)
	}
	secrets := seat.PhraseSecrets(alice.Seat)
	if len(secrets) == 0 {
		t.Fatal("no secrets to look for")
	}
	laptop.Close(context.Background())
	if found := scanHome(t, laptop.home, words, secrets); len(found) != 0 {
		t.Fatalf("the linked home holds the phrase or its secrets in %v", found)
	}
	if _, err := laptop.Phrase(); !errors.Is(err, seat.ErrNoSeed) {
		t.Fatalf("the laptop's phrase: %v", err)
	}
	// The control: a home restored from the phrase holds them.
	phone, _, _ := secondDevice(t, st, alice)
	phone.Close(context.Background())
	if found := scanHome(t, phone.home, words, secrets); len(found) == 0 {
		t.Fatal("the scan finds nothing in a home restored from the phrase")
	}
}

// TestLinkedDeviceCannotApproveOrRevoke: approving and revoking take the
// identity key; a linked device's seat says so, and the directory refuses
// its API key the same (a linked device approving a link, revoking its
// account).
func TestLinkedDeviceCannotApproveOrRevoke(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	laptop, _, _ := linkDevice(t, st, alice, "laptop")
	// Another device asks to be linked; the laptop cannot approve it.
	other := openSeat(t, st, t.TempDir())
	g, err := other.RequestLink(ctx, "tablet")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := laptop.ApproveDevice(ctx, g.UserCode, g.Fingerprint); !errors.Is(err, seat.ErrNotIdentityHolder) {
		t.Fatalf("the laptop approves a link: %v", err)
	}
	if _, err := laptop.Revoke(ctx, "anything"); !errors.Is(err, seat.ErrNotIdentityHolder) {
		t.Fatalf("the laptop revokes: %v", err)
	}
	key := seat.APIKeyOf(laptop.Seat, ctx)
	dc := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: key}
	var ae *seat.APIError
	if err := dc.Revoke(ctx, "did:skytale:"+alice.acct.AccountID); !errors.As(err, &ae) || ae.Status != 403 {
		t.Fatalf("the laptop's key revokes the account: %v", err)
	}
	// A device restored from the phrase proves it: the laptop may let
	// it in (a recovery when the identity's device is lost).
	words, _ := alice.Phrase()
	phoneHome := t.TempDir()
	phone := openSeat(t, st, phoneHome)
	if _, err := phone.Recover(ctx, strings.Join(words, " ")); err != nil {
		t.Fatal(err)
	}
	approveFrom(t, laptop.Seat, phone)
	if _, err := phone.Revoke(ctx, seat.DeviceID(seat.MemberIdentityOf(laptop.Seat, ctx))); err != nil {
		t.Fatalf("the recovered phone revokes the laptop: %v", err)
	}
	if _, err := laptop.Connect(ctx); !errors.Is(err, seat.ErrRevoked) {
		t.Fatalf("the laptop after the recovered phone revoked it: %v", err)
	}
}

// TestRevokedDeviceIsOut: after the person's identity device revokes a
// linked laptop, the laptop's API key is refused by the directory and by
// the relay (tokens minted before included, and its open socket closes);
// it reads no log entry pushed after the revocation and no room message
// sent after it, even given the ciphertext with another credential (the
// thief of its disk with the archive in hand); its seat says revoked.
func TestRevokedDeviceIsOut(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	phone, _, _ := secondDevice(t, st, alice) // holds the phrase too
	laptop, _, a := linkDevice(t, st, alice, "laptop")
	tablet, _, _ := linkDevice(t, st, alice, "tablet")
	if _, err := alice.Room(room).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*member{laptop, tablet} {
		if joined, err := d.JoinDeviceRooms(ctx); err != nil || len(joined) != 1 {
			t.Fatalf("joined %v %v", joined, err)
		}
	}
	if _, err := alice.Add(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := laptop.Pull(ctx, nil); err != nil || n != 1 {
		t.Fatalf("laptop pull: %d %v", n, err)
	}
	// What the laptop holds before: a token and an open socket.
	key := seat.APIKeyOf(laptop.Seat, ctx)
	tok, _, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: key}).Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	conn, err := rc.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := alice.SyncChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Subscribe(ctx, ch); err != nil {
		t.Fatal(err)
	}

	nextSecond() // the relay keeps entry times to the second (revokedBy)
	out, err := alice.Revoke(ctx, a.DeviceID)
	if err != nil || !out.Linked || !out.Directory || out.Epoch != 1 || out.Given != 1 || len(out.Rooms) != 1 {
		t.Fatalf("revoke: %+v %v", out, err)
	}
	// The directory refuses the key at once, the relay within its poll.
	if _, _, err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: key}).Token(ctx); !errors.Is(err, seat.ErrRevoked) {
		t.Fatalf("the directory after the revocation: %v", err)
	}
	select {
	case <-conn.Pushes():
		for range conn.Pushes() {
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the revoked laptop's socket stays open")
	}
	waitfor.Nil(t, 10*time.Second, func() error {
		_, _, err := rc.Sync(ctx, ch, 0, 10)
		var ae *seat.APIError
		if errors.As(err, &ae) && ae.Status == 403 {
			return nil
		}
		return fmt.Errorf("the relay still serves the revoked laptop's token: %v", err)
	})
	// Its own commands say revoked.
	if _, err := laptop.Pull(ctx, nil); !errors.Is(err, seat.ErrRevoked) {
		t.Fatalf("the laptop's pull: %v", err)
	}
	if _, err := laptop.Room("mine").Create(ctx, nil); !errors.Is(err, seat.ErrRevoked) {
		t.Fatalf("the laptop's room create: %v", err)
	}

	// After: a log entry and a room message.
	if _, err := alice.Add(ctx, "after the revocation"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Push(ctx); err != nil {
		t.Fatal(err)
	}
	sendTo(t, bob, room, "room message after")
	// The tablet, which was not revoked, reads both.
	if _, err := tablet.Pull(ctx, nil); err != nil || !slices.Contains(texts(t, tablet.Seat), "after the revocation") {
		t.Fatalf("the tablet: %v %v", texts(t, tablet.Seat), err)
	}
	expect(t, "the tablet", received(t, tablet, room), "room message after")
	if e, _ := tablet.SyncEpoch(ctx); e != 1 {
		t.Fatalf("the tablet's epoch: %d", e)
	}
	// The other home with the phrase learns the new epoch too, and what
	// it pushes under it reaches the tablet.
	if _, err := phone.Pull(ctx, nil); err != nil || !slices.Contains(texts(t, phone.Seat), "after the revocation") {
		t.Fatalf("the phone: %v %v", texts(t, phone.Seat), err)
	}
	if _, err := phone.Add(ctx, "from the phone after"); err != nil {
		t.Fatal(err)
	}
	if _, err := phone.Push(ctx); err != nil {
		t.Fatal(err)
	}
	if e, _ := phone.SyncEpoch(ctx); e != 1 {
		t.Fatalf("the phone's epoch: %d", e)
	}
	if _, err := tablet.Pull(ctx, nil); err != nil || !slices.Contains(texts(t, tablet.Seat), "from the phone after") {
		t.Fatalf("the tablet after the phone pushed: %v %v", texts(t, tablet.Seat), err)
	}

	// The thief: the laptop's keys with the ciphertext, through a
	// credential that still works.
	if err := laptop.UseAccount(ctx, alice.acct.AccountID, alice.acct.Org, alice.acct.APIKey); err != nil {
		t.Fatal(err)
	}
	laptop.Pull(ctx, nil)
	if slices.Contains(texts(t, laptop.Seat), "after the revocation") {
		t.Fatal("the revoked laptop's keys open a log entry pushed after the revocation")
	}
	msgs, _ := laptop.Room(room).Sync(ctx)
	for _, m := range msgs {
		if m.Text == "room message after" {
			t.Fatal("the revoked laptop reads a room message sent after the revocation")
		}
	}
}

// TestRevokedDeviceNeverReadmitted: the revoked laptop's new device offer
// is never added back, by the person's devices or by anyone managing the
// room; and a Commit that adds it anyway (a member whose software skips
// the rule) is refused by every member that keeps it.
func TestRevokedDeviceNeverReadmitted(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	if err := alice.Room(room).AddAdmin(ctx, bob.did); err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	join(t, alice, carol, room)
	laptop, _, a := linkDevice(t, st, alice, "laptop")
	if _, err := alice.Room(room).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if joined, err := laptop.JoinDeviceRooms(ctx); err != nil || len(joined) != 1 {
		t.Fatalf("joined %v %v", joined, err)
	}
	nextSecond()
	if _, err := alice.Revoke(ctx, a.DeviceID); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*member{bob, carol} {
		if _, err := m.Room(room).Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := identities(t, alice, room)
	offer, err := seat.DeviceOffer(laptop.Seat, ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The relay refuses the laptop; the offer reaches the room through a
	// member (as any copy of it could).
	if err := seat.PublishToRoomGroup(carol.Seat, ctx, room, func(*mls.Group) ([]byte, error) { return offer, nil }); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*member{alice, bob, carol, alice, bob, carol} {
		if _, err := m.Room(room).Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := identities(t, m, room); !slices.Equal(got, before) {
			t.Fatalf("after the revoked device's offer %s's roster is %v, was %v", m.did, got, before)
		}
	}
	// Bob's own seat, asked to commit the offer, refuses: the device is
	// revoked.
	if _, err := seat.AddKeyPackage(bob.Seat, ctx, room, offer[4:]); !errors.Is(err, seat.ErrRevokedDevice) {
		t.Fatalf("bob's seat commits the revoked device's offer: %v, want ErrRevokedDevice", err)
	}
	// Bob's software adds it anyway: alice and carol refuse the Commit.
	if err := seat.AddToRoom(bob.Seat, ctx, room, offer[4:]); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*member{alice, carol} {
		m.Room(room).Sync(ctx)
		if got := identities(t, m, room); !slices.Equal(got, before) {
			t.Fatalf("%s took the Commit adding the revoked device: %v", m.did, got)
		}
	}
	sendTo(t, alice, room, "only for the unrevoked")
	expect(t, "carol", received(t, carol, room), "only for the unrevoked")
}

// nextSecond waits for the wall clock's next whole second: the relay keeps
// entry times to the second, and a member takes what a device committed
// in the second of its revocation for what came after it, so a test that
// revokes a device just after its join waits the second out first.
func nextSecond() {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
}
