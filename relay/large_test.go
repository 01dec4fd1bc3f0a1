package relay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/jsarchive"
)

// largeCommit is a commit-shaped payload of n bytes: a PrivateMessage
// header with content type commit for epoch, then random bytes.
func largeCommit(t testing.TB, epoch uint64, n int) []byte {
	t.Helper()
	b := privateMessage([]byte("large-group"), epoch, contentCommit)
	body := make([]byte, n-len(b))
	rand.Read(body)
	return append(b, body...)
}

// largeFrame is the raw publish frame of payload on ch.
func largeFrame(ch string, payload []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString(payload)
	return []byte(`{"type":"publish","channel":"` + ch + `","payload":"` + b64 + `"}`)
}

// dialLarge is dialWS for a client that receives large handshakes.
func dialLarge(t testing.TB, base, path string) *wsClient {
	t.Helper()
	c := dialWS(t, base, path)
	c.c.SetReadLimit(MaxFrame)
	// A 16 MiB frame is read, decoded and stored in well under a second
	// on an idle machine; on a loaded one (the race detector, a parallel
	// suite) it has taken over 5 s.
	c.wait = 30 * time.Second
	return c
}

// pushSeen is a push frame read without keeping its payload: the bytes
// before and after the payload's base64, and the digest and length of
// that base64.
type pushSeen struct {
	head, tail string
	sum        [32]byte
	n          int
}

// readPushStream reads one message from c, streaming its payload through
// a digest so that many subscribers of a large message need not each
// hold it.
func readPushStream(ctx context.Context, c *websocket.Conn) (pushSeen, error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return pushSeen{}, err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var p pushSeen
	var head []byte
	for !bytes.HasSuffix(head, []byte(`"payload":"`)) {
		part, err := br.ReadBytes('"')
		head = append(head, part...)
		if err != nil {
			return pushSeen{}, fmt.Errorf("no payload in %.200q: %w", head, err)
		}
		if len(head) > 4096 {
			return pushSeen{}, fmt.Errorf("no payload in %.200q", head)
		}
	}
	p.head = string(head)
	h := sha256.New()
	for {
		part, err := br.ReadSlice('"')
		if err == bufio.ErrBufferFull {
			h.Write(part)
			p.n += len(part)
			continue
		}
		if err != nil {
			return pushSeen{}, err
		}
		h.Write(part[:len(part)-1])
		p.n += len(part) - 1
		break
	}
	h.Sum(p.sum[:0])
	tail, err := io.ReadAll(br)
	if err != nil {
		return pushSeen{}, err
	}
	p.tail = string(tail)
	return p, nil
}

// checkPush checks that p is the push of b64 on ch as a handshake entry
// (entry_type 1) and returns its seq.
func checkPush(t testing.TB, p pushSeen, ch string, b64 []byte) uint64 {
	t.Helper()
	if want := `{"type":"message","channel":"` + ch + `","payload":"`; p.head != want {
		t.Fatalf("push starts %q, want %q", p.head, want)
	}
	if p.n != len(b64) || p.sum != sha256.Sum256(b64) {
		t.Fatalf("push carries %d bytes of base64 that are not the %d published", p.n, len(b64))
	}
	var m struct {
		Seq       uint64 `json:"seq"`
		EntryType *int   `json:"entry_type"`
	}
	if err := json.Unmarshal([]byte("{"+strings.TrimPrefix(p.tail, ",")), &m); err != nil {
		t.Fatalf("push tail %q: %v", p.tail, err)
	}
	if m.EntryType == nil || *m.EntryType != EntryCommit || m.Seq == 0 {
		t.Fatalf("push tail %q, want a seq and entry_type 1", p.tail)
	}
	return m.Seq
}

// expectAck reads past pushes to the next frame, which must be a publish's
// ack.
func expectAck(t testing.TB, c *wsClient) {
	t.Helper()
	for {
		m := c.recv()
		if m["type"] == "message" {
			continue
		}
		if m["type"] != "ok" || m["message"] != "published" {
			t.Fatalf("got %v, want an ack", m)
		}
		return
	}
}

