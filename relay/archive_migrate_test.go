package relay

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
)

// oldArchive makes a file-backed archive as a relay from before the log
// left it: every entry's payload in its row (seg NULL, at 0), no log
// position, no log folder. It returns the entries acknowledged, and the
// database's path.
func oldArchive(t *testing.T, cfg Config) []logEntry {
	t.Helper()
	tr := startRelay(t, cfg)
	p := newLogPublisher(t, tr.URL, nil)
	p.publish(chA, 300, 300, 50, false) // over a page of moves, commits among them
	p.publish(chLog, 20, 1000, 0, true)
	settled(t, tr)
	p.c.c.CloseNow()
	tr.stop(t)

	db := openIndex(t, cfg.DBPath)
	for _, e := range p.acked {
		execSQL(t, db, `UPDATE messages SET payload = ?, seg = NULL, at = 0 WHERE channel = ? AND seq = ?`, e.payload, e.ch, int64(e.seq))
	}
	execSQL(t, db, `DELETE FROM state WHERE key IN ('log_seg', 'log_off', 'log_synced')`)
	execSQL(t, db, `DROP INDEX IF EXISTS messages_inline`)
	if n := queryInt(t, db, `SELECT count(*) FROM messages WHERE seg IS NOT NULL`); n != 0 {
		t.Fatalf("%d rows still point into the log", n)
	}
	db.Close()
	if err := os.RemoveAll(logDir(cfg.DBPath)); err != nil {
		t.Fatal(err)
	}
	return p.acked
}

// awaitMigrated waits until no row of tr's archive holds its payload.
func awaitMigrated(t *testing.T, tr *testRelay) {
	t.Helper()
	waitfor.Nil(t, 20*time.Second, func() error {
		if n := queryInt(t, tr.db, `SELECT count(*) FROM messages WHERE seg IS NULL OR length(payload) > 0`); n != 0 {
			return fmt.Errorf("%d rows still hold their payloads", n)
		}
		return nil
	})
	settled(t, tr)
}

// TestLogMigratesInlineRows: an archive from before the log opens, serves
// every entry from its rows, and moves the payloads into the log in the
// background; after that (and after a restart) every entry is served
// from the log, with its bytes, and no row holds a payload.
func TestLogMigratesInlineRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, logSegment: 64 << 10}
	want := oldArchive(t, cfg)

	tr := startRelay(t, cfg)
	checkServed(t, tr.URL, want) // from the rows, or from the log: either way whole
	awaitMigrated(t, tr)
	checkServed(t, tr.URL, want)
	moved := 0
	tr.stop(t)
	for _, r := range logRecords(t, path) {
		if r.rec.Flags&seglog.FlagMoved != 0 {
			moved++
		}
	}
	if moved != len(want) {
		t.Fatalf("%d moved records in the log for %d entries", moved, len(want))
	}

	tr = startRelay(t, cfg)
	settled(t, tr)
	checkServed(t, tr.URL, want)
	if n := queryInt(t, tr.db, `SELECT count(*) FROM messages WHERE seg IS NULL`); n != 0 {
		t.Fatalf("%d rows hold their payloads after a restart", n)
	}
}

// TestLogMigrationReplayed: a crash after the moves' records are flushed
// but before the index has them (the database as it was before) repoints
// the rows from the log at the next open, which then has nothing left to
// move; nothing is lost or moved twice.
func TestLogMigrationReplayed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, logSegment: 64 << 10}
	want := oldArchive(t, cfg)
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	tr := startRelay(t, cfg)
	awaitMigrated(t, tr)
	tr.stop(t)
	records := len(logRecords(t, path))

	// The crash: the index loses every transaction since the open.
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := os.WriteFile(path, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	tr = startRelay(t, cfg)
	settled(t, tr)
	if n := queryInt(t, tr.db, `SELECT count(*) FROM messages WHERE seg IS NULL OR length(payload) > 0`); n != 0 {
		t.Fatalf("%d rows hold their payloads after the replay", n)
	}
	checkServed(t, tr.URL, want)
	tr.stop(t)
	if n := len(logRecords(t, path)); n != records {
		t.Fatalf("%d records in the log after the replay, want the %d before it: entries moved twice", n, records)
	}
}

