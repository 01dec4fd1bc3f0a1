package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
)

const chA = "acme/payments/agent-v1"

func TestHealth(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	code, m := httpGet(t, tr.URL+"/health", "")
	if code != 200 || m["status"] != "ok" {
		t.Fatalf("health: %d %v", code, m)
	}
	if _, ok := m["uptime"].(float64); !ok {
		t.Fatalf("health has no numeric uptime: %v", m)
	}
}

func TestPublishSubscribeFrames(t *testing.T) { forBackends(t, testPublishSubscribeFrames) }

func testPublishSubscribeFrames(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true})
	pub := dialWS(t, tr.URL, "/ws")
	pub.auth(mint(t, "alice", ""))
	pub.subscribe(chA)
	sub := dialWS(t, tr.URL, "/ws")
	sub.auth(mint(t, "bob", ""))
	sub.subscribe(chA)

	for i := 1; i <= 3; i++ {
		payload := []byte(fmt.Sprintf("ciphertext %d", i))
		if seq := pub.publishAck(chA, payload); seq != uint64(i) {
			t.Fatalf("ack seq %d, want %d", seq, i)
		}
		m := sub.expect(map[string]any{"type": "message", "channel": chA,
			"payload": base64.StdEncoding.EncodeToString(payload), "seq": i, "entry_type": 0})
		if ts, ok := m["ts"].(float64); !ok || ts < float64(time.Now().Add(-time.Minute).UnixMilli()) {
			t.Fatalf("push frame ts %v", m["ts"])
		}
		if len(m) != 6 {
			t.Fatalf("push frame has extra fields: %v", m)
		}
	}
	// The publisher never gets its own messages back.
	pub.expectQuiet()

	// Unsubscribe stops delivery.
	sub.send(map[string]string{"type": "unsubscribe", "channel": chA})
	sub.expect(map[string]any{"type": "ok", "message": "unsubscribed from " + chA})
	pub.publishAck(chA, []byte("after unsubscribe"))
	sub.expectQuiet()
	sub.send(map[string]string{"type": "unsubscribe", "channel": chA})
	sub.expectError("not_subscribed")
}

func TestPathSubscription(t *testing.T) { forBackends(t, testPathSubscription) }

func testPathSubscription(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true})
	a := dialWS(t, tr.URL, "/ws/"+chA)
	a.auth(mint(t, "alice", ""))
	b := dialWS(t, tr.URL, "/ws/"+chA)
	b.auth(mint(t, "bob", ""))
	// Already subscribed by the path: publish works without a subscribe frame.
	seq := a.publishAck(chA, []byte("hello"))
	b.expect(map[string]any{"type": "message", "channel": chA, "seq": seq})
	// On the path form the channel of a publish defaults to the path's.
	a.send(map[string]string{"type": "publish", "payload": base64.StdEncoding.EncodeToString([]byte("x"))})
	a.expect(map[string]any{"type": "ok", "message": "published", "seq": seq + 1})
	b.expect(map[string]any{"type": "message", "channel": chA, "seq": seq + 1})

	// A bad path channel is refused before the upgrade.
	for _, p := range []string{"/ws/a/./c", "/ws/a/b/c%21", "/ws/a/b"} {
		resp, err := http.Get(tr.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 404 && resp.StatusCode != 301 {
			t.Fatalf("GET %s: %d", p, resp.StatusCode)
		}
	}
}

func TestPublishAcksInOrder(t *testing.T) { forBackends(t, testPublishAcksInOrder) }

func testPublishAcksInOrder(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true})
	pub := dialWS(t, tr.URL, "/ws")
	pub.auth(mint(t, "alice", ""))
	pub.subscribe(chA)
	// Pipeline publishes mixed with frames answered without the archive:
	// the replies must come back in the order of the requests.
	const n = 200
	for i := range n {
		pub.publish(chA, []byte{byte(i)})
		if i%10 == 0 {
			pub.send(map[string]string{"type": "bogus"})
		}
	}
	next := uint64(1)
	for i := range n {
		m := pub.recv()
		if m["message"] != "published" || uint64(m["seq"].(float64)) != next {
			t.Fatalf("reply %d: %v, want ack seq %d", i, m, next)
		}
		next++
		if i%10 == 0 {
			pub.expectError("unknown_type")
		}
	}
}

