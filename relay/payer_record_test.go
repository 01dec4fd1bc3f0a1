package relay

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/relay/jsarchive"
)

// TestPayerRecordOnce: a channel's first publish, on one relay, writes its
// payer record; a later publish from another account, on another relay,
// is charged to the same payer, and every relay charges it for every
// entry. (Two relays writing a record at once: jsarchive's
// TestPayerRecordRace.)
func TestPayerRecordOnce(t *testing.T) {
	n := startNATS(t)
	nodes := startCluster(t, n, 2, Config{OpenChannels: true})
	const ch = "acme/payer/race"
	b := dialWS(t, nodes[1].URL, "/ws/"+ch)
	b.auth(mint(t, "bob", ""))
	a := dialWS(t, nodes[0].URL, "/ws/"+ch)
	a.auth(mint(t, "alice", ""))
	a.publishAck(ch, []byte("from alice"))
	b.expect(map[string]any{"type": "message"})
	b.publishAck(ch, []byte("from bob"))
	a.expect(map[string]any{"type": "message"})
	if rec := payerRecord(t, n.URL, "CLUSTER", ch); rec != "alice" {
		t.Fatalf("the payer record names %q, want alice", rec)
	}
	for _, node := range nodes {
		if got, other := node.arch.Used("alice"), node.arch.Used("bob"); got != int64(len("from bob")+len("from alice")) || other != 0 {
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
	first := startRelay(t, withJS(Config{OpenChannels: true}, n.URL, stream, 0))
	first.stop(t)

	jsc := jsClient(t, n.URL)
	for _, p := range []string{"old entry one", "old entry two"} {
		m := nats.NewMsg(jsarchive.AppSubject(stream, ch))
		m.Data = []byte(p)
		m.Header.Set("Skytale-Sub", "carol") // the payer header of older relays
		m.Header.Set("Skytale-Ts", strconv.FormatInt(time.Now().UnixMilli(), 10))
		if _, err := jsc.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	tr := startRelay(t, withJS(Config{OpenChannels: true}, n.URL, stream, 0))
	old := int64(len("old entry one") + len("old entry two"))
	if got := tr.arch.Used("carol"); got != old {
		t.Fatalf("the older entries' payer uses %d bytes, want %d", got, old)
	}
	c := dialWS(t, tr.URL, "/ws/"+ch)
	c.auth(mint(t, "dave", ""))
	c.publishAck(ch, []byte("new"))
	if got, other := tr.arch.Used("carol"), tr.arch.Used("dave"); got != old+3 || other != 0 {
		t.Fatalf("carol uses %d bytes and dave %d, want %d and 0", got, other, old+3)
	}
	if rec := payerRecord(t, n.URL, stream, ch); rec != "carol" {
		t.Fatalf("the payer record: %q, want carol", rec)
	}
}

// payerRecord reads a channel's payer record from the bucket beside the
// stream on the NATS at url ("" for none).
func payerRecord(t *testing.T, url, stream, ch string) string {
	t.Helper()
	kv, err := jsClient(t, url).KeyValue(t.Context(), jsarchive.PayerBucket(stream))
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil || st.Values() != 1 {
		t.Fatalf("payer records: %v, %v; want 1", st, err)
	}
	e, err := kv.Get(t.Context(), jsarchive.PayerKey(ch))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(e.Value())
}
