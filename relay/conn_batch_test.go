package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// authBatch authenticates asking for coalesced pushes.
func (w *wsClient) authBatch(tok string) {
	w.t.Helper()
	w.sendRaw(websocket.MessageText, []byte(`{"type":"auth","token":"`+tok+`","batch":true}`))
	w.expect(map[string]any{"type": "ok", "message": "authenticated"})
}

// readFrames reads whole WebSocket messages until n frames have come (or
// the socket ends) and returns the frames (split at each "\n") and the
// number of frames of each message.
func readFrames(t testing.TB, c *websocket.Conn, n int) (frames [][]byte, sizes []int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(frames) < n {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %d of %d frames: %v", len(frames), n, err)
		}
		parts := bytes.Split(b, []byte("\n"))
		for _, p := range parts {
			if !json.Valid(p) || len(p) == 0 || p[0] != '{' {
				t.Fatalf("message part %q is not a JSON object", p)
			}
		}
		frames = append(frames, parts...)
		sizes = append(sizes, len(parts))
	}
	return frames, sizes
}

// TestBatchSameFrames: under load, a subscriber that asked for batches
// sees exactly the frames, byte for byte and in the same order, of one
// that did not, which gets one JSON object per message as always; a
// batch is never larger than maxBatchBytes.
func TestBatchSameFrames(t *testing.T) { forBackends(t, testBatchSameFrames) }

func testBatchSameFrames(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true, OpenChannels: true})
	pub := dialWS(t, tr.URL, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))
	plain := dialWS(t, tr.URL, "/ws/"+chA)
	plain.auth(mint(t, "plain", ""))
	batched := dialWS(t, tr.URL, "/ws/"+chA)
	batched.authBatch(mint(t, "batched", ""))
	n := 3000
	if testing.Short() {
		n = 1000
	}
	var wg sync.WaitGroup
	var plainFrames, batchFrames [][]byte
	var plainSizes, batchSizes []int
	wg.Go(func() { plainFrames, plainSizes = readFrames(t, plain.c, n) })
	wg.Go(func() { batchFrames, batchSizes = readFrames(t, batched.c, n) })
	// Publish in bursts without waiting for each ack, so pushes queue up.
	acks := make(chan struct{}, n)
	go func() {
		for range n {
			if _, err := pub.tryRecv(time.Minute); err != nil {
				return
			}
			acks <- struct{}{}
		}
	}()
	for i := range n {
		size := 100 + i%7*1000
		if i%500 == 0 {
			size = 70 << 10 // larger than a batch: goes alone
		}
		pub.publish(chA, bytes.Repeat([]byte{byte(i)}, size))
		if i%100 == 99 {
			for range 50 {
				<-acks
			}
		}
	}
	wg.Wait()
	for _, s := range plainSizes {
		if s != 1 {
			t.Fatalf("an unbatched client got a message of %d frames", s)
		}
	}
	if len(plainFrames) != len(batchFrames) {
		t.Fatalf("plain %d frames, batched %d", len(plainFrames), len(batchFrames))
	}
	for i := range plainFrames {
		if !bytes.Equal(plainFrames[i], batchFrames[i]) {
			t.Fatalf("frame %d differs:\n%.200s\n%.200s", i, plainFrames[i], batchFrames[i])
		}
	}
	multi := 0
	for _, s := range batchSizes {
		if s > 1 {
			multi++
		}
	}
	t.Logf("batched client: %d frames in %d messages, %d of them batches", len(batchFrames), len(batchSizes), multi)
}