func TestHostileFrames(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	c := dialWS(t, tr.URL, "/ws")
	c.auth(mint(t, "alice", ""))

	c.sendRaw(websocket.MessageBinary, []byte(`{"type":"subscribe","channel":"a/b/c"}`))
	c.expectError("binary_frame")
	c.sendRaw(websocket.MessageText, []byte(`not json`))
	c.expectError("bad_frame")
	c.sendRaw(websocket.MessageText, []byte(`{"type":"subscribe","channel":7}`))
	c.expectError("bad_frame")
	c.send(map[string]string{"type": "launch"})
	c.expectError("unknown_type")
	c.send(map[string]string{"channel": chA})
	c.expectError("bad_frame")
	c.send(map[string]string{"type": "auth", "token": "x"})
	c.expectError("unauthorized") // a bad fresh token; the first stays in force
	c.publish(chA, []byte("x"))
	c.expectError("not_subscribed")
	for _, bad := range []string{"a/b", "a/b/c/d", "a//c", "a/./c", "a/../c", "a/b/c!", strings.Repeat("x", 255) + "/b/c"} {
		c.send(map[string]string{"type": "subscribe", "channel": bad})
		c.expectError("invalid_channel")
	}
	c.subscribe(chA)
	c.send(map[string]string{"type": "publish", "channel": chA, "payload": "not base64!"})
	c.expectError("bad_payload")
	c.send(map[string]string{"type": "publish", "channel": chA, "payload": "YQ"}) // unpadded
	c.expectError("bad_payload")
	c.send(map[string]string{"type": "publish", "channel": chA, "payload": ""})
	c.expectError("bad_payload")

	// Exactly 1 MiB is accepted, one byte more is refused, and the
	// connection stays usable.
	c.publishAck(chA, bytes.Repeat([]byte{7}, MaxPayload))
	c.publish(chA, bytes.Repeat([]byte{7}, MaxPayload+1))
	c.expectError("payload_too_large")

	// 50 subscriptions, the 51st refused.
	for i := 1; i < MaxSubscriptions; i++ {
		c.subscribe(fmt.Sprintf("acme/n/s%d", i))
	}
	c.send(map[string]string{"type": "subscribe", "channel": "acme/n/s51"})
	c.expectError("too_many_subscriptions")
	c.subscribe(chA) // re-subscribing is not a new subscription

	// Nothing bad reached the archive: only the one accepted publish.
	code, m := httpGet(t, tr.URL+"/v1/sync?channel="+chA, mint(t, "alice", ""))
	if code != 200 || len(m["entries"].([]any)) != 1 {
		t.Fatalf("archive after hostile frames: %d %v", code, len(m["entries"].([]any)))
	}
}

func TestAuthFailures(t *testing.T) {
	// Long enough that a loaded machine sends each bad first frame in
	// time; the timeout case waits it out.
	tr := startRelay(t, Config{NoSync: true, AuthTimeout: time.Second})
	cases := []struct {
		name   string
		binary bool
		frame  string
		code   string
	}{
		{"not auth first", false, `{"type":"subscribe","channel":"a/b/c"}`, "auth_required"},
		{"non-json first", false, `hello`, "auth_required"},
		{"binary first", true, `{"type":"auth","token":"` + mint(t, "x", "") + `"}`, "auth_required"},
		{"bad token", false, `{"type":"auth","token":"abc.def.ghi"}`, "unauthorized"},
		{"wrong key", false, `{"type":"auth","token":"` + func() string {
			s := testSecret
			testSecret = []byte("another secret entirely........")
			defer func() { testSecret = s }()
			return mint(t, "x", "")
		}() + `"}`, "unauthorized"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialWS(t, tr.URL, "/ws")
			typ := websocket.MessageText
			if tc.binary {
				typ = websocket.MessageBinary
			}
			c.sendRaw(typ, []byte(tc.frame))
			c.expectError(tc.code)
			c.expectClose(websocket.StatusPolicyViolation)
		})
	}
	t.Run("timeout", func(t *testing.T) {
		c := dialWS(t, tr.URL, "/ws")
		start := time.Now()
		c.expectError("auth_timeout")
		c.expectClose(websocket.StatusPolicyViolation)
		if d := time.Since(start); d < 800*time.Millisecond {
			t.Fatalf("closed after %v, before the timeout", d)
		}
	})
}

