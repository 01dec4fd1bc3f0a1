package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestBackupArchiveWhileWriting copies a relay's archive while a
// publisher writes to it fast enough that the log keeps starting, removing
// and reusing small segments, and the compactor moves entries. Each copy
// must serve, on its own, every entry of the quiet channels acknowledged
// before the copy began, and every entry it serves must be the one that
// was acknowledged at that seq: a segment reused under the copy must never
// show through as another entry's bytes.
func TestBackupArchiveWhileWriting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true, ArchiveCap: 8, logSegment: 64 << 10})
	tok := mint(t, "alice", "")
	const quiet = 4
	quietCh := func(q int) string { return fmt.Sprintf("acme/quiet/%d", q) }

	var mu sync.Mutex
	acked := map[string]map[uint64][]byte{}
	ack := func(ch string, seq uint64, p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if acked[ch] == nil {
			acked[ch] = map[uint64][]byte{}
		}
		acked[ch][seq] = p
	}
	snapshot := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		n := map[string]int{}
		for q := range quiet {
			n[quietCh(q)] = len(acked[quietCh(q)])
		}
		return n
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	for q := range quiet {
		c.subscribe(quietCh(q))
	}
	wg.Go(func() {
		for round := 0; ctx.Err() == nil; round++ {
			for i := range 32 {
				c.publish(chA, fmt.Appendf(bytes.Repeat([]byte{'b'}, 1000), "%d/%d", round, i))
			}
			for range 32 {
				c.expect(map[string]any{"type": "ok", "message": "published"})
			}
			if round%4 == 0 {
				ch := quietCh(round / 4 % quiet)
				p := fmt.Appendf(bytes.Repeat([]byte{'q'}, 1000), "%d", round)
				ack(ch, c.publishAck(ch, p), p)
			}
		}
	})
	defer func() { stop(); wg.Wait() }()

	for i := range 3 {
		waitfor.True(t, 10*time.Second, func() bool { return snapshot()[quietCh(3)] > 2*i+1 }, "the publisher makes no progress")
		before := snapshot()
		dst := filepath.Join(t.TempDir(), "relay.db")
		if err := BackupArchive(context.Background(), path, dst); err != nil {
			t.Fatalf("backup %d: %v", i, err)
		}
		cp := startRelay(t, Config{DBPath: dst, NoSync: true, ArchiveCap: 8, logSegment: 64 << 10})
		cp.inCluster = true // the original runs on in this process
		for q := range quiet {
			ch := quietCh(q)
			_, m := httpGet(t, cp.URL+"/v1/messages?channel="+ch, tok)
			msgs := m["messages"].([]any)
			if len(msgs) < min(before[ch], 8) {
				t.Fatalf("backup %d: %s serves %d entries, but %d were acked before the backup", i, ch, len(msgs), before[ch])
			}
			mu.Lock()
			for _, e := range msgs {
				e := e.(map[string]any)
				p, _ := base64.StdEncoding.DecodeString(e["payload"].(string))
				seq := uint64(e["seq"].(float64))
				if want, ok := acked[ch][seq]; ok && !bytes.Equal(p, want) {
					mu.Unlock()
					t.Fatalf("backup %d: %s seq %d reads %q, acked as %q", i, ch, seq, p, want)
				}
			}
			mu.Unlock()
		}
		// The busy channel's entries in the copy are its own too.
		_, m := httpGet(t, cp.URL+"/v1/messages?channel="+chA, tok)
		for _, e := range m["messages"].([]any) {
			p, _ := base64.StdEncoding.DecodeString(e.(map[string]any)["payload"].(string))
			if len(p) < 1000 || p[0] != 'b' {
				t.Fatalf("backup %d: %s serves %q", i, chA, p)
			}
		}
		cp.stop(t)
	}
}

// TestBackupArchiveRefusesExisting: a backup into a file or log folder
// that exists already is refused before anything is written, and what was
// there is left as it was (a failed copy removes what it wrote).
func TestBackupArchiveRefusesExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, []byte("entry"))
	for _, existing := range []string{"file", "log folder"} {
		dir := t.TempDir()
		dst := filepath.Join(dir, "relay.db")
		mine := dst
		if existing == "log folder" {
			if err := os.Mkdir(LogDir(dst), 0o700); err != nil {
				t.Fatal(err)
			}
			mine = filepath.Join(LogDir(dst), "mine")
		}
		if err := os.WriteFile(mine, []byte("not a backup"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := BackupArchive(context.Background(), path, dst); err == nil || !strings.Contains(err.Error(), "exists already") {
			t.Fatalf("backup over an existing %s: %v", existing, err)
		}
		if b, err := os.ReadFile(mine); err != nil || string(b) != "not a backup" {
			t.Fatalf("the existing %s after a refused backup: %q %v", existing, b, err)
		}
	}
}
