package relay

import (
	"encoding/base64"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
)

// TestArchiveWriteFailureStops plants a row where the channel's next
// entries will go, as a damaged archive could hold, and publishes a burst
// across it. In memory, the transaction that meets the row must leave
// nothing of its batch behind: every publish acked is stored, every
// publish refused is not, and after the failure the archive refuses
// everything (fail-stop).
func TestArchiveWriteFailureStops(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	acked := plantAndBurst(t, tr, c)
	if len(acked) > 0 && acked[len(acked)-1] >= planted {
		t.Fatalf("acked seqs %v go past the failed transaction at %d", acked, planted)
	}
	c.publish(chA, []byte("after"))
	c.expectError("internal")

	stored := storedRows(t, tr, chA)
	want := map[uint64]string{1: "before 0", 2: "before 1", 3: "before 2", planted: "planted"}
	for i, seq := range acked {
		want[seq] = fmt.Sprintf("burst %d", i)
	}
	if len(stored) != len(want) {
		t.Fatalf("archive holds %d rows %v, want the %d acked and the planted one", len(stored), stored, len(want))
	}
	for seq, p := range want {
		if stored[seq] != p {
			t.Fatalf("seq %d holds %q, want %q", seq, stored[seq], p)
		}
	}
}

// TestLogIndexFailureStops is the planted row against a file-backed
// archive, which acknowledges a batch once it is in the log and indexes it
// after: the index write that meets the row fails, from then on every
// publish is refused, and a restart rebuilds the index from the log over
// the damage, so every publish acked is read back, and goes on above it.
func TestLogIndexFailureStops(t *testing.T) {
	cfg := Config{DBPath: filepath.Join(t.TempDir(), "relay.db"), NoSync: true}
	tr := startRelay(t, cfg)
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	acked := plantAndBurst(t, tr, c)
	// The index fails behind the acks; once it has, nothing is acked.
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("publishes are still acked after the index met the planted row")
		}
		c.publish(chA, []byte("after"))
		if m := c.recv(); m["type"] == "error" {
			break
		}
		acked = append(acked, 0) // a publish of "after", acked
	}
	c.publish(chA, []byte("after"))
	c.expectError("internal")

	c.c.CloseNow()
	tr.stop(t)
	tr = startRelay(t, cfg)
	tok := mint(t, "alice", "")
	_, m := httpGet(t, tr.URL+"/v1/messages?channel="+chA+"&limit=1000", tok)
	got := map[uint64]string{}
	for _, e := range m["messages"].([]any) {
		e := e.(map[string]any)
		p, _ := base64.StdEncoding.DecodeString(e["payload"].(string))
		got[uint64(e["seq"].(float64))] = string(p)
	}
	for i, seq := range acked {
		if seq != 0 && got[seq] != fmt.Sprintf("burst %d", i) {
			t.Fatalf("acked seq %d reads back as %q after the restart, want %q", seq, got[seq], fmt.Sprintf("burst %d", i))
		}
	}
	c = dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	if seq := c.publishAck(chA, []byte("restarted")); seq <= planted {
		t.Fatalf("after the restart a publish got seq %d, at or below the planted row", seq)
	}
}

const planted = 12

// plantAndBurst publishes three entries, plants a row at seq planted and
// publishes a burst of 40 over it, not waiting for acks, so that several
// publishes share the transaction that meets the row. It returns the seqs
// acked, in the burst's order, and checks that the planted seq is not one.
func plantAndBurst(t *testing.T, tr *testRelay, c *wsClient) []uint64 {
	t.Helper()
	for i := range 3 {
		if seq := c.publishAck(chA, fmt.Appendf(nil, "before %d", i)); seq != uint64(i+1) {
			t.Fatalf("publish %d acked as seq %d", i, seq)
		}
	}
	settled(t, tr)
	if _, err := tr.db.Exec(`INSERT INTO messages (channel, seq, entry_type, ts, payload, size) VALUES (?, ?, 0, 0, ?, 7)`,
		chA, planted, []byte("planted")); err != nil {
		t.Fatal(err)
	}
	const burst = 40
	for i := range burst {
		c.publish(chA, fmt.Appendf(nil, "burst %d", i))
	}
	var acked []uint64
	for range burst {
		m := c.recv()
		switch {
		case m["type"] == "ok" && m["message"] == "published":
			acked = append(acked, uint64(m["seq"].(float64)))
		case m["type"] == "error" && m["code"] == "internal":
		default:
			t.Fatalf("unexpected frame %v", m)
		}
	}
	if slices.Contains(acked, planted) && tr.arch.(*sqlitearchive.Archive).Log() == nil {
		t.Fatalf("seq %d acked, but it is the planted row", planted)
	}
	return acked
}

// storedRows returns a channel's rows by seq, read from the database.
func storedRows(t *testing.T, tr *testRelay, ch string) map[uint64]string {
	t.Helper()
	rows, err := tr.db.Query(`SELECT seq, payload FROM messages WHERE channel = ?`, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[uint64]string)
	for rows.Next() {
		var seq uint64
		var p []byte
		if err := rows.Scan(&seq, &p); err != nil {
			t.Fatal(err)
		}
		out[seq] = string(p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
