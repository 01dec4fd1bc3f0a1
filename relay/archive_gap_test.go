package relay

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// pageSeqs reads every page of GET path (sync or messages) from since and
// returns the seqs and payloads served.
func pageSeqs(t *testing.T, base, path, ch, tok string, limit int) ([]uint64, map[uint64]string) {
	t.Helper()
	key := "entries"
	if path == "/v1/messages" {
		key = "messages"
	}
	var seqs []uint64
	payloads := make(map[uint64]string)
	since := uint64(0)
	for {
		code, m := httpGet(t, fmt.Sprintf("%s%s?channel=%s&since_seq=%d&limit=%d", base, path, ch, since, limit), tok)
		if code != 200 {
			t.Fatalf("GET %s: %d %v", path, code, m)
		}
		for _, e := range m[key].([]any) {
			e := e.(map[string]any)
			since = uint64(e["seq"].(float64))
			seqs = append(seqs, since)
			payloads[since] = e["payload"].(string)
		}
		if m["has_more"] != true {
			return seqs, payloads
		}
	}
}

// leaveGap moves a channel's durable ceiling up by n, as a crash does when
// the relay had reserved a block of seqs and used only part of it.
func leaveGap(t *testing.T, path, ch string, n int) {
	t.Helper()
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res sql.Result
	if res, err = db.Exec(`UPDATE channels SET reserved = reserved + ? WHERE name = ?`, n, ch); err != nil {
		t.Fatal(err)
	}
	if k, _ := res.RowsAffected(); k != 1 {
		t.Fatalf("channel %s has no row", ch)
	}
}

// TestGapKeepsAckedEntries: publish, restart with a gap in the seqs (what a
// crash leaves), publish once more, and every acknowledged entry within the
// cap is still served, by both read endpoints, and still stored.
func TestGapKeepsAckedEntries(t *testing.T) {
	const capN = 20
	path := filepath.Join(t.TempDir(), "relay.db")
	tok := mint(t, "alice", "")
	cfg := Config{DBPath: path, NoSync: true, ArchiveCap: capN, OpenChannels: true}
	gid := []byte("g")

	tr := startRelay(t, cfg)
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	var app []uint64 // acked application seqs
	var hs []uint64  // acked handshake seqs
	for i := range capN {
		app = append(app, c.publishAck(chA, []byte(fmt.Sprint("m", i))))
	}
	hs = append(hs, c.publishAck(chA, publicMessage(gid, 0, 3)))
	c.c.CloseNow()
	tr.stop(t)

	for round := range 3 {
		leaveGap(t, path, chA, 700+round)
		tr = startRelay(t, cfg)
		c = dialWS(t, tr.URL, "/ws/"+chA)
		c.auth(tok)
		seq := c.publishAck(chA, []byte(fmt.Sprint("after gap ", round)))
		if last := app[len(app)-1]; seq <= last+700 {
			t.Fatalf("seq %d after the gap, want above %d", seq, last+700)
		}
		app = append(app, seq)
		want := app[len(app)-capN:]

		got, _ := pageSeqs(t, tr.URL, "/v1/messages", chA, tok, 7)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: /v1/messages serves %v, want %v", round, got, want)
		}
		got, _ = pageSeqs(t, tr.URL, "/v1/sync", chA, tok, 500)
		wantAll := append(append([]uint64(nil), hs...), want...)
		slices.Sort(wantAll)
		if fmt.Sprint(got) != fmt.Sprint(wantAll) {
			t.Fatalf("round %d: /v1/sync serves %v, want %v", round, got, wantAll)
		}
		var rows int
		tr.db.QueryRow(`SELECT count(*) FROM messages WHERE seq >= ?`, want[0]).Scan(&rows)
		if rows != capN+1 {
			t.Fatalf("round %d: %d rows stored from seq %d, want %d", round, rows, want[0], capN+1)
		}
		c.c.CloseNow()
		tr.stop(t)
	}
}

// TestGapsEvictByCount: with gaps everywhere (every restart leaves one),
// eviction keeps exactly the newest cap application entries, once its
// chunk is due, and reads never serve more or fewer.
func TestGapsEvictByCount(t *testing.T) {
	const capN = 16 // chunks of 1
	path := filepath.Join(t.TempDir(), "relay.db")
	tok := mint(t, "alice", "")
	cfg := Config{DBPath: path, NoSync: true, ArchiveCap: capN, OpenChannels: true}
	var app []uint64
	for round := range 6 {
		tr := startRelay(t, cfg)
		c := dialWS(t, tr.URL, "/ws/"+chA)
		c.auth(tok)
		for i := range 5 {
			app = append(app, c.publishAck(chA, []byte(fmt.Sprint(round, "/", i))))
		}
		want := app[max(0, len(app)-capN):]
		got, _ := pageSeqs(t, tr.URL, "/v1/sync", chA, tok, 3)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: serves %v, want %v", round, got, want)
		}
		var rows int
		tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows)
		if rows != len(want) {
			t.Fatalf("round %d: %d rows stored, want %d", round, rows, len(want))
		}
		c.c.CloseNow()
		tr.stop(t)
		leaveGap(t, path, chA, 100)
	}
}