func TestChannelScopedToken(t *testing.T) { forBackends(t, testChannelScopedToken) }

func testChannelScopedToken(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true})
	tok := mint(t, "seat", chA)
	c := dialWS(t, tr.URL, "/ws")
	c.auth(tok)
	c.send(map[string]string{"type": "subscribe", "channel": "acme/other/chan"})
	c.expectError("forbidden")
	c.publish("acme/other/chan", []byte("x"))
	c.expectError("forbidden")
	c.subscribe(chA)
	c.publishAck(chA, []byte("x"))

	if code, _ := httpGet(t, tr.URL+"/v1/sync?channel=acme/other/chan", tok); code != 403 {
		t.Fatalf("scoped token read another channel: %d", code)
	}
	if code, _ := httpGet(t, tr.URL+"/v1/sync?channel="+chA, tok); code != 200 {
		t.Fatalf("scoped token read its channel: %d", code)
	}
	d := dialWS(t, tr.URL, "/ws/acme/other/chan")
	d.send(map[string]string{"type": "auth", "token": tok})
	d.expectError("forbidden")
	d.expectClose(websocket.StatusPolicyViolation)
}

func TestCatchUpPaging(t *testing.T) { forBackends(t, testCatchUpPaging) }

func testCatchUpPaging(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true})
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws")
	c.auth(tok)
	c.subscribe(chA)
	gid := []byte("group")
	// 1200 entries: app messages with a commit and a Welcome every 10th.
	const n = 1200
	epoch := uint64(0)
	var want []int // entry type by seq-1
	for i := range n {
		p := privateMessage(gid, epoch, 1)
		et := 0
		switch i % 10 {
		case 3:
			p = publicMessage(gid, epoch, 3)
			epoch++
			et = 1
		case 7:
			p = welcome()
			et = 2
		}
		c.publish(chA, p)
		want = append(want, et)
	}
	for range n {
		c.expect(map[string]any{"message": "published"})
	}
	base := tr.URL + "/v1/sync?channel=" + strings.ReplaceAll(chA, "/", "%2F")

	// The archive keeps the newest 1000 application entries (the default
	// cap: all 960 here), and the handshake entries, which have a cap of
	// their own. The cap counts entries, never a distance in seqs.
	var wantSeqs []uint64
	newer := 0 // application entries after the one at i
	for _, et := range want {
		if et == 0 {
			newer++
		}
	}
	for i, et := range want {
		if et == 0 {
			newer--
		}
		if et != 0 || newer < DefaultArchiveCap {
			wantSeqs = append(wantSeqs, uint64(i+1))
		}
	}
	var seqs []uint64
	since := uint64(0)
	pages := 0
	for {
		code, m := httpGet(t, fmt.Sprintf("%s&since_seq=%d&limit=1000", base, since), tok)
		if code != 200 {
			t.Fatalf("sync: %d %v", code, m)
		}
		pages++
		entries := m["entries"].([]any)
		if len(entries) > MaxLimit {
			t.Fatalf("page of %d entries, cap is %d", len(entries), MaxLimit)
		}
		for _, e := range entries {
			e := e.(map[string]any)
			seq := uint64(e["seq"].(float64))
			if int(e["entry_type"].(float64)) != want[seq-1] {
				t.Fatalf("seq %d: entry_type %v, want %d", seq, e["entry_type"], want[seq-1])
			}
			seqs = append(seqs, seq)
			since = seq
		}
		if m["has_more"] != true {
			break
		}
	}
	if pages != 3 || fmt.Sprint(seqs) != fmt.Sprint(wantSeqs) || len(seqs) <= 1000 {
		t.Fatalf("sync paging: %d pages, %d entries (want %d), first %d last %d", pages, len(seqs), len(wantSeqs), seqs[0], seqs[len(seqs)-1])
	}

	// /v1/messages: app entries only, default limit 100.
	code, m := httpGet(t, tr.URL+"/v1/messages?channel="+chA, tok)
	msgs := m["messages"].([]any)
	if code != 200 || len(msgs) != 100 || m["has_more"] != true {
		t.Fatalf("messages: %d, %d entries, has_more %v", code, len(msgs), m["has_more"])
	}
	for _, e := range msgs {
		e := e.(map[string]any)
		if _, ok := e["entry_type"]; ok || len(e) != 3 {
			t.Fatalf("message entry shape %v", e)
		}
		if want[uint64(e["seq"].(float64))-1] != 0 {
			t.Fatalf("messages returned a non-app entry %v", e["seq"])
		}
	}
	code, m = httpGet(t, tr.URL+"/v1/messages?channel="+chA+"&since_seq=1190", tok)
	if code != 200 || len(m["messages"].([]any)) != 8 || m["has_more"] != false {
		t.Fatalf("messages tail: %d %v", code, m)
	}
	code, m = httpGet(t, tr.URL+"/v1/messages?channel=acme/empty/chan", tok)
	if code != 200 || len(m["messages"].([]any)) != 0 || m["has_more"] != false {
		t.Fatalf("empty channel: %d %v", code, m)
	}

	for _, q := range []string{"limit=0", "limit=-1", "limit=x", "since_seq=-1", "since_seq=x", "limit=1.5"} {
		code, m := httpGet(t, base+"&"+q, tok)
		if code != 400 || m["error"] == nil || m["message"] == nil {
			t.Fatalf("%s: %d %v", q, code, m)
		}
	}
	for _, q := range []string{"", "channel=a/b", "channel=a/b/c/d", "channel=a/../c"} {
		if code, _ := httpGet(t, tr.URL+"/v1/messages?"+q, tok); code != 400 {
			t.Fatalf("%q: %d", q, code)
		}
	}
	if code, _ := httpGet(t, base, ""); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := httpGet(t, base, "garbage"); code != 401 {
		t.Fatalf("bad token: %d", code)
	}
}