// TestLargeCommitFanout: a 12 MiB commit is accepted, delivered whole to
// 50 subscribers and read back by catch-up. Before MaxHandshakePayload the
// relay closed the publisher's socket (1009) at 1 MiB.
func TestLargeCommitFanout(t *testing.T) {
	if frameLimit(MaxHandshakePayload) != MaxFrame {
		t.Fatalf("MaxFrame %d is not the frame of a largest handshake, %d", MaxFrame, frameLimit(MaxHandshakePayload))
	}
	if testing.Short() && raceEnabled {
		// 50 × 16 MiB through the race detector's websocket reads.
		t.Skip("slow under the race detector")
	}
	tr := startRelay(t, Config{NoSync: true})
	const subs = 50
	clients := make([]*wsClient, subs)
	for i := range clients {
		clients[i] = dialLarge(t, tr.URL, "/ws/"+chA)
		clients[i].auth(mint(t, fmt.Sprintf("sub%d", i), ""))
	}
	pub := dialLarge(t, tr.URL, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))

	payload := largeCommit(t, 1, 12<<20)
	b64 := []byte(base64.StdEncoding.EncodeToString(payload))
	pub.sendRaw(websocket.MessageText, largeFrame(chA, payload))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	seqs := make([]uint64, subs)
	errs := make([]error, subs)
	for i, c := range clients {
		wg.Go(func() {
			p, err := readPushStream(ctx, c.c)
			if err != nil {
				errs[i] = err
				return
			}
			seqs[i] = checkPush(t, p, chA, b64)
		})
	}
	ack := pub.expect(map[string]any{"type": "ok", "message": "published"})
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("subscriber %d: %v", i, err)
		}
		if seqs[i] != uint64(ack["seq"].(float64)) {
			t.Fatalf("subscriber %d got seq %d, the ack says %v", i, seqs[i], ack["seq"])
		}
	}
	if got := tr.hub.deliveredBytes.Load(); got < subs*uint64(len(b64)) {
		t.Fatalf("delivered bytes %d, want at least %d", got, subs*len(b64))
	}

	// Catch-up carries the commit whole, though it is larger than a page's
	// byte bound (a page always carries its first entry).
	status, page := httpGet(t, tr.URL+"/v1/sync?channel="+chA, mint(t, "sub0", ""))
	if status != 200 {
		t.Fatalf("sync: %d %v", status, page)
	}
	entries, _ := page["entries"].([]any)
	if len(entries) != 1 {
		delete(page, "entries")
		t.Fatalf("sync page has %d entries, want the commit (page %v)", len(entries), page)
	}
	if e := entries[0].(map[string]any); e["payload"] != string(b64) || e["entry_type"] != float64(EntryCommit) {
		t.Fatalf("sync entry is not the commit (entry_type %v, %d payload bytes)", e["entry_type"], len(fmt.Sprint(e["payload"])))
	}
}

