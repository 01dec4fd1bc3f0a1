package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// floorPage is what a catch-up page says besides its entries.
type floorPage struct {
	Entries   []pageEntry `json:"entries"`
	Messages  []pageEntry `json:"messages"`
	HasMore   bool        `json:"has_more"`
	Truncated *bool       `json:"truncated"`
	OldestSeq *uint64     `json:"oldest_seq"`
}

func readFloorPage(t testing.TB, base, path, ch string, since uint64, tok string) floorPage {
	t.Helper()
	code, body := getRaw(t, fmt.Sprintf("%s%s?channel=%s&since_seq=%d", base, path, ch, since), tok)
	if code != 200 {
		t.Fatalf("%s since %d: %d %s", path, since, code, body)
	}
	var pg floorPage
	if err := json.Unmarshal(body, &pg); err != nil {
		t.Fatal(err)
	}
	if pg.Truncated == nil || pg.OldestSeq == nil {
		t.Fatalf("%s: page without truncated or oldest_seq: %s", path, body)
	}
	return pg
}

func expectFloor(t testing.TB, base, path, ch string, since uint64, tok string, trunc bool, oldest uint64) {
	t.Helper()
	pg := readFloorPage(t, base, path, ch, since, tok)
	if *pg.Truncated != trunc || *pg.OldestSeq != oldest {
		t.Fatalf("%s since %d: truncated %v oldest_seq %d, want %v %d", path, since, *pg.Truncated, *pg.OldestSeq, trunc, oldest)
	}
}

// TestTruncatedByCap: once the cap pushed entries out, a read from before
// the newest one it pushed out says truncated, a read from there or later
// does not, and oldest_seq is the oldest entry the log still holds. A
// channel whose first seqs are handshake entries is not truncated for
// /v1/messages: a gap below the oldest entry is no loss.
func TestTruncatedByCap(t *testing.T) { forBackends(t, testTruncatedByCap) }

func testTruncatedByCap(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true, OpenChannels: true, ArchiveCap: 4})
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	// Nothing stored yet.
	expectFloor(t, tr.URL, "/v1/sync", chA, 0, tok, false, 0)
	expectFloor(t, tr.URL, "/v1/messages", chA, 0, tok, false, 0)
	w := c.publishAck(chA, welcome())
	var app []uint64
	for i := range 3 {
		app = append(app, c.publishAck(chA, []byte{byte(i)}))
	}
	// Seqs start past the Welcome: not a loss.
	expectFloor(t, tr.URL, "/v1/messages", chA, 0, tok, false, app[0])
	expectFloor(t, tr.URL, "/v1/sync", chA, 0, tok, false, w)
	for i := range 7 {
		app = append(app, c.publishAck(chA, []byte{byte(10 + i)}))
	}
	// 10 application entries, the cap keeps the last 4: app[6:].
	held, lost := app[6], app[5]
	for _, path := range []string{"/v1/messages", "/v1/sync"} {
		oldest := held
		if path == "/v1/sync" {
			oldest = w // the Welcome is in the handshake log, under its own cap
		}
		expectFloor(t, tr.URL, path, chA, 0, tok, true, oldest)
		expectFloor(t, tr.URL, path, chA, app[4], tok, true, oldest)
		expectFloor(t, tr.URL, path, chA, lost, tok, false, oldest)
		expectFloor(t, tr.URL, path, chA, held, tok, false, oldest)
		expectFloor(t, tr.URL, path, chA, app[9], tok, false, oldest)
		expectFloor(t, tr.URL, path, chA, app[9]+1000, tok, false, oldest)
	}
	// Another channel is untouched by chA's floors.
	expectFloor(t, tr.URL, "/v1/sync", "acme/rooms/other", 0, tok, false, 0)
}

// TestTruncatedByTTL: entries past the TTL make a read from before them
// truncated, and a log with nothing left has oldest_seq 0.
func TestTruncatedByTTL(t *testing.T) { forBackends(t, testTruncatedByTTL) }

func testTruncatedByTTL(t *testing.T, be *testBackend) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := be.start(t, Config{NoSync: true, OpenChannels: true, ArchiveTTL: time.Hour, Now: clock})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mintAt(t, "alice", "", clock()))
	first := c.publishAck(chA, []byte("old"))
	last := c.publishAck(chA, []byte("old too"))
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	tok := mintAt(t, "alice", "", clock())
	for _, path := range []string{"/v1/messages", "/v1/sync"} {
		expectFloor(t, tr.URL, path, chA, 0, tok, true, 0)
		expectFloor(t, tr.URL, path, chA, first, tok, true, 0)
		expectFloor(t, tr.URL, path, chA, last, tok, false, 0)
	}
	c2 := dialWS(t, tr.URL, "/ws/"+chA)
	c2.auth(tok)
	fresh := c2.publishAck(chA, []byte("new"))
	for _, path := range []string{"/v1/messages", "/v1/sync"} {
		expectFloor(t, tr.URL, path, chA, 0, tok, true, fresh)
		expectFloor(t, tr.URL, path, chA, last, tok, false, fresh)
	}
}

// TestTruncatedSurvivesRestart: the SQLite archive keeps its drop floors,
// so a read after a restart still says what the cap pushed out before it.
func TestTruncatedSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, OpenChannels: true, ArchiveCap: 3}
	tr := startRelay(t, cfg)
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	var seqs []uint64
	for i := range 8 {
		seqs = append(seqs, c.publishAck(chA, bytes.Repeat([]byte{byte(i)}, 10)))
	}
	tr.stop(t)
	tr = startRelay(t, cfg)
	expectFloor(t, tr.URL, "/v1/messages", chA, 0, tok, true, seqs[5])
	expectFloor(t, tr.URL, "/v1/messages", chA, seqs[3], tok, true, seqs[5])
	expectFloor(t, tr.URL, "/v1/messages", chA, seqs[4], tok, false, seqs[5])
	expectFloor(t, tr.URL, "/v1/sync", chA, seqs[4], tok, false, seqs[5])
}