func TestEntryTypesAndEpochFencing(t *testing.T) { forBackends(t, testEntryTypesAndEpochFencing) }

func testEntryTypesAndEpochFencing(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true})
	a := dialWS(t, tr.URL, "/ws/"+chA)
	a.auth(mint(t, "alice", ""))
	b := dialWS(t, tr.URL, "/ws/"+chA)
	b.auth(mint(t, "bob", ""))
	gid := []byte("0123456789abcdef0123456789abcdef")

	steps := []struct {
		payload []byte
		et      int
		stale   int // expected epoch in the stale_epoch error, or -1
	}{
		{privateMessage(gid, 4, 1), 0, -1},     // app message
		{publicMessage(gid, 5, 3), 1, -1},      // first commit sets the expectation: next is 6
		{publicMessage(gid, 5, 3), 1, 6},       // replayed epoch: stale
		{privateMessage(gid, 9, 3), 1, 6},      // future epoch: stale
		{publicMessage(gid, 6, 2), 1, -1},      // proposal: type 1, not fenced
		{privateMessage(gid, 6, 3), 1, -1},     // private commit at 6 → 7
		{welcome(), 2, -1},                     // Welcome
		{[]byte("SKYSEAL\x00batch"), 0, -1},    // non-MLS bytes
		{append([]byte{0, 1, 0, 5}, 1), 0, -1}, // key package
		{append([]byte{0, 1, 0, 4}, 1), 0, -1}, // group info
		{publicMessage(gid, 7, 1), 0, -1},      // public application message
	}
	seq := uint64(0)
	for i, st := range steps {
		a.publish(chA, st.payload)
		if st.stale >= 0 {
			m := a.expectError("stale_epoch")
			if int(m["epoch"].(float64)) != st.stale {
				t.Fatalf("step %d: stale_epoch epoch %v, want %d", i, m["epoch"], st.stale)
			}
			continue
		}
		seq++
		a.expect(map[string]any{"type": "ok", "message": "published", "seq": seq})
		b.expect(map[string]any{"type": "message", "seq": seq, "entry_type": st.et,
			"payload": base64.StdEncoding.EncodeToString(st.payload)})
	}
	// Stale commits were neither archived nor delivered.
	code, m := httpGet(t, tr.URL+"/v1/sync?channel="+chA, mint(t, "alice", ""))
	if code != 200 || len(m["entries"].([]any)) != int(seq) {
		t.Fatalf("archive has %d entries, want %d", len(m["entries"].([]any)), seq)
	}
	b.expectQuiet()
}

