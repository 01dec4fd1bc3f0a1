package seat_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// sqliteSize is the bytes of the SQLite files under dir (the log's
// segments are written with zeros to their size before use, so their
// size says nothing of what they hold).
func sqliteSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(filepath.Base(p), ".db") && !strings.Contains(p, "-log") {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// recordOverhead is what a log segment adds to a payload: the record's
// header and fixed fields (relay/internal/seglog), and the channel's name.
const recordOverhead = 8 + 40

// TestCoverStorageCost measures what cover costs the relay's store: a
// watch sends cover (sped up, every 2 ms on average) on a real stack with
// the SQLite archive in a folder, until the room's log holds 300 cover
// entries more; the payload bytes the relay hands back per entry, and the
// growth of its data folder per entry, give the cost per watcher and day
// at the default rate (one frame a minute: 1,440 entries). Cover of an
// idle room follows the default size distribution (a 546-byte block on
// average), so a stored entry is that plus the MLS framing and the
// AEAD tag, and less than a bucket more.
func TestCoverStorageCost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay: skytale.RelayConfig{DBPath: filepath.Join(dir, "relay.db"), CheckpointInterval: 20 * time.Millisecond},
	})
	alice, _, room := roomOfTwo(t, st, "ops")
	ch := mustChannel(t, alice, room)
	tok := st.Token(t, alice.acct.APIKey)
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	entries := func() (n int, bytes int64, last uint64) {
		if _, err := rc.SyncAll(ctx, ch, 0, func(e seat.RelayEntry) error {
			n++
			bytes += int64(len(e.Payload))
			last = e.Seq
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n, bytes, last
	}
	n0, b0, _ := entries()
	disk0 := sqliteSize(t, dir)
	watcher, err := seat.Open(ctx, seat.Config{Home: alice.home, APIURL: st.APIURL, RelayURL: st.RelayURL, Cover: cover.Config{MeanInterval: 2 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close(context.Background()) })
	w := startWatch(t, watcher, room)
	const frames = 300
	waitfor.True(t, time.Minute, func() bool { n, _, _ := entries(); return n-n0 >= frames },
		"the watch sent too little cover in a minute")
	w.stop()
	n1, b1, _ := entries()
	time.Sleep(100 * time.Millisecond) // time passes: a checkpoint of the planes' files (nothing tells when one is done)
	disk1 := sqliteSize(t, dir)
	perEntry := float64(b1-b0) / float64(n1-n0)
	diskPerEntry := float64(disk1-disk0) / float64(n1-n0)
	const perDay = 24 * 60 // entries per watcher and day at the default rate
	record := perEntry + recordOverhead + float64(len(ch))
	t.Logf("%d cover entries: %.0f payload bytes each, a %.0f-byte log record, %.0f bytes of the SQLite index; per watcher and day at one a minute: %d entries, %.2f MB of payload, %.2f MB stored",
		n1-n0, perEntry, record, diskPerEntry, perDay, perEntry*perDay/1e6, (record+diskPerEntry)*perDay/1e6)
	if perEntry < 546 || perEntry > 546+256 {
		t.Errorf("a cover entry is stored at %.0f bytes on average, want the mean block of 546 bytes and its framing", perEntry)
	}
}
