package relay

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// TestArchiveWriteFailureStops plants a row where the channel's next
// entries will go, as a damaged archive could hold, and publishes a burst
// across it. The transaction that meets the row must leave nothing of its
// batch behind: every publish acked is stored, every publish refused is
// not, and after the failure the archive refuses everything (fail-stop)
// until a restart, which continues above the damage.
func TestArchiveWriteFailureStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true}
	tr := startRelay(t, cfg)
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	for i := range 3 {
		if seq := c.publishAck(chA, fmt.Appendf(nil, "before %d", i)); seq != uint64(i+1) {
			t.Fatalf("publish %d acked as seq %d", i, seq)
		}
	}
	const planted = 12
	if _, err := tr.db.Exec(`INSERT INTO messages (channel, seq, entry_type, ts, payload, sub) VALUES (?, ?, 0, 0, ?, 'mallory')`,
		chA, planted, []byte("planted")); err != nil {
		t.Fatal(err)
	}

	// A burst, not waiting for acks, so that several publishes share the
	// transaction that meets the planted row.
	const burst = 40
	for i := range burst {
		c.publish(chA, fmt.Appendf(nil, "burst %d", i))
	}
	var acked []uint64
	refused := 0
	for range burst {
		m := c.recv()
		switch {
		case m["type"] == "ok" && m["message"] == "published":
			acked = append(acked, uint64(m["seq"].(float64)))
		case m["type"] == "error" && m["code"] == "internal":
			refused++
		default:
			t.Fatalf("unexpected frame %v", m)
		}
	}
	if refused == 0 {
		t.Fatalf("all %d publishes acked over a planted row at seq %d", burst, planted)
	}
	if slices.Contains(acked, planted) {
		t.Fatalf("seq %d acked, but it is the planted row", planted)
	}
	// Once refused, always refused: nothing after the failure is acked.
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

	// A restart reloads durable state and goes on above the damage.
	c.c.CloseNow()
	tr.stop(t)
	tr = startRelay(t, cfg)
	c = dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	if seq := c.publishAck(chA, []byte("restarted")); seq <= planted {
		t.Fatalf("after the restart a publish got seq %d, at or below the planted row", seq)
	}
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