func TestEvictionKeepsSeqMonotonic(t *testing.T) { forBackends(t, testEvictionKeepsSeqMonotonic) }

func testEvictionKeepsSeqMonotonic(t *testing.T, be *testBackend) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	tr := be.start(t, Config{NoSync: true, ArchiveCap: 5, ArchiveTTL: time.Hour, Now: clock})
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	for i := 1; i <= 12; i++ {
		if seq := c.publishAck(chA, []byte{byte(i)}); seq != uint64(i) {
			t.Fatalf("seq %d, want %d", seq, i)
		}
	}
	code, m := httpGet(t, tr.URL+"/v1/sync?channel="+chA, tok)
	entries, _ := m["entries"].([]any)
	if code != 200 {
		t.Fatalf("sync: %d %v", code, m)
	}
	if len(entries) != 5 || entries[0].(map[string]any)["seq"].(float64) != 8 {
		t.Fatalf("after cap eviction: %v", entries)
	}
	// Everything expires; the next publish still gets the next number.
	advance(2 * time.Hour)
	_, m = httpGet(t, tr.URL+"/v1/sync?channel="+chA, mintAt(t, "alice", "", clock()))
	if n := len(m["entries"].([]any)); n != 0 {
		t.Fatalf("%d entries survived the TTL", n)
	}
	// Two hours on, the first socket's token has expired; a new one
	// publishes.
	c = dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mintAt(t, "alice", "", clock()))
	if seq := c.publishAck(chA, []byte("late")); seq != 13 {
		t.Fatalf("seq after expiry %d, want 13", seq)
	}
}

func TestRestartKeepsSeqAndEpoch(t *testing.T) { forBackends(t, testRestartKeepsSeqAndEpoch) }

func testRestartKeepsSeqAndEpoch(t *testing.T, be *testBackend) {
	path := filepath.Join(t.TempDir(), "relay.db")
	gid := []byte("g")
	tok := mint(t, "alice", "")

	tr := be.start(t, Config{DBPath: path})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	c.publishAck(chA, []byte("one"))
	c.publishAck(chA, publicMessage(gid, 0, 3)) // expect epoch 1 next
	c.publishAck(chA, []byte("three"))
	c.c.CloseNow()
	tr.stop(t)

	tr = be.start(t, Config{DBPath: path})
	c = dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	if seq := c.publishAck(chA, []byte("four")); seq != 4 {
		t.Fatalf("seq after restart %d, want 4", seq)
	}
	c.publish(chA, publicMessage(gid, 0, 3))
	if m := c.expectError("stale_epoch"); m["epoch"].(float64) != 1 {
		t.Fatalf("expected epoch after restart %v, want 1", m["epoch"])
	}
	if seq := c.publishAck(chA, publicMessage(gid, 1, 3)); seq != 5 {
		t.Fatalf("commit seq %d, want 5", seq)
	}
	_, m := httpGet(t, tr.URL+"/v1/sync?channel="+chA, tok)
	if n := len(m["entries"].([]any)); n != 5 {
		t.Fatalf("%d entries after restart, want 5", n)
	}
}

type fakeRevocations struct {
	mu   sync.Mutex
	subs []string
}

