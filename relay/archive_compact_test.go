package relay

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
)

// TestLogPinnedSegmentsCompacted is a publisher who keeps every segment
// of the log alive: a burst to a busy channel, whose cap evicts it, then
// one entry to one of many quiet channels, which keep theirs, and again.
// Without compaction every segment would hold one live entry, and the log
// would grow with all that was written within the TTL, whatever the caps
// and quotas. The log must stay within twice what is stored plus the
// compactor's slack, and every entry kept must read back intact, before
// and after a restart.
func TestLogPinnedSegmentsCompacted(t *testing.T) {
	const seg = 64 << 10
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, ArchiveCap: 8, logSegment: seg}
	tr := startRelay(t, cfg)
	tok := mint(t, "mallory", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	const quiet, rounds, burst = 16, 96, 64 // about 6 MiB written
	pin := func(q, round int) []byte { return fmt.Appendf(bytes.Repeat([]byte{'q'}, 1000), "%d/%d", q, round) }
	kept := map[string]map[uint64][]byte{} // channel → seq → payload, the newest cap of each quiet channel
	for q := range quiet {
		c.subscribe(fmt.Sprintf("acme/quiet/%d", q))
	}
	for round := range rounds {
		for i := range burst {
			c.publish(chA, fmt.Appendf(bytes.Repeat([]byte{'b'}, 1000), "%d/%d", round, i))
		}
		for range burst {
			c.expect(map[string]any{"type": "ok", "message": "published"})
		}
		q := round % quiet
		ch := fmt.Sprintf("acme/quiet/%d", q)
		p := pin(q, round)
		seq := c.publishAck(ch, p)
		if kept[ch] == nil {
			kept[ch] = map[uint64][]byte{}
		}
		kept[ch][seq] = p
	}
	written := int64(rounds * (burst + 1) * 1000)

	stored := settled(t, tr).StoredBytes()
	// The compactor's bound, and the current segment, the one prepared
	// next and the files kept for reuse.
	bound := 2*stored + (sqlitearchive.CompactSlack+2+seglog.MaxFree)*seg
	waitfor.Nil(t, 20*time.Second, func() error {
		n, total := segFootprint(t, path)
		if total <= bound {
			t.Logf("%d KiB written, %d KiB stored, log %d segments, %d KiB (bound %d KiB)", written>>10, stored>>10, n, total>>10, bound>>10)
			return nil
		}
		// Compaction runs as segments fill: keep the log moving.
		c.publishAck(chA, []byte("tick"))
		return fmt.Errorf("the log holds %d segments, %d KiB, for %d KiB stored: over the bound of %d KiB", n, total>>10, stored>>10, bound>>10)
	})

	check := func(tr *testRelay, when string) {
		t.Helper()
		for ch, want := range kept {
			_, m := httpGet(t, tr.URL+"/v1/messages?channel="+ch, tok)
			msgs := m["messages"].([]any)
			got := map[uint64][]byte{}
			for _, e := range msgs {
				e := e.(map[string]any)
				p, err := base64.StdEncoding.DecodeString(e["payload"].(string))
				if err != nil {
					t.Fatal(err)
				}
				got[uint64(e["seq"].(float64))] = p
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %s serves %d entries, want %d", when, ch, len(got), len(want))
			}
			for seq, p := range want {
				if !bytes.Equal(got[seq], p) {
					t.Fatalf("%s: %s seq %d reads %q, want %q", when, ch, seq, got[seq], p)
				}
			}
		}
	}
	check(tr, "after compaction")
	c.c.CloseNow()
	tr.stop(t)
	check(startRelay(t, cfg), "after a restart")
}