// TestLargeAppPayloadRefused: only handshakes may pass 1 MiB. A 2 MiB
// application payload, or one whose MLS header says application, still
// ends the socket with 1009 and stores nothing; a handshake over
// MaxHandshakePayload is refused with payload_too_large; a large frame
// that is not a flat publish is bad_frame.
func TestLargeAppPayloadRefused(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	app := make([]byte, 2<<20)
	rand.Read(app)
	mlsApp := append(privateMessage([]byte("g"), 1, contentApplication), app...)
	for name, payload := range map[string][]byte{"random": app, "mls application": mlsApp} {
		t.Run(name, func(t *testing.T) {
			c := dialLarge(t, tr.URL, "/ws/"+chA)
			c.auth(mint(t, "alice", ""))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c.c.Write(ctx, websocket.MessageText, largeFrame(chA, payload)) // may fail once the relay closes
			c.expectClose(websocket.StatusMessageTooBig)
		})
	}
	var rows int
	tr.db.QueryRow(`SELECT count(*) FROM messages`).Scan(&rows)
	if rows != 0 {
		t.Fatalf("%d rows archived after oversized application frames", rows)
	}

	c := dialLarge(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.sendRaw(websocket.MessageText, largeFrame(chA, largeCommit(t, 1, MaxHandshakePayload+1)))
	c.expectError("payload_too_large")
	// A large handshake in a frame of another type, or after a key the
	// relay does not know, is not a publish.
	big := base64.StdEncoding.EncodeToString(largeCommit(t, 1, 2<<20))
	c.sendRaw(websocket.MessageText, []byte(`{"type":"subscribe","channel":"`+chA+`","payload":"`+big+`"}`))
	c.expectError("bad_frame")
	// The socket is still usable, and the fence was never moved.
	if seq := c.publishAck(chA, largeCommit(t, 7, 2<<20)); seq == 0 {
		t.Fatal("no seq")
	}
	c2 := dialLarge(t, tr.URL, "/ws/"+chA)
	c2.auth(mint(t, "alice", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c2.c.Write(ctx, websocket.MessageText, []byte(`{"type":"publish","x":"1","channel":"`+chA+`","payload":"`+big+`"}`))
	c2.expectClose(websocket.StatusMessageTooBig)
}

// TestLargeFrameBudget: 40 clients each start a 16 MiB handshake frame at
// once and stall. The relay holds at most its budget for them (three
// frames of the default 128 MiB), the others wait, and the heap grows by
// about the budget plus each socket's 1 MiB, not by 40 large frames. When
// the clients go away the budget is free again for a whole publish.
func TestLargeFrameBudget(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, LargeFrameWait: time.Minute})
	const n = 40
	payload := largeCommit(t, 1, MaxHandshakePayload)
	frame := largeFrame(chA, payload)
	part := frame[:len(frame)/2] // 8 MiB of payload: every socket starts, none ends
	clients := make([]*wsClient, n)
	for i := range clients {
		clients[i] = dialLarge(t, tr.URL, "/ws/"+chA)
		clients[i].auth(mint(t, fmt.Sprintf("c%d", i), ""))
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, c := range clients {
		wg.Go(func() {
			w, err := c.c.Writer(ctx, websocket.MessageText)
			if err != nil {
				return
			}
			w.Write(part) // blocks while the relay does not read; ends with the socket
		})
	}
	budget := int64(DefaultLargeFrameBudget)
	admitted := budget / tr.largeWeight
	waitfor.Nil(t, time.Minute, func() error {
		held, waiting := tr.counters.largeHeld.Load(), tr.counters.largeWaiting.Load()
		if held > budget {
			t.Fatalf("large frames hold %d bytes, over the budget of %d", held, budget)
		}
		if held != admitted*tr.largeWeight || waiting != n-admitted {
			return fmt.Errorf("large frames hold %d bytes with %d waiting, want %d frames and %d waiting", held, waiting, admitted, n-admitted)
		}
		return nil
	})
	// Time passes: the admitted sockets read what their clients have sent
	// (nothing counts the bytes a socket has read so far).
	time.Sleep(200 * time.Millisecond)
	var during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&during)
	grown := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	bound := budget + n*2*readLimit + 64<<20
	t.Logf("heap grew by %d MiB with %d frames started (bound %d MiB)", grown>>20, n, bound>>20)
	if grown > bound {
		t.Fatalf("heap grew by %d bytes with %d large frames started, over %d", grown, n, bound)
	}

	for _, c := range clients {
		c.c.CloseNow()
	}
	cancel()
	waitfor.Nil(t, time.Minute, func() error {
		if held, waiting := tr.counters.largeHeld.Load(), tr.counters.largeWaiting.Load(); held != 0 || waiting != 0 {
			return fmt.Errorf("budget still held (%d bytes, %d waiting) after the clients left", held, waiting)
		}
		return nil
	})
	c := dialLarge(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "last", ""))
	c.sendRaw(websocket.MessageText, frame)
	c.expect(map[string]any{"type": "ok", "message": "published"})
}

