package seat_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"

	_ "modernc.org/sqlite"
)

type member struct {
	*seat.Seat
	did  string
	acct seat.Account
	home string
}

func newMember(t *testing.T, st *skytaletest.Stack, org string) *member {
	t.Helper()
	return newMemberAt(t, st, st.APIURL, org)
}

// newMemberAt is newMember with the seat speaking to the directory at
// apiURL (a proxy in front of st's, say).
func newMemberAt(t *testing.T, st *skytaletest.Stack, apiURL, org string) *member {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	s := openSeatAt(t, st, apiURL, home)
	did, err := s.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.SignIn(ctx, org+"@example.test", org)
	if err != nil {
		t.Fatal(err)
	}
	return &member{Seat: s, did: did, acct: a, home: home}
}

// join runs the joiner side without blocking: publish the KeyPackage,
// let the owner admit, then finish the join from the Welcome. It returns
// what the owner's admit reported.
func join(t *testing.T, owner, joiner *member, room string) seat.Admitted {
	t.Helper()
	ctx := context.Background()
	tok, err := owner.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := joiner.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatalf("join before admit: %v", err)
	}
	adm, err := owner.Room(room).Admit(ctx)
	if err != nil || len(adm) != 1 || adm[0].Identity != joiner.did {
		t.Fatalf("admit: %+v %v", adm, err)
	}
	if _, err := joiner.Room(room).Join(ctx, "", &seat.JoinOptions{Wait: time.Minute}); err != nil {
		t.Fatalf("join: %v", err)
	}
	return adm[0]
}

// roomOfTwo makes a room called name owned by a new member in org acme,
// with a second member from org bobco joined.
func roomOfTwo(t *testing.T, st *skytaletest.Stack, name string) (alice, bob *member, room string) {
	t.Helper()
	alice = newMember(t, st, "acme")
	bob = newMember(t, st, "bobco")
	room, err := alice.Room(name).Create(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	join(t, alice, bob, room)
	return alice, bob, room
}

// roomOfThree is roomOfTwo with a third member from org carolco.
func roomOfThree(t *testing.T, st *skytaletest.Stack, name string) (alice, bob, carol *member, room string) {
	t.Helper()
	alice, bob, room = roomOfTwo(t, st, name)
	carol = newMember(t, st, "carolco")
	join(t, alice, carol, room)
	return alice, bob, carol, room
}

func sendTo(t *testing.T, m *member, room, text string) {
	t.Helper()
	if _, err := m.Room(room).Send(context.Background(), text); err != nil {
		t.Fatalf("send %q: %v", text, err)
	}
}

// converse has a say aSays and b say bSays in room, each read by the
// other in turn.
func converse(t *testing.T, room string, a, b *member, aSays, bSays string) {
	t.Helper()
	sendTo(t, a, room, aSays)
	expect(t, b.did, received(t, b, room), aSays)
	sendTo(t, b, room, bSays)
	expect(t, a.did, received(t, a, room), bSays)
}

func received(t *testing.T, m *member, room string) []string {
	t.Helper()
	msgs, err := m.Room(room).Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range msgs {
		if x.Kind != "" {
			out = append(out, "!"+x.Kind) // a notice
			continue
		}
		out = append(out, x.Text)
	}
	return out
}

// toldRemoved checks that m, removed from room by by, is told on its next
// sync: by a notice of the commit that removed it, or by the relay's
// refusal once its account's membership has ended (whichever comes first).
func toldRemoved(t *testing.T, m *member, room string, by *member) {
	t.Helper()
	msgs, err := m.Room(room).Sync(context.Background())
	switch {
	case errors.Is(err, seat.ErrNotMember):
	case err != nil || len(msgs) != 1 || msgs[0].Kind != seat.NoticeRemoved || msgs[0].Sender != by.did:
		t.Fatalf("the removed member's sync: %+v, %v", msgs, err)
	}
}

func expect(t *testing.T, who string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s received %q, want %q", who, got, want)
	}
}