func (f *fakeRevocations) RevokedSince(ctx context.Context, after int64) ([]string, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if after >= int64(len(f.subs)) {
		return nil, after, nil
	}
	return append([]string(nil), f.subs[after:]...), int64(len(f.subs)), nil
}

func (f *fakeRevocations) revoke(sub string) {
	f.mu.Lock()
	f.subs = append(f.subs, sub)
	f.mu.Unlock()
}

func TestRevocation(t *testing.T) { forBackends(t, testRevocation) }

func testRevocation(t *testing.T, be *testBackend) {
	path := filepath.Join(t.TempDir(), "relay.db")
	src := &fakeRevocations{}
	tr := be.start(t, Config{DBPath: path, NoSync: true, Revocations: src, RevocationPoll: 20 * time.Millisecond})
	tok := mint(t, "mallory", "")
	other := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	o := dialWS(t, tr.URL, "/ws/"+chA)
	o.auth(other)

	src.revoke("mallory")
	start := time.Now()
	c.expectError("forbidden")
	c.expectClose(websocket.StatusPolicyViolation)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("revoked socket closed after %v", d)
	}
	if code, m := httpGet(t, tr.URL+"/v1/messages?channel="+chA, tok); code != 403 || m["error"] != "forbidden" {
		t.Fatalf("revoked read: %d %v", code, m)
	}
	d := dialWS(t, tr.URL, "/ws")
	d.send(map[string]string{"type": "auth", "token": tok})
	d.expectError("forbidden")
	d.expectClose(websocket.StatusPolicyViolation)
	// Others are untouched.
	o.publishAck(chA, []byte("still here"))
	o.c.CloseNow()
	tr.stop(t)

	// The revoked set survives a restart even if the source forgets.
	tr = be.start(t, Config{DBPath: path, NoSync: true})
	if code, _ := httpGet(t, tr.URL+"/v1/messages?channel="+chA, tok); code != 403 {
		t.Fatalf("revoked read after restart: %d", code)
	}
	if code, _ := httpGet(t, tr.URL+"/v1/messages?channel="+chA, other); code != 200 {
		t.Fatalf("other read after restart: %d", code)
	}
}

func TestSlowConsumerDisconnected(t *testing.T) { forBackends(t, testSlowConsumerDisconnected) }

func testSlowConsumerDisconnected(t *testing.T, be *testBackend) {
	// A short frame queue, and the default queue with 1 MiB messages (the
	// byte bound trips first).
	for _, tc := range []struct {
		queue, size int
	}{{4, 64 << 10}, {0, MaxPayload}} {
		t.Run(fmt.Sprintf("queue=%d,size=%d", tc.queue, tc.size), func(t *testing.T) {
			if tc.size > 64<<10 && testing.Short() {
				t.Skip("moves tens of MiB")
			}
			testSlowConsumer(t, Config{NoSync: true, SendQueue: tc.queue}, tc.size)
		})
	}
}

// keepUp waits until a fast subscriber that counts its messages in got
// has all but the last of the n published, so that on a loaded machine a
// reader descheduled for a while is not taken for a slow consumer: its
// queue never holds more than two messages.
func keepUp(t *testing.T, got *atomic.Int64, n int) {
	t.Helper()
	waitfor.Nil(t, 30*time.Second, func() error {
		if g := got.Load(); g < int64(n-1) {
			return fmt.Errorf("the fast subscriber has %d of %d messages", g, n)
		}
		return nil
	})
}