// TestLargeFrameBusy: a handshake that finds the budget full past
// LargeFrameWait is read on, discarded, and answered busy; the socket stays
// open and publishes once the budget is free. Nobody else waits for it.
func TestLargeFrameBusy(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, LargeFrameBudget: largeFrameWeight(MaxHandshakePayload), LargeFrameWait: 200 * time.Millisecond})
	hog, w, frame := holdLargeBudget(t, tr)

	c := dialLarge(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.sendRaw(websocket.MessageText, frame)
	c.expectError("busy")
	// Small frames of the same socket, and other sockets, go on.
	if seq := c.publishAck(chA, []byte("small")); seq == 0 {
		t.Fatal("no seq")
	}
	if got := tr.counters.largeRefused.Load(); got != 1 {
		t.Fatalf("%d large frames refused, want 1", got)
	}

	// The first frame completes; then the budget is free again.
	if _, err := w.Write(frame[len(frame)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	expectAck(t, hog)
	c.sendRaw(websocket.MessageText, largeFrame(chA, largeCommit(t, 2, 4<<20)))
	expectAck(t, c)
	if tr.counters.largeHeld.Load() != 0 {
		t.Fatalf("budget held after both frames: %d", tr.counters.largeHeld.Load())
	}
}

// TestLargeCommitSlowSubscriber: large commits drop a subscriber that
// reads nothing as slow, and not one that keeps reading, though two of
// them are more than the 16 MiB MaxQueueBytes: a queue has room for one
// largest handshake besides its other frames.
func TestLargeCommitSlowSubscriber(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	healthy := dialLarge(t, tr.URL, "/ws/"+chA)
	healthy.auth(mint(t, "healthy", ""))
	slow := dialLarge(t, tr.URL, "/ws/"+chA)
	slow.auth(mint(t, "slow", ""))
	pub := dialLarge(t, tr.URL, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))
	slowGone := func() (dropped, gone bool) {
		for _, c := range tr.hub.all() {
			if c.sub == "slow" {
				return tr.counters.slow.Load() > 0, false
			}
		}
		return tr.counters.slow.Load() > 0, true
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	small := []byte("small application message")
	for i := range 8 {
		if dropped, gone := slowGone(); dropped || gone {
			break
		}
		if i == 7 {
			t.Fatal("the subscriber that reads nothing was never dropped")
		}
		// A few small messages, then a 12 MiB commit, back to back.
		for range 4 {
			pub.publish(chA, small)
		}
		p := largeCommit(t, uint64(i+1), 12<<20)
		b64 := []byte(base64.StdEncoding.EncodeToString(p))
		pub.sendRaw(websocket.MessageText, largeFrame(chA, p))
		for range 5 {
			pub.expect(map[string]any{"type": "ok", "message": "published"})
		}
		for range 4 {
			healthy.expect(map[string]any{"type": "message", "payload": base64.StdEncoding.EncodeToString(small)})
		}
		got, err := readPushStream(ctx, healthy.c)
		if err != nil {
			t.Fatalf("healthy subscriber, commit %d: %v", i+1, err)
		}
		checkPush(t, got, chA, b64)
	}
	waitfor.True(t, time.Minute, func() bool {
		dropped, gone := slowGone()
		if !dropped && gone {
			// As in testSlowConsumer: under the race detector the relay's
			// write to it may hit the write deadline first.
			t.Log("the subscriber that reads nothing was cut off by the write deadline")
		}
		return dropped || gone
	}, "the subscriber that reads nothing was never dropped")
	if got := tr.counters.slow.Load(); got > 1 {
		t.Fatalf("%d subscribers dropped as slow, want only the one that reads nothing", got)
	}
	for _, c := range tr.hub.all() {
		if c.sub == "healthy" && c.isClosing() {
			t.Fatal("the healthy subscriber is closing")
		}
	}
}

// TestLargeCommitJetStream: on JetStream a handshake may be as large as
// the NATS servers' max_payload admits (8 MiB here): a 6 MiB commit is
// stored, pushed and read back, and a 12 MiB one is refused to its
// publisher with payload_too_large naming the cap, the fence unmoved.
func TestLargeCommitJetStream(t *testing.T) {
	be := &testBackend{name: "jetstream", nats: startNATS(t)}
	tr := be.start(t, Config{})
	if want := 8<<20 - jsarchive.HeaderRoom; tr.maxHandshake != want {
		t.Fatalf("handshake cap %d on an 8 MiB server, want %d", tr.maxHandshake, want)
	}
	sub := dialLarge(t, tr.URL, "/ws/"+chA)
	sub.auth(mint(t, "sub", ""))
	pub := dialLarge(t, tr.URL, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))

	pub.sendRaw(websocket.MessageText, largeFrame(chA, largeCommit(t, 1, 12<<20)))
	m := pub.expectError("payload_too_large")
	if msg, _ := m["message"].(string); !strings.Contains(msg, fmt.Sprint(tr.maxHandshake)) {
		t.Fatalf("refusal %q does not name the cap %d", msg, tr.maxHandshake)
	}

	payload := largeCommit(t, 1, 6<<20)
	b64 := []byte(base64.StdEncoding.EncodeToString(payload))
	pub.sendRaw(websocket.MessageText, largeFrame(chA, payload))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := readPushStream(ctx, sub.c)
	if err != nil {
		t.Fatal(err)
	}
	seq := checkPush(t, p, chA, b64)
	expectAck(t, pub)
	status, page := httpGet(t, tr.URL+"/v1/sync?channel="+chA, mint(t, "sub", ""))
	entries, _ := page["entries"].([]any)
	if status != 200 || len(entries) != 1 {
		t.Fatalf("sync: %d with %d entries, want the commit", status, len(entries))
	}
	if e := entries[0].(map[string]any); e["payload"] != string(b64) || e["seq"] != float64(seq) {
		t.Fatalf("sync entry is not the commit (seq %v, want %d)", e["seq"], seq)
	}
}

// TestLargeFrameTrickleClosed: a client that starts a large handshake and
// then sends the rest too slowly is closed after LargeFrameTimeout, and the
// budget it held goes to the next large handshake, which is stored. The
// timeout is also the time the honest client has to send its 4 MiB once it
// holds the budget, so it leaves room for a slow machine under -race.
func TestLargeFrameTrickleClosed(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, LargeFrameBudget: largeFrameWeight(MaxHandshakePayload),
		LargeFrameWait: 20 * time.Second, LargeFrameTimeout: 3 * time.Second})
	hog, _, _ := holdLargeBudget(t, tr)
	// The hog stalls. Another client's large handshake waits for the
	// budget, gets it once the hog is closed, and is stored.
	c := dialLarge(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.sendRaw(websocket.MessageText, largeFrame(chA, largeCommit(t, 1, 4<<20)))
	expectAck(t, c)
	if _, _, err := hog.c.Read(context.Background()); err == nil {
		t.Fatal("the trickling socket is still open")
	}
	if got := tr.counters.largeRefused.Load(); got != 0 {
		t.Fatalf("%d large frames refused busy, want none", got)
	}
	waitfor.Nil(t, 10*time.Second, func() error {
		if held := tr.counters.largeHeld.Load(); held != 0 {
			return fmt.Errorf("budget still held: %d", held)
		}
		return nil
	})
}

// holdLargeBudget has a socket send half of a large handshake's frame and
// stall, and returns once the relay holds the large-frame budget for it:
// the socket, the writer of the unfinished message and the whole frame.
func holdLargeBudget(t *testing.T, tr *testRelay) (*wsClient, io.WriteCloser, []byte) {
	t.Helper()
	hog := dialLarge(t, tr.URL, "/ws/"+chA)
	hog.auth(mint(t, "hog", ""))
	frame := largeFrame(chA, largeCommit(t, 1, 4<<20))
	w, err := hog.c.Writer(context.Background(), websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(frame[:len(frame)/2]); err != nil {
		t.Fatal(err)
	}
	waitfor.True(t, 30*time.Second, func() bool { return tr.counters.largeHeld.Load() != 0 }, "the large frame never took the budget")
	return hog, w, frame
}