func TestRoomThreeMembers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{DBPath: filepath.Join(dir, "relay.db")},
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dir, "directory.db")},
	})
	alice := newMember(t, st, "acme")
	bob := newMember(t, st, "bobco")
	carol := newMember(t, st, "carolco")

	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if room != "acme/rooms/ops" {
		t.Fatalf("room channel %q", room)
	}
	join(t, alice, bob, room)
	converse(t, room, alice, bob, "hello bob", "hi alice")

	join(t, alice, carol, room)
	expect(t, "bob", received(t, bob, room)) // the add commit only
	sendTo(t, carol, room, "carol here")
	sendTo(t, bob, room, "welcome carol")
	expect(t, "alice", received(t, alice, room), "carol here", "welcome carol")
	expect(t, "carol", received(t, carol, room), "welcome carol")
	// Bob caught up on "carol here" before sending; it is in his history.
	expect(t, "bob", received(t, bob, room))
	if h, _ := bob.Room(room).History(ctx); len(h) != 4 || h[2].Text != "carol here" || h[2].Sender != carol.did {
		t.Fatalf("bob's history: %+v", h)
	}

	mem, epoch, err := roomMembers(carol, ctx, room)
	if err != nil || len(mem) != 3 || epoch != 2 {
		t.Fatalf("members: %+v epoch %d %v", mem, epoch, err)
	}

	// Carol goes offline; two commits happen; she catches up via /v1/sync.
	dave := newMember(t, st, "daveco")
	join(t, alice, dave, room)
	if err := removeFrom(alice, ctx, room, dave.did); err != nil {
		t.Fatal(err)
	}
	sendTo(t, alice, room, "after two commits")
	expect(t, "carol", received(t, carol, room), "after two commits")
	expect(t, "bob", received(t, bob, room), "after two commits")

	// A removed member cannot read further messages.
	if err := removeFrom(alice, ctx, room, bob.did); err != nil {
		t.Fatal(err)
	}
	sendTo(t, carol, room, "bob is gone")
	// Until the relay learns of the removal (within a second) bob reads
	// the commit that removed him and nothing after it; then the relay
	// refuses him.
	toldRemoved(t, bob, room, alice)
	if _, err := bob.Room(room).Send(ctx, "let me in"); !errors.Is(err, seat.ErrRemovedRoom) && !errors.Is(err, seat.ErrNotMember) {
		t.Fatalf("removed member sent: %v", err)
	}
	expect(t, "alice", received(t, alice, room), "bob is gone")
	mem, _, _ = roomMembers(alice, ctx, room)
	if len(mem) != 2 {
		t.Fatalf("after removals: %+v", mem)
	}

	// Racing committers: carol's view is stale when alice commits; her
	// commit is refused with stale_epoch, she re-syncs and succeeds. Only
	// the owner and admins remove others, so alice makes carol an admin.
	if err := alice.Room(room).AddAdmin(ctx, carol.did); err != nil {
		t.Fatal(err)
	}
	erin := newMember(t, st, "erinco")
	join(t, alice, erin, room)
	frank := newMember(t, st, "frankco")
	tok, _ := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
	if _, err := frank.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatal(err)
	}
	attempts := 0
	restore := seat.SetTestOnlyBeforeCommit(func() {
		attempts++
		if attempts == 1 {
			// Alice commits (admits frank) after carol built her commit
			// and before carol publishes it.
			restoreInner := seat.SetTestOnlyBeforeCommit(nil)
			defer restoreInner()
			if adm, err := alice.Room(room).Admit(ctx); err != nil || len(adm) != 1 {
				t.Errorf("racing admit: %+v %v", adm, err)
			}
		}
	})
	err = removeFrom(carol, ctx, room, erin.did)
	restore()
	if err != nil {
		t.Fatalf("stale committer did not recover: %v", err)
	}
	if attempts != 2 {
		t.Fatalf("carol published %d commits, want a refused one and a retry", attempts)
	}
	if _, err := frank.Room(room).Join(ctx, "", &seat.JoinOptions{Wait: time.Minute}); err != nil {
		t.Fatal(err)
	}
	sendTo(t, alice, room, "settled")
	expect(t, "carol", received(t, carol, room), "settled")
	expect(t, "frank", received(t, frank, room), "settled")
	for _, m := range []*member{alice, carol, frank} {
		mem, epoch, err := roomMembers(m, ctx, room)
		if err != nil || len(mem) != 3 || epoch != 9 {
			t.Fatalf("roster after the race: %+v epoch %d %v", mem, epoch, err)
		}
	}

	// History is kept per room.
	h, err := carol.Room(room).History(ctx)
	if err != nil || len(h) < 4 || h[len(h)-1].Text != "settled" || h[len(h)-1].Sender != alice.did {
		t.Fatalf("history: %+v %v", h, err)
	}

	// Neither plane holds any plaintext or secret of this test.
	secrets := []string{"hello bob", "hi alice", "carol here", "welcome carol", "after two commits", "bob is gone", "settled"}
	for _, m := range []*member{alice, bob, carol} {
		words, _ := m.Phrase()
		secrets = append(secrets, strings.Join(words, " "), m.acct.APIKey)
	}
	scanForSecrets(t, filepath.Join(dir, "relay.db"), secrets)
	scanForSecrets(t, filepath.Join(dir, "directory.db"), secrets)
}