func testSlowConsumer(t *testing.T, cfg Config, size int) {
	tr := startRelay(t, cfg)
	pub := dialWS(t, tr.URL, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))
	fast := dialWS(t, tr.URL, "/ws/"+chA)
	fast.auth(mint(t, "fast", ""))
	slow := dialWS(t, tr.URL, "/ws/"+chA)
	slow.auth(mint(t, "slow", ""))

	// The slow client reads nothing while 64 KiB messages pile up past what
	// the socket buffers and its queue hold; the fast one keeps up.
	// The slow consumer is cut off by its full queue (then it finds a 1013
	// close frame) or, when the relay's socket write to it has been blocked
	// for writeTimeout first (as under the race detector with 1 MiB
	// messages), by the write deadline.
	timedOut := false
	slowClosing := func() bool {
		for _, c := range tr.hub.all() {
			if c.sub == "slow" {
				return c.isClosing()
			}
		}
		timedOut = true
		return true
	}
	var got atomic.Int64
	go func() {
		for {
			m, err := fast.tryRecv(time.Minute)
			if err != nil {
				return
			}
			if m["type"] == "message" {
				got.Add(1)
			}
		}
	}()
	payload := bytes.Repeat([]byte{1}, size)
	n := 0
	for !slowClosing() {
		if n == 5000 {
			t.Fatal("slow consumer was never disconnected")
		}
		keepUp(t, &got, n)
		n++
		if seq := pub.publishAck(chA, payload); seq != uint64(n) {
			t.Fatalf("publish %d acked as %d", n, seq)
		}
	}
	waitfor.Nil(t, 20*time.Second, func() error {
		if g := got.Load(); g != int64(n) {
			return fmt.Errorf("fast subscriber received %d of %d", g, n)
		}
		return nil
	})
	// Now the slow client drains and finds a 1013 close after what was sent.
	if timedOut {
		t.Log("slow consumer was cut off by the write deadline")
		return
	}
	slow.expectClose(websocket.StatusTryAgainLater)
}

func TestCloseClosesConnections(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	idle := dialWS(t, tr.URL, "/ws") // never authenticates
	idle.c.CloseRead(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Close(ctx) }()
	c.expectClose(websocket.StatusGoingAway)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(tr.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("health after Close: %d", resp.StatusCode)
	}
}

func TestArchiveFileSettings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	for range 2 { // new file, then reopened
		tr := startRelay(t, Config{DBPath: path})
		var ps int
		var mode string
		tr.db.QueryRow("PRAGMA page_size").Scan(&ps)
		tr.db.QueryRow("PRAGMA journal_mode").Scan(&mode)
		if ps != sqlitearchive.PageSize || mode != "wal" {
			t.Fatalf("page size %d, journal mode %s", ps, mode)
		}
		tr.stop(t)
	}
}

// TestCloseFlushes closes the relay while publishes are in flight: Close
// must commit whatever was accepted, so every acknowledged publish is in
// the reopened archive and no write fails.
func TestCloseFlushes(t *testing.T) { forBackends(t, testCloseFlushes) }

