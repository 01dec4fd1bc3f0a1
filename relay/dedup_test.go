package relay

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestPublishIDIdempotent: a publish retried with the same "id" is stored
// once and acknowledged with the first one's seq, an application entry
// and a commit alike (the commit's retry is not stale_epoch, though the
// first one moved the fence); on JetStream the retry may go to another
// relay of the cluster. The id is the account's and the channel's: the
// same id from another account, or on another channel, is a publish of
// its own. An id over 64 bytes is refused and stores nothing. Without
// ids in the wire contract, every retry was a second entry.
func TestPublishIDIdempotent(t *testing.T) {
	forBackends(t, func(t *testing.T, be *testBackend) {
		const chB = "acme/payments/other"
		cfg := Config{DBPath: t.TempDir() + "/relay.db", NoSync: true, OpenChannels: true}
		tr := be.start(t, cfg)
		other := tr
		if be.nats != nil {
			other = be.start(t, cfg) // a second node on the same stream
			other.inCluster, tr.inCluster = true, true
		}
		pub := func(c *wsClient, ch string, payload []byte, id string) map[string]any {
			t.Helper()
			c.send(map[string]string{"type": "publish", "channel": ch, "payload": base64.StdEncoding.EncodeToString(payload), "id": id})
			for {
				m := c.recv()
				if m["type"] != "message" {
					return m
				}
			}
		}
		seqOf := func(m map[string]any) uint64 {
			t.Helper()
			if m["message"] != "published" {
				t.Fatalf("not acknowledged: %v", m)
			}
			return uint64(m["seq"].(float64))
		}
		alice := dialWS(t, tr.URL, "/ws/"+chA)
		alice.auth(mint(t, "alice", ""))
		s1 := seqOf(pub(alice, chA, []byte("hello"), "msg-1"))
		if s := seqOf(pub(alice, chA, []byte("hello"), "msg-1")); s != s1 {
			t.Fatalf("retry acknowledged at %d, first at %d", s, s1)
		}
		gid := []byte("g")
		c1 := seqOf(pub(alice, chA, publicMessage(gid, 0, 3), "commit-0"))
		alice2 := dialWS(t, other.URL, "/ws/"+chA)
		alice2.auth(mint(t, "alice", ""))
		if s := seqOf(pub(alice2, chA, publicMessage(gid, 0, 3), "commit-0")); s != c1 {
			t.Fatalf("commit retry acknowledged at %d, first at %d", s, c1)
		}
		if s := seqOf(pub(alice2, chA, []byte("hello"), "msg-1")); s != s1 {
			t.Fatalf("retry on another node acknowledged at %d, first at %d", s, s1)
		}
		// Without the id, the same commit is a new publish: stale.
		m := pub(alice2, chA, publicMessage(gid, 0, 3), "")
		if m["code"] != "stale_epoch" {
			t.Fatalf("the commit again without its id: %v", m)
		}
		m = pub(alice2, chA, []byte("long"), strings.Repeat("x", MaxPublishID+1))
		if m["code"] != "bad_id" {
			t.Fatalf("a 65-byte id: %v", m)
		}
		seqOf(pub(alice2, chA, []byte("long"), strings.Repeat("x", MaxPublishID)))
		alice2.subscribe(chB)
		seqOf(pub(alice2, chB, []byte("hello"), "msg-1"))
		if n := len(readChannel(t, tr.URL, chB, mint(t, "reader", ""))); n != 1 {
			t.Fatalf("the id on another channel: %d entries there, want 1", n)
		}
		bob := dialWS(t, tr.URL, "/ws/"+chA)
		bob.auth(mint(t, "bob", ""))
		if s := seqOf(pub(bob, chA, []byte("hello"), "msg-1")); s == s1 {
			t.Fatal("another account's id suppressed bob's publish")
		}
		got := readChannel(t, tr.URL, chA, mint(t, "reader", ""))
		hellos, longs, commits := 0, 0, 0
		for _, e := range got {
			switch string(e.payload) {
			case "hello":
				hellos++
			case "long":
				longs++
			case string(publicMessage(gid, 0, 3)):
				commits++
			}
		}
		if hellos != 2 || longs != 1 || commits != 1 {
			t.Fatalf("archive holds %d hello (alice's once, bob's), %d long, %d commits; want 2, 1, 1", hellos, longs, commits)
		}
	})
}