// scanForSecrets fails if any secret appears in the database file, its WAL,
// or any text or blob value of any table.
func scanForSecrets(t *testing.T, path string, secrets []string) {
	t.Helper()
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("%s contains %q", filepath.Base(f), s)
			}
		}
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tables.Next() {
		var n string
		tables.Scan(&n)
		names = append(names, n)
	}
	tables.Close()
	for _, n := range names {
		rows, err := db.Query(fmt.Sprintf(`SELECT * FROM "%s"`, n))
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			rows.Scan(ptrs...)
			for _, v := range vals {
				var b []byte
				switch x := v.(type) {
				case string:
					b = []byte(x)
				case []byte:
					b = x
				}
				for _, s := range secrets {
					if len(b) > 0 && bytes.Contains(b, []byte(s)) {
						t.Errorf("%s table %s holds %q", filepath.Base(path), n, s)
					}
				}
			}
		}
		rows.Close()
	}
}

// TestRoomCommitCrashWindow: the relay accepts an own commit and the seat
// dies before confirming it. The stored state holds the pending commit, so
// the next handle on that home finds the commit in the log and follows the
// group into the new epoch.
func TestRoomCommitCrashWindow(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "crash")
	dave := newMember(t, st, "daveco")
	join(t, alice, dave, room)

	crash := errors.New("simulated crash")
	restore := seat.SetTestOnlyAfterCommit(func() error { return crash })
	err := removeFrom(alice, ctx, room, dave.did)
	restore()
	if !errors.Is(err, crash) {
		t.Fatalf("remove: %v", err)
	}
	alice.Close(context.Background())

	again := openSeat(t, st, alice.home)
	if _, err := again.Room(room).Send(ctx, "after the crash"); err != nil {
		t.Fatal(err)
	}
	expect(t, "bob", received(t, bob, room), "after the crash")
	toldRemoved(t, dave, room, alice)
	for who, s := range map[string]*seat.Seat{"alice": again, "bob": bob.Seat} {
		mem, epoch, err := roomMembers(s, ctx, room)
		if err != nil || len(mem) != 2 || epoch != 3 {
			t.Fatalf("%s after the crash: %+v epoch %d %v", who, mem, epoch, err)
		}
	}
}

// TestRoomOutlivesKeyPackageLifetime: a member who never commits keeps its
// KeyPackage's 90-day lifetime in the tree; joins after that must still work.
func TestRoomOutlivesKeyPackageLifetime(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "long")

	later := func() time.Time { return time.Now().Add(100 * 24 * time.Hour) }
	reopen := func(home string) *seat.Seat {
		s, err := seat.Open(ctx, seat.Config{Home: home, APIURL: st.APIURL, RelayURL: st.RelayURL, Now: later})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	alice.Close(context.Background())
	alice2 := &member{Seat: reopen(alice.home), did: alice.did, acct: alice.acct, home: alice.home}
	carolHome := t.TempDir()
	carol := &member{Seat: reopen(carolHome), home: carolHome}
	var err error
	if carol.did, err = carol.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.SignIn(ctx, "carol@example.test", "carolco"); err != nil {
		t.Fatal(err)
	}
	join(t, alice2, carol, room)
	sendTo(t, carol, room, "a hundred days on")
	expect(t, "bob", received(t, bob, room), "a hundred days on")
}

// TestRoomRefusesBorrowedIdentity: a KeyPackage that names another
// person's did:key but is signed with a different key is never admitted,
// so nobody shows up in a room as someone else.
func TestRoomRefusesBorrowedIdentity(t *testing.T) {
	st := skytaletest.NewStack(t)
	ctx := context.Background()
	alice, _, room := roomOfTwo(t, st, "ops")
	carol := newMember(t, st, "carolco") // not in the room
	mallory := newMember(t, st, "evil")
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	_, forger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := mls.NewKeyPackage(seat.Suite, carol.did, forger.Seed(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := &seat.DirectoryClient{BaseURL: st.APIURL, Credential: mallory.acct.APIKey}
	if _, err := dir.Join(ctx, room, tok, carol.did, kp.Bytes()); err != nil {
		t.Fatal(err)
	}
	adm, err := alice.Room(room).Admit(ctx)
	if err != nil || len(adm) != 0 {
		t.Fatalf("admit of a KeyPackage with a borrowed identity: %+v %v", adm, err)
	}
	members, _, err := roomMembers(alice, ctx, room)
	if err != nil || len(members) != 2 {
		t.Fatalf("members after the forged join: %v %v", members, err)
	}
}

// roomHandles is a seat, or a test member that embeds one.
type roomHandles interface{ Room(string) *seat.Room }

// roomMembers is the room's roster as its two parts.
func roomMembers(s roomHandles, ctx context.Context, name string) ([]seat.RoomMember, uint64, error) {
	r, err := s.Room(name).Members(ctx)
	return r.Members, r.Epoch, err
}

// removeFrom removes did from the room, for the tests that need only the
// error.
func removeFrom(s roomHandles, ctx context.Context, name, did string) error {
	_, err := s.Room(name).Remove(ctx, did)
	return err
}
