package seat_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/mls"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

func homeDB(t *testing.T, home string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(home, "seat.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func storedState(t *testing.T, db *sql.DB, ch string) []byte {
	t.Helper()
	var b []byte
	if err := db.QueryRow(`SELECT state FROM rooms WHERE channel = ?`, ch).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHomeSealsRoomSecrets: the home's database holds room states and a
// pending join's KeyPackage private keys only sealed with a key from the
// seed. The database alone, or with another seed, opens no room; a
// state moved to another room's row is refused; and a home from before
// sealing is sealed when it is opened, and goes on working.
func TestHomeSealsRoomSecrets(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	other, err := alice.Room("other").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	tok, err := alice.Room(room).Invite(ctx, &seat.InviteOptions{Uses: 0, TTL: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err == nil {
		t.Fatal("join before admit")
	}

	// Sealed at rest: nothing of it restores as a group or parses as a
	// KeyPackage bundle.
	db := homeDB(t, alice.home)
	state := storedState(t, db, room)
	if !bytes.HasPrefix(state, []byte("SKL1")) {
		t.Fatalf("stored state starts %x", state[:8])
	}
	if _, err := mls.RestoreGroup(state, nil); err == nil {
		t.Fatal("the stored state restores without the seed")
	}
	plain, err := seat.UnsealStored(alice.Seat, "room state", room, state)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mls.RestoreGroup(plain, nil); err != nil {
		t.Fatalf("the unsealed state: %v", err)
	}
	var kp []byte
	if err := homeDB(t, carol.home).QueryRow(`SELECT private FROM key_packages`).Scan(&kp); err != nil {
		t.Fatal(err)
	}
	if _, err := mls.ParseKeyPackageBundle(kp); err == nil || !bytes.HasPrefix(kp, []byte("SKL1")) {
		t.Fatalf("the pending KeyPackage's private keys are stored in the clear (%x…)", kp[:8])
	}
	if _, err := carol.Room(room).Join(ctx, "", &seat.JoinOptions{Wait: 0}); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatalf("carol's resumed join: %v, want the wait for admission", err)
	}

	// A state moved to another room's row does not open.
	if _, err := db.Exec(`UPDATE rooms SET state = ? WHERE channel = ?`, state, other); err != nil {
		t.Fatal(err)
	}
	if _, _, err := roomMembers(alice, ctx, "other"); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("a moved state: %v", err)
	}

	// The database with another seed opens no room and no history.
	sendTo(t, alice, room, "before the theft")
	if _, err := bob.Room(room).Sync(ctx); err != nil {
		t.Fatal(err)
	}
	stolen := t.TempDir()
	bob.Close(context.Background())
	for _, name := range []string{"seat.db", "seat.db-wal"} {
		if b, err := os.ReadFile(filepath.Join(bob.home, name)); err == nil {
			if err := os.WriteFile(filepath.Join(stolen, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	thief := openSeat(t, st, stolen)
	if _, err := thief.Init(ctx); err != nil {
		t.Fatal(err)
	}
	if msgs, err := thief.Room(room).History(ctx); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("bob's history under another seed: %d messages, %v", len(msgs), err)
	}
	if _, _, err := roomMembers(thief, ctx, room); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("bob's room under another seed: %v", err)
	}

	// A home from before sealing: its state in the clear and no mark.
	bob2 := openSeat(t, st, bob.home)
	bdb := homeDB(t, bob.home)
	plainBob, err := seat.UnsealStored(bob2, "room state", room, storedState(t, bdb, room))
	if err != nil {
		t.Fatal(err)
	}
	bob2.Close(context.Background())
	if _, err := bdb.Exec(`UPDATE rooms SET state = ? WHERE channel = ?`, plainBob, room); err != nil {
		t.Fatal(err)
	}
	if _, err := bdb.Exec(`DELETE FROM meta WHERE key = 'local_sealed'`); err != nil {
		t.Fatal(err)
	}
	bob3 := openSeat(t, st, bob.home)
	if got := storedState(t, bdb, room); !bytes.HasPrefix(got, []byte("SKL1")) {
		t.Fatal("the legacy state was not sealed on open")
	}
	sendTo(t, alice, room, "after sealing")
	msgs, err := bob3.Room(room).Sync(ctx)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "after sealing" {
		t.Fatalf("bob after his home was sealed: %+v %v", msgs, err)
	}
}

// copyHome copies the home's database (and its write-ahead log, if the
// seat left one) into a new folder, with the phrase file only if
// withPhrase.
func copyHome(t *testing.T, home string, withPhrase bool) string {
	t.Helper()
	dst := t.TempDir()
	names := []string{"seat.db", "seat.db-wal"}
	if withPhrase {
		names = append(names, "phrase")
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(home, name))
		if errors.Is(err, os.ErrNotExist) && name == "seat.db-wal" {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// rawLeaks names the secrets that appear, byte for byte, anywhere in the
// home's database files.
func rawLeaks(t *testing.T, home string, secrets ...string) []string {
	t.Helper()
	var raw []byte
	for _, name := range []string{"seat.db", "seat.db-wal"} {
		b, err := os.ReadFile(filepath.Join(home, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	var out []string
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			out = append(out, s)
		}
	}
	return out
}

// A conversation in a room of two, each with a name, a sync credential
// and a personal log.
type sealScene struct {
	st           *skytaletest.Stack
	alice, bob   *member
	room         string
	said, secret []string
}

func newSealScene(t *testing.T) *sealScene {
	t.Helper()
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	for _, m := range []*member{alice, bob} {
		if _, err := m.Connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := alice.SetName(ctx, "Wilhelmina Quartz"); err != nil {
		t.Fatal(err)
	}
	if err := bob.SetName(ctx, "Bartholomew Zed"); err != nil {
		t.Fatal(err)
	}
	// Names travel with the messages; each reads the other's.
	said := []string{"the vault opens at plover o'clock", "bring the turquoise umbrella", "and the second tray", "noted, second tray"}
	for i, text := range said {
		from, to := alice, bob
		if i%2 == 1 {
			from, to = bob, alice
		}
		sendTo(t, from, room, text)
		if _, err := to.Room(room).Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bob.Add(ctx, "pay the locksmith in cash"); err != nil {
		t.Fatal(err)
	}
	sc := &sealScene{st: st, alice: alice, bob: bob, room: room, said: said}
	sc.secret = append(append(sc.secret, said...), "Wilhelmina Quartz", "Bartholomew Zed",
		"pay the locksmith in cash", alice.acct.APIKey, bob.acct.APIKey, "sk_live_", "sk_chan_")
	return sc
}

func historyTexts(t *testing.T, s *seat.Seat, room string) (texts, names []string) {
	t.Helper()
	msgs, err := s.Room(room).History(context.Background())
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	for _, m := range msgs {
		if m.Kind == "" {
			texts = append(texts, m.Text)
			names = append(names, m.SenderName)
		}
	}
	return texts, names
}

// TestHomeCopyWithoutPhraseOpensNothing: a copy of seat.db without the
// phrase file holds none of the room's messages, the names people gave,
// the personal log or the credentials in its bytes, and a home opened
// from it opens no history, no room, no log and no credential, with a
// clear error; with the phrase file beside it, the copy works as the home
// did.
func TestHomeCopyWithoutPhraseOpensNothing(t *testing.T) {
	ctx := context.Background()
	sc := newSealScene(t)
	// A copy taken while the seats have their homes open, write-ahead
	// log and all.
	for _, m := range []*member{sc.alice, sc.bob} {
		if leaks := rawLeaks(t, copyHome(t, m.home, false), sc.secret...); len(leaks) > 0 {
			t.Errorf("a copy of %s's open home holds in the clear: %q", m.acct.Org, leaks)
		}
	}
	sc.alice.Close(context.Background())
	sc.bob.Close(context.Background())

	for _, m := range []*member{sc.alice, sc.bob} {
		cp := copyHome(t, m.home, false)
		if leaks := rawLeaks(t, cp, sc.secret...); len(leaks) > 0 {
			t.Errorf("a copy of %s's seat.db holds in the clear: %q", m.acct.Org, leaks)
		}
		thief := openSeat(t, sc.st, cp)
		msgs, err := thief.Room(sc.room).History(ctx)
		if !errors.Is(err, seat.ErrNoSeed) {
			t.Errorf("history without the phrase: %d messages, %v; want ErrNoSeed", len(msgs), err)
		}
		if _, _, err := roomMembers(thief, ctx, sc.room); !errors.Is(err, seat.ErrNoSeed) {
			t.Errorf("room without the phrase: %v; want ErrNoSeed", err)
		}
		if _, _, err := thief.OrgInvite(ctx, 1, 0); !errors.Is(err, seat.ErrNoSeed) {
			t.Errorf("the API key without the phrase: %v; want ErrNoSeed", err)
		}
		if es, err := thief.Log(ctx); !errors.Is(err, seat.ErrNoSeed) {
			t.Errorf("the log without the phrase: %d entries, %v; want ErrNoSeed", len(es), err)
		}
		if _, err := thief.Name(ctx); !errors.Is(err, seat.ErrNoSeed) {
			t.Errorf("the name without the phrase: %v; want ErrNoSeed", err)
		}
		// `tally config` still reads the settings it can.
		if cfg, err := seat.Settings(ctx, cp); err != nil || cfg["name"] != "" {
			t.Errorf("settings without the phrase: %q %v", cfg, err)
		}
	}

	// The same copy with the phrase file works as the home did.
	home := copyHome(t, sc.bob.home, true)
	b := openSeat(t, sc.st, home)
	texts, names := historyTexts(t, b, sc.room)
	if strings.Join(texts, "|") != strings.Join(sc.said, "|") {
		t.Fatalf("history with the phrase: %q, want %q", texts, sc.said)
	}
	if names[len(names)-2] != "Wilhelmina Quartz" || names[len(names)-1] != "Bartholomew Zed" {
		t.Fatalf("names with the phrase: %q", names)
	}
	if n, _ := b.Name(ctx); n != "Bartholomew Zed" {
		t.Fatalf("own name with the phrase: %q", n)
	}
	if cfg, err := seat.Settings(ctx, home); err != nil || cfg["name"] != "Bartholomew Zed" {
		t.Fatalf("settings with the phrase: %q %v", cfg, err)
	}
	if err := seat.SetSetting(ctx, home, "name", "Bart Zed"); err != nil {
		t.Fatal(err)
	}
	if leaks := rawLeaks(t, home, "Bart Zed"); len(leaks) > 0 {
		t.Fatal("tally config set name stored the name in the clear")
	}
	if n, err := b.Name(ctx); err != nil || n != "Bart Zed" {
		t.Fatalf("name set by config: %q %v", n, err)
	}
	if _, _, err := b.OrgInvite(ctx, 1, 0); err != nil {
		t.Fatalf("the API key with the phrase: %v", err)
	}
	if es, err := b.Log(ctx); err != nil || len(es) != 1 || es[0].Text != "pay the locksmith in cash" {
		t.Fatalf("the log with the phrase: %+v %v", es, err)
	}
	if _, err := b.Push(ctx); err != nil { // the sync credential
		t.Fatalf("push with the phrase: %v", err)
	}
	a := openSeat(t, sc.st, sc.alice.home)
	sendTo(t, &member{Seat: a}, sc.room, "still here")
	msgs, err := b.Room(sc.room).Sync(ctx)
	if err != nil || len(msgs) == 0 || msgs[0].Text != "still here" {
		t.Fatalf("the room with the phrase: %+v %v", msgs, err)
	}
}

// TestHomeSealedValuesRefuseAnotherSeed: what a home sealed does not open
// under another phrase, nor moved to another row, nor changed: each read
// fails with a clear error, never empty and never a panic.
func TestHomeSealedValuesRefuseAnotherSeed(t *testing.T) {
	ctx := context.Background()
	sc := newSealScene(t)
	sc.bob.Close(context.Background())

	// Another phrase in the copied home.
	cp := copyHome(t, sc.bob.home, false)
	thief := openSeat(t, sc.st, cp)
	if _, err := thief.Init(ctx); err != nil {
		t.Fatal(err)
	}
	const refused = "does not open"
	if msgs, err := thief.Room(sc.room).History(ctx); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("history under another phrase: %d messages, %v", len(msgs), err)
	}
	if _, _, err := thief.OrgInvite(ctx, 1, 0); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("the API key under another phrase: %v", err)
	}
	if es, err := thief.Log(ctx); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("the log under another phrase: %d entries, %v", len(es), err)
	}
	if _, err := thief.Name(ctx); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("the name under another phrase: %v", err)
	}

	// With the right phrase, a history row's sealed body moved onto
	// another row, and a changed credential.
	home := copyHome(t, sc.bob.home, true)
	db := homeDB(t, home)
	if _, err := db.Exec(`UPDATE room_history SET body = (SELECT body FROM room_history WHERE kind = '' ORDER BY seq LIMIT 1)
		WHERE seq = (SELECT max(seq) FROM room_history WHERE kind = '')`); err != nil {
		t.Fatal(err)
	}
	b := openSeat(t, sc.st, home)
	if msgs, err := b.Room(sc.room).History(ctx); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("history with a moved row: %d messages, %v", len(msgs), err)
	}
	var key []byte
	if err := db.QueryRow(`SELECT value FROM meta WHERE key = 'api_key'`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	key[len(key)-1] ^= 1
	if _, err := db.Exec(`UPDATE meta SET value = ? WHERE key = 'api_key'`, key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.OrgInvite(ctx, 1, 0); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("a changed API key: %v", err)
	}
}

// TestHomeFromBeforeSealingIsSealedOnOpen: a home written the way homes
// were before history, the log, credentials and names were sealed (the
// schema before the body columns, every such value in the clear, the
// first round's mark) is sealed when it is opened with its phrase: in
// one step, with no clear byte left in its files, idempotent, and the
// home goes on working.
func TestHomeFromBeforeSealingIsSealedOnOpen(t *testing.T) {
	ctx := context.Background()
	sc := newSealScene(t)
	b := sc.bob
	msgs, err := b.Room(sc.room).History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := b.Log(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := homeDB(t, b.home)
	var sealedCred []byte
	if err := db.QueryRow(`SELECT value FROM meta WHERE key = 'seat_credential'`).Scan(&sealedCred); err != nil {
		t.Fatal(err)
	}
	cred, err := seat.UnsealStored(b.Seat, "credential", "seat_credential", sealedCred)
	if err != nil {
		t.Fatal(err)
	}
	b.Close(context.Background())

	// The home the old way: the step that added the sealed columns is
	// the last of storeMigrations, and is undone here.
	var version int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, m := range msgs {
		exec(`UPDATE room_history SET sender = ?, text = ? WHERE channel = ? AND seq = ?`, m.Sender, m.Text, m.Room, m.Seq)
	}
	for _, e := range entries {
		exec(`UPDATE log SET text = ? WHERE id = ?`, e.Text, e.ID[:])
	}
	exec(`ALTER TABLE room_history DROP COLUMN body`)
	exec(`ALTER TABLE log DROP COLUMN body`)
	exec(`UPDATE meta SET value = ? WHERE key = 'api_key'`, b.acct.APIKey)
	exec(`UPDATE meta SET value = ? WHERE key = 'seat_credential'`, string(cred))
	exec(`UPDATE meta SET value = '1' WHERE key = 'local_sealed'`)
	exec(`UPDATE rooms SET name_sent = 'Bartholomew Zed'`)
	exec(`UPDATE settings SET value = 'Bartholomew Zed' WHERE key = 'name'`)
	exec(fmt.Sprintf(`PRAGMA user_version = %d`, version-1))
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if leaks := rawLeaks(t, b.home, sc.secret...); len(leaks) < len(sc.said)+3 {
		t.Fatalf("the old home does not hold its values in the clear: %q", leaks)
	}

	// Opened with its phrase: sealed.
	s := openSeat(t, sc.st, b.home)
	if leaks := rawLeaks(t, b.home, sc.secret...); len(leaks) > 0 {
		t.Fatalf("after sealing, the home's files hold in the clear: %q", leaks)
	}
	if leaks := rawLeaks(t, copyHome(t, b.home, false), sc.secret...); len(leaks) > 0 {
		t.Fatalf("a copy after sealing holds in the clear: %q", leaks)
	}
	thief := openSeat(t, sc.st, copyHome(t, b.home, false))
	if _, err := thief.Room(sc.room).History(ctx); !errors.Is(err, seat.ErrNoSeed) {
		t.Fatalf("history of a sealed old home without its phrase: %v", err)
	}

	// Sealed once: opening again changes nothing.
	db = homeDB(t, b.home)
	snapshot := func() string {
		t.Helper()
		var out []string
		for _, q := range []string{
			`SELECT quote(body) FROM room_history ORDER BY channel, seq`,
			`SELECT quote(body) FROM log ORDER BY pos`,
			`SELECT key || quote(value) FROM meta ORDER BY key`,
			`SELECT quote(name_sent) FROM rooms ORDER BY channel`,
			`SELECT quote(value) FROM settings ORDER BY key`,
		} {
			rows, err := db.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					t.Fatal(err)
				}
				out = append(out, v)
			}
			rows.Close()
		}
		return strings.Join(out, "\n")
	}
	before := snapshot()
	if !strings.Contains(before, "local_sealed'2'") {
		t.Fatalf("the home is not marked sealed:\n%s", before)
	}
	s.Close(context.Background())
	s = openSeat(t, sc.st, b.home)
	if snapshot() != before {
		t.Fatal("opening a sealed home again changed its sealed values")
	}

	// And it works as before.
	texts, names := historyTexts(t, s, sc.room)
	if strings.Join(texts, "|") != strings.Join(sc.said, "|") || names[len(names)-1] != "Bartholomew Zed" {
		t.Fatalf("history after sealing: %q %q", texts, names)
	}
	if n, err := s.Name(ctx); err != nil || n != "Bartholomew Zed" {
		t.Fatalf("name after sealing: %q %v", n, err)
	}
	if es, err := s.Log(ctx); err != nil || len(es) != 1 || es[0].Text != entries[0].Text {
		t.Fatalf("log after sealing: %+v %v", es, err)
	}
	if _, _, err := s.OrgInvite(ctx, 1, 0); err != nil {
		t.Fatalf("the API key after sealing: %v", err)
	}
	if _, err := s.Push(ctx); err != nil {
		t.Fatalf("push with the sealed credential: %v", err)
	}
	sendTo(t, sc.alice, sc.room, "after sealing")
	if got, err := s.Room(sc.room).Sync(ctx); err != nil || len(got) != 1 || got[0].Text != "after sealing" {
		t.Fatalf("the room after sealing: %+v %v", got, err)
	}
}
