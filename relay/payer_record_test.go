package relay

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestPayerRecordOnce: two relays taking a new channel's first publishes
// from two accounts agree on one payer: the one whose record was stored
// first; the other reads it, and every relay charges it for every entry.
func TestPayerRecordOnce(t *testing.T) {
	n := startNATS(t)
	nodes := startCluster(t, n, 2, Config{OpenChannels: true})
	const ch = "acme/payer/race"
	first, err := nodes[0].arch.(*jsArchive).writePayer(ch, "alice")
	if err != nil || first != "alice" {
		t.Fatalf("the first record names %q (%v), want alice", first, err)
	}
	second, err := nodes[1].arch.(*jsArchive).writePayer(ch, "bob")
	if err != nil || second != "alice" {
		t.Fatalf("the second relay reads %q (%v), want alice", second, err)
	}
	if st, err := nodes[0].arch.(*jsArchive).payers.Status(t.Context()); err != nil || st.Values() != 1 {
		t.Fatalf("payer records: %v, %v; want 1", st, err)
	}
	b := dialWS(t, nodes[1].URL, "/ws/"+ch)
	b.auth(mint(t, "bob", ""))
	a := dialWS(t, nodes[0].URL, "/ws/"+ch)
	a.auth(mint(t, "alice", ""))
	b.publishAck(ch, []byte("from bob"))
	a.expect(map[string]any{"type": "message"})
	a.publishAck(ch, []byte("from alice"))
	b.expect(map[string]any{"type": "message"})
	for _, node := range nodes {
		if got, other := node.arch.used("alice"), node.arch.used("bob"); got != int64(len("from bob")+len("from alice")) || other != 0 {
			t.Fatalf("a node charges alice %d bytes and bob %d, want %d and 0", got, other, len("from bob")+len("from alice"))
		}
	}
}

// TestPayerFromOlderEntries: a stream written before the payer records
// (each entry naming the channel's payer in a Skytale-Sub header) is
// counted as before, and the channel's next publish, by another member,
// is charged to that payer, whose record it then writes.
func TestPayerFromOlderEntries(t *testing.T) {
	n := startNATS(t)
	const stream, ch = "OLDER", "acme/payer/older"
	first := startRelay(t, Config{NATSURL: n.URL, NATSStream: stream, OpenChannels: true})
	js := first.arch.(*jsArchive)
	first.stop(t)

	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	jsc, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"old entry one", "old entry two"} {
		m := nats.NewMsg(js.appSubject(ch))
		m.Data = []byte(p)
		m.Header.Set(hdrSub, "carol")
		m.Header.Set(hdrTS, strconv.FormatInt(time.Now().UnixMilli(), 10))
		if _, err := jsc.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	tr := startRelay(t, Config{NATSURL: n.URL, NATSStream: stream, OpenChannels: true})
	old := int64(len("old entry one") + len("old entry two"))
	if got := tr.arch.used("carol"); got != old {
		t.Fatalf("the older entries' payer uses %d bytes, want %d", got, old)
	}
	c := dialWS(t, tr.URL, "/ws/"+ch)
	c.auth(mint(t, "dave", ""))
	c.publishAck(ch, []byte("new"))
	if got, other := tr.arch.used("carol"), tr.arch.used("dave"); got != old+3 || other != 0 {
		t.Fatalf("carol uses %d bytes and dave %d, want %d and 0", got, other, old+3)
	}
	if rec, err := tr.arch.(*jsArchive).readPayer(ch); err != nil || rec != "carol" {
		t.Fatalf("the payer record: %q, %v; want carol", rec, err)
	}
}
