package seat_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
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
	other, err := alice.RoomCreate(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	carol := newMember(t, st, "carolco")
	tok, err := alice.RoomInvite(ctx, room, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := carol.RoomJoin(ctx, room, tok, 0); err == nil {
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
	if _, err := carol.RoomJoin(ctx, room, "", 0); !errors.Is(err, seat.ErrWelcomeWait) {
		t.Fatalf("carol's resumed join: %v, want the wait for admission", err)
	}

	// A state moved to another room's row does not open.
	if _, err := db.Exec(`UPDATE rooms SET state = ? WHERE channel = ?`, state, other); err != nil {
		t.Fatal(err)
	}
	if _, _, err := alice.RoomMembers(ctx, "other"); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("a moved state: %v", err)
	}

	// The database with another seed opens no room.
	stolen := t.TempDir()
	bob.Close()
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
	if _, err := thief.RoomHistory(ctx, room); err != nil {
		t.Fatal(err) // the history is not a secret of the group
	}
	if _, _, err := thief.RoomMembers(ctx, room); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("bob's room under another seed: %v", err)
	}

	// A home from before sealing: its state in the clear and no mark.
	bob2 := openSeat(t, st, bob.home)
	bdb := homeDB(t, bob.home)
	plainBob, err := seat.UnsealStored(bob2, "room state", room, storedState(t, bdb, room))
	if err != nil {
		t.Fatal(err)
	}
	bob2.Close()
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
	msgs, err := bob3.RoomSync(ctx, room)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "after sealing" {
		t.Fatalf("bob after his home was sealed: %+v %v", msgs, err)
	}
}