func testCloseFlushes(t *testing.T, be *testBackend) {
	path := filepath.Join(t.TempDir(), "relay.db")
	var logs syncBuffer
	tr := be.start(t, Config{DBPath: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	const n = 900 // below the send queue: this client reads no ack while publishing
	for i := range n {
		c.publish(chA, []byte(fmt.Sprint(i)))
	}
	acked := 0
	for acked < n/3 {
		c.expect(map[string]any{"message": "published"})
		acked++
	}
	done := make(chan struct{})
	go func() {
		for {
			m, err := c.tryRecv(time.Minute)
			if err != nil {
				close(done)
				return
			}
			if m["message"] == "published" {
				acked++
			}
		}
	}()
	tr.stop(t)
	<-done
	if strings.Contains(logs.String(), "archive write failed") {
		t.Fatalf("a write failed during Close:\n%s", logs.String())
	}
	tr = be.start(t, Config{DBPath: path, NoSync: true})
	_, m := httpGet(t, tr.URL+fmt.Sprintf("/v1/sync?channel=%s&since_seq=%d&limit=500", chA, acked-1), mint(t, "alice", ""))
	if len(m["entries"].([]any)) == 0 {
		t.Fatalf("acknowledged seq %d is missing after a clean close", acked)
	}
}

// TestPipelinedPublisherKeepsUp: a publisher that pipelines publishes and
// reads its acks is never cut off as a slow consumer, even when a commit
// answers far more publishes than its send queue holds at once: publishes
// waiting for the archive are bounded per connection instead.
func TestPipelinedPublisherKeepsUp(t *testing.T) { forBackends(t, testPipelinedPublisherKeepsUp) }

func testPipelinedPublisherKeepsUp(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{DBPath: filepath.Join(t.TempDir(), "relay.db"), SendQueue: 8})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	const n = 600
	acks := make(chan uint64, n)
	go func() {
		for {
			m, err := c.tryRecv(time.Minute)
			if err != nil {
				close(acks)
				return
			}
			if m["message"] == "published" {
				acks <- uint64(m["seq"].(float64))
			}
		}
	}()
	for i := range n {
		c.publish(chA, []byte(fmt.Sprint(i)))
	}
	for want := uint64(1); want <= n; want++ {
		if got, ok := <-acks; !ok || got != want {
			t.Fatalf("ack %d: got %d (connection open: %v)", want, got, ok)
		}
	}
}

// TestCapAppliesBeforeEviction: the committer deletes rows past the cap in
// chunks, and reads never return the rows still waiting for it.
func TestCapAppliesBeforeEviction(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, ArchiveCap: 32}) // chunks of 2
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	for i := 1; i <= 33; i++ {
		c.publishAck(chA, []byte{byte(i)})
	}
	var rows int
	tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows)
	if rows != 33 {
		t.Fatalf("%d rows stored, want 33 (seq 1 waits for the next chunk)", rows)
	}
	for _, path := range []string{"/v1/sync", "/v1/messages"} {
		_, m := httpGet(t, tr.URL+path+"?channel="+chA, tok)
		key := map[string]string{"/v1/sync": "entries", "/v1/messages": "messages"}[path]
		entries := m[key].([]any)
		if len(entries) != 32 || entries[0].(map[string]any)["seq"].(float64) != 2 {
			t.Fatalf("%s returned %d entries from seq %v, want 32 from 2", path, len(entries), entries[0].(map[string]any)["seq"])
		}
	}
	c.publishAck(chA, []byte{34})
	tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows)
	if rows != 32 {
		t.Fatalf("%d rows after the chunk, want 32", rows)
	}
}

// TestCapKeepsHandshakeEntries: application entries past the cap are
// evicted, commits are not (up to their own cap), so a member offline
// through a lot of chat can still follow the group's epochs.
func TestCapKeepsHandshakeEntries(t *testing.T) { forBackends(t, testCapKeepsHandshakeEntries) }

func testCapKeepsHandshakeEntries(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true, ArchiveCap: 4})
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	gid := []byte("g")
	c.publishAck(chA, publicMessage(gid, 0, 3)) // seq 1: commit of epoch 0
	for i := 0; i < 20; i++ {
		c.publishAck(chA, []byte{byte(i)}) // seq 2..21
	}
	seqs := func(path, key string) []int {
		_, m := httpGet(t, tr.URL+path+"?channel="+chA, tok)
		var out []int
		for _, e := range m[key].([]any) {
			out = append(out, int(e.(map[string]any)["seq"].(float64)))
		}
		return out
	}
	if got := seqs("/v1/sync", "entries"); fmt.Sprint(got) != "[1 18 19 20 21]" {
		t.Fatalf("sync after chat: %v, want the commit and the last 4", got)
	}
	if got := seqs("/v1/messages", "messages"); fmt.Sprint(got) != "[18 19 20 21]" {
		t.Fatalf("messages after chat: %v", got)
	}
	// Handshake entries have their own cap of 4.
	for e := uint64(1); e <= 5; e++ {
		c.publishAck(chA, privateMessage(gid, e, 3)) // seq 22..26
	}
	if got := seqs("/v1/sync", "entries"); fmt.Sprint(got) != "[18 19 20 21 23 24 25 26]" {
		t.Fatalf("sync after commits: %v, want the last 4 chat entries and the last 4 commits", got)
	}
	var rows int
	if n, ok := storedMsgs(t, tr, chA, true); ok {
		rows = n
	} else {
		tr.db.QueryRow(`SELECT count(*) FROM messages WHERE entry_type != 0`).Scan(&rows)
	}
	if rows != 4 {
		t.Fatalf("%d handshake rows stored, want 4", rows)
	}
}