// TestMigrationDropsSenders upgrades an archive whose rows name their
// senders (the schema before the channel paid for its entries): the
// column goes, and its bytes with it (no file of the archive holds a
// sender's name after a checkpoint); the channel's payer is the account
// of its oldest entry, charged for every entry of the channel; the
// entries are served as before, moved into the log.
func TestMigrationDropsSenders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const before = 5 // the sqlitearchive.Migrations of an archive that kept a sender per row
	if len(sqlitearchive.Migrations) != before+1 {
		t.Fatalf("%d sqlitearchive.Migrations: this test builds the archive of the %d before the senders went", len(sqlitearchive.Migrations), before)
	}
	if err := sqlitedb.Migrate(t.Context(), db, sqlitearchive.Migrations[:before]); err != nil {
		t.Fatal(err)
	}
	const first, second = "sender-first-4f1c9a", "sender-second-8b2e07"
	var want []logEntry
	for i, sub := range []string{first, second, second, first} {
		e := logEntry{ch: chA, seq: uint64(i + 1), payload: fmt.Appendf(nil, "payload %d of the old archive", i), et: EntryApp}
		execSQL(t, db, `INSERT INTO messages (channel, seq, entry_type, ts, payload, sub, size) VALUES (?, ?, 0, ?, ?, ?, ?)`,
			e.ch, int64(e.seq), time.Now().UnixMilli(), e.payload, sub, len(e.payload))
		want = append(want, e)
	}
	execSQL(t, db, `INSERT INTO channels (name, reserved) VALUES (?, 4)`, chA)
	execSQL(t, db, `INSERT INTO usage (sub, bytes) VALUES (?, 1), (?, 2)`, first, second)
	execSQL(t, db, `INSERT INTO state (key, value) VALUES ('usage_clean', 1)`)
	db.Close()

	tr := startRelay(t, Config{DBPath: path, NoSync: true, CheckpointInterval: 10 * time.Millisecond})
	awaitMigrated(t, tr)
	checkServed(t, tr.URL, want)
	if n := queryInt(t, tr.db, `SELECT count(*) FROM pragma_table_info('messages') WHERE name = 'sub'`); n != 0 {
		t.Fatal("the messages table still has its sub column")
	}
	var total int64
	for _, e := range want {
		total += int64(len(e.payload))
	}
	if got, other := tr.arch.Used(first), tr.arch.Used(second); got != total || other != 0 {
		t.Fatalf("the channel's payer uses %d bytes (want %d), the other sender %d (want 0)", got, total, other)
	}
	waitfor.Nil(t, 15*time.Second, func() error {
		var left []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(second)) {
				left = append(left, filepath.Base(p))
			}
			return nil
		})
		if len(left) != 0 {
			return fmt.Errorf("a sender who pays for nothing is still named in %v", left)
		}
		return nil
	})
}

// TestOlderSegmentsLoseTheirSenders upgrades a file-backed archive whose
// log records name their senders (subLen, as relays wrote them before
// the channel paid for its entries): after the open, no file of the
// archive holds the sender's name (the segments are rewritten and their
// files deleted, not reused), and every entry is served as before.
func TestOlderSegmentsLoseTheirSenders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	cfg := Config{DBPath: path, NoSync: true, CheckpointInterval: 10 * time.Millisecond}
	tr := startRelay(t, cfg)
	p := newLogPublisher(t, tr.URL, nil)
	p.publish(chLog, 12, 300, 0, false)
	p.publish(chA, 12, 200, 4, true)
	settled(t, tr)
	p.c.c.CloseNow()
	tr.stop(t)

	// The log as an older relay wrote it: each record names its sender,
	// the rows point at the payloads where they now are.
	const sender = "older-sender-61d0c2"
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var top uint64
	for _, seg := range logSegments(t, path) {
		var recs []seglog.Record
		var ats []int64
		l, _, err := seglog.Open(logDir(path), false, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Scan(seg, 0, func(r *seglog.Record, at int64) error {
			c := *r
			c.Payload = slices.Clone(r.Payload)
			recs, ats = append(recs, c), append(ats, at)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		l.Close()
		var b []byte
		for i := range recs {
			if recs[i].Kind == seglog.KindEntry {
				recs[i].Sub = sender
			}
			start := len(b)
			var at int
			if b, at, err = seglog.AppendRecord(b, seglog.Seed(seg), &recs[i]); err != nil {
				t.Fatal(err)
			}
			execSQL(t, db, `UPDATE messages SET at = ? WHERE seg = ? AND at = ?`, -int64(start+at), int64(seg), ats[i])
		}
		execSQL(t, db, `UPDATE messages SET at = -at WHERE seg = ? AND at < 0`, int64(seg))
		f, err := os.OpenFile(filepath.Join(logDir(path), seglog.Name(seg)), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		top = max(top, seg)
	}
	execSQL(t, db, `UPDATE state SET value = ? WHERE key = 'log_seg'`, int64(top+1))
	execSQL(t, db, `UPDATE state SET value = 0 WHERE key = 'log_off'`)
	execSQL(t, db, `DELETE FROM state WHERE key = 'senderless_from'`)
	db.Close()
	holding := func() []string {
		var in []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(sender)) {
				in = append(in, filepath.Base(p))
			}
			return nil
		})
		return in
	}
	if len(holding()) == 0 {
		t.Fatal("the older log names no sender: the test builds nothing to upgrade")
	}

	tr = startRelay(t, cfg)
	checkServed(t, tr.URL, p.acked)
	waitfor.Nil(t, 15*time.Second, func() error {
		if left := holding(); len(left) != 0 {
			return fmt.Errorf("the sender is still named in %v", left)
		}
		return nil
	})
	settled(t, tr)
	checkServed(t, tr.URL, p.acked)
}