// TestWriteFramesPacking: with pack, frames go into as few messages as
// maxBatchBytes allows, joined by "\n", and a frame over the bound goes
// alone; without it every frame is its own message, exactly as before.
func TestWriteFramesPacking(t *testing.T) {
	frame := func(n int) []byte {
		b := bytes.Repeat([]byte{'x'}, n)
		b[0], b[n-1] = '{', '}'
		return b
	}
	big := frame(maxBatchBytes + 10)
	msgs := [][]byte{frame(10), frame(20), frame(maxBatchBytes - 20), frame(15), big, frame(5)}
	for _, pack := range []bool{false, true} {
		a, b := net.Pipe()
		fc := &frameConn{Conn: a}
		got := make(chan []byte, 1)
		go func() { raw, _ := io.ReadAll(b); got <- raw }()
		if err := fc.writeFrames(msgs, pack); err != nil {
			t.Fatal(err)
		}
		a.Close()
		raw := <-got
		var bodies [][]byte
		for len(raw) > 0 {
			if raw[0] != 0x81 {
				t.Fatalf("frame header %x", raw[0])
			}
			n, hdr := int(raw[1]), 2
			switch n {
			case 126:
				n, hdr = int(raw[2])<<8|int(raw[3]), 4
			case 127:
				n, hdr = 0, 10
				for _, c := range raw[2:10] {
					n = n<<8 | int(c)
				}
			}
			bodies = append(bodies, raw[hdr:hdr+n])
			raw = raw[hdr+n:]
		}
		var want [][]byte
		if pack {
			want = [][]byte{
				bytes.Join(msgs[0:2], []byte("\n")), // the third would pass the bound
				bytes.Join(msgs[2:4], []byte("\n")),
				big,
				msgs[5],
			}
		} else {
			want = msgs
		}
		if len(bodies) != len(want) {
			t.Fatalf("pack %v: %d messages, want %d", pack, len(bodies), len(want))
		}
		for i := range want {
			if !bytes.Equal(bodies[i], want[i]) {
				t.Fatalf("pack %v: message %d differs (%d bytes, want %d)", pack, i, len(bodies[i]), len(want[i]))
			}
			if pack && len(bodies[i]) > maxBatchBytes && bytes.IndexByte(bodies[i], '\n') >= 0 {
				t.Fatalf("message %d: a batch of %d bytes", i, len(bodies[i]))
			}
		}
	}
}

// TestBatchSlowConsumerDropped: a batched subscriber that reads nothing is
// still cut off by its full queue, and a batched subscriber that keeps up
// gets every message meanwhile.
func TestBatchSlowConsumerDropped(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, SendQueue: 4})
	pub := dialWS(t, tr.URL, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))
	fast := dialWS(t, tr.URL, "/ws/"+chA)
	fast.authBatch(mint(t, "fast", ""))
	slow := dialWS(t, tr.URL, "/ws/"+chA)
	slow.authBatch(mint(t, "slow", ""))
	slowClosing := func() bool {
		for _, c := range tr.hub.all() {
			if c.sub == "slow" {
				return c.isClosing()
			}
		}
		return true // gone already (the write deadline)
	}
	var got atomic.Int64
	go func() {
		ctx := context.Background()
		for {
			_, b, err := fast.c.Read(ctx)
			if err != nil {
				return
			}
			for _, p := range bytes.Split(b, []byte("\n")) {
				var m map[string]any
				if json.Unmarshal(p, &m) == nil && m["type"] == "message" {
					got.Add(1)
				}
			}
		}
	}()
	payload := bytes.Repeat([]byte{1}, 64<<10)
	n := 0
	for !slowClosing() {
		if n == 5000 {
			t.Fatal("slow batched consumer was never disconnected")
		}
		keepUp(t, &got, n)
		n++
		pub.publishAck(chA, payload)
	}
	waitfor.Nil(t, 20*time.Second, func() error {
		if g := got.Load(); g != int64(n) {
			return fmt.Errorf("fast subscriber received %d of %d", g, n)
		}
		return nil
	})
}

// TestBatchOnlyAtAuth: batch in a later frame changes nothing, and a
// batch value that is not a boolean is a bad frame.
func TestBatchOnlyAtAuth(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.sendRaw(websocket.MessageText, []byte(`{"type":"subscribe","channel":"`+chA+`","batch":"yes"}`))
	c.expectError("bad_frame")
	c.sendRaw(websocket.MessageText, []byte(fmt.Sprintf(`{"type":"publish","channel":%q,"payload":%q,"batch":true}`,
		chA, base64.StdEncoding.EncodeToString([]byte("x")))))
	c.expect(map[string]any{"type": "ok", "message": "published"})
	for _, cn := range tr.hub.all() {
		if cn.sub == "alice" && cn.batch.Load() {
			t.Fatal("a publish frame turned batches on")
		}
	}
}
