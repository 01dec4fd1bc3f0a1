package relay

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestNoEntryNamesItsSender: after a channel's first publisher and another
// member publish on it, no stored entry names either: the SQLite
// archive's files (database, WAL and log segments, after a checkpoint)
// never hold the member's account, and the payer's only once per channel
// whatever the number of entries; on JetStream the same holds of every
// file of the nats-server's store (the payer is one record per channel,
// see budget.go).
func TestNoEntryNamesItsSender(t *testing.T) { forBackends(t, testNoEntryNamesItsSender) }

func testNoEntryNamesItsSender(t *testing.T, be *testBackend) {
	const payer, member = "payer-account-5d1e", "member-account-93ac"
	dir := t.TempDir()
	tr := be.start(t, Config{DBPath: filepath.Join(dir, "relay.db"), NoSync: true, OpenChannels: true, CheckpointInterval: 10 * time.Millisecond})
	p := dialWS(t, tr.URL, "/ws/"+chA)
	p.auth(mint(t, payer, ""))
	m := dialWS(t, tr.URL, "/ws/"+chA)
	m.auth(mint(t, member, ""))
	msg := map[string]any{"type": "message"}
	p.publishAck(chA, []byte("the first entry"))
	m.expect(msg)
	count := func() (int, int) {
		dir := dir
		if be.nats != nil {
			// Every file of the JetStream store: the stream's message
			// blocks (written through, SyncAlways), its index and meta.
			dir = be.nats.dir
		} else {
			settled(t, tr)
			waitfor.True(t, 15*time.Second, func() bool {
				fi, err := os.Stat(filepath.Join(dir, "relay.db-wal"))
				return err != nil || fi.Size() == 0
			}, "the WAL was not checkpointed")
		}
		var np, nm int
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(path)
			np += bytes.Count(b, []byte(payer))
			nm += bytes.Count(b, []byte(member))
			return nil
		})
		return np, nm
	}
	for range 2 {
		m.publishAck(chA, []byte("from the member"))
		p.expect(msg)
	}
	p1, m1 := count()
	for range 10 {
		m.publishAck(chA, []byte("from the member"))
		p.expect(msg)
		p.publishAck(chA, []byte("from the payer"))
		m.expect(msg)
	}
	p2, m2 := count()
	if m1 != 0 || m2 != 0 {
		t.Errorf("the member's account is stored %d times after 3 entries, %d after 23", m1, m2)
	}
	if p1 != p2 {
		t.Errorf("the payer's account is stored %d times after 3 entries, %d after 23", p1, p2)
	}
}
