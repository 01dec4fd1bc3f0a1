package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// TestLentFrameHeld: a lent push frame is held by the buffer it was lent
// in, and given back to the pool by the last reference; a frame that was
// not lent has no buffer, and one that outgrew its buffer is no longer
// held by it (fan-out then leaves both to the collector).
func TestLentFrameHeld(t *testing.T) {
	f, pb := backend.LendPushPrefix(chA, 100)
	f = append(f, bytes.Repeat([]byte("A"), 100)...)
	f = backend.PushSuffix(f, 1<<63, EntryApp, 1<<62)
	if pb == nil || !pb.Holds(f) {
		t.Fatal("a lent frame is not held by its buffer")
	}
	if pb.Holds(backend.PushPrefix(chA, 10)) || pb.Holds(nil) {
		t.Fatal("a buffer holds a frame that is not its own")
	}
	pb.Share()
	pb.Release()
	if f, pb := backend.LendPushPrefix(chA, 128<<10); pb != nil || len(f) == 0 {
		t.Fatal("a frame larger than every class was lent")
	}
	g, gb := backend.LendPushPrefix(chA, 10)
	g = append(g, bytes.Repeat([]byte("B"), 4<<10)...) // past its buffer: copied
	if gb.Holds(g) {
		t.Fatal("a frame that left its buffer is held by it")
	}
}

// TestLentFramesKeepTheirBytes: many publishes on two channels, fanned out
// to plain and batched subscribers while one subscriber that reads nothing
// is dropped and another leaves halfway. Every push a subscriber gets is
// the one published, in order, whatever buffers were given back and lent
// again meanwhile (the race detector sees a buffer reused too early).
func TestLentFramesKeepTheirBytes(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, SendQueue: 4096, MaxQueueBytes: 256 << 10})
	chans := []string{chA, "acme/payments/other"}
	n := 1500
	if raceEnabled {
		n = 400
	}
	type sub struct {
		c    *wsClient
		ch   string
		stop int // leaves after this many pushes; 0 reads them all
		got  *atomic.Int64
	}
	var subs []sub
	for i, ch := range chans {
		for j := range 3 {
			c := dialWS(t, tr.URL, "/ws/"+ch)
			tok := mint(t, fmt.Sprintf("s%d-%d", i, j), "")
			if j == 1 {
				c.authBatch(tok)
			} else {
				c.auth(tok)
			}
			stop := 0
			if j == 2 {
				stop = n / 2
			}
			subs = append(subs, sub{c, ch, stop, new(atomic.Int64)})
		}
		slow := dialWS(t, tr.URL, "/ws/"+ch)
		slow.auth(mint(t, fmt.Sprintf("slow%d", i), ""))
	}
	payload := func(ch string, k int) []byte {
		return []byte(fmt.Sprintf("%s message %d %s", ch, k, bytes.Repeat([]byte{byte('a' + k%26)}, k*37%3000)))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, len(subs))
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Go(func() {
			defer s.got.Store(math.MaxInt64) // nobody waits for a reader that ended
			k := 0
			for s.stop == 0 || k < s.stop {
				_, b, err := s.c.c.Read(ctx)
				if err != nil {
					errs <- fmt.Errorf("%s: after %d pushes: %w", s.ch, k, err)
					return
				}
				for _, part := range bytes.Split(b, []byte("\n")) {
					var m struct{ Type, Channel, Payload string }
					if err := json.Unmarshal(part, &m); err != nil {
						errs <- fmt.Errorf("%s: push %d is not JSON: %.80q", s.ch, k, part)
						return
					}
					want := base64.StdEncoding.EncodeToString(payload(s.ch, k))
					if m.Type != "message" || m.Channel != s.ch || m.Payload != want {
						errs <- fmt.Errorf("%s: push %d is %.120q, want %.80q", s.ch, k, part, want)
						return
					}
					k++
					s.got.Store(int64(k))
					if k == n {
						return
					}
				}
			}
			s.c.c.CloseNow()
		})
	}
	var pw sync.WaitGroup
	for _, ch := range chans {
		pub := dialWS(t, tr.URL, "/ws/"+ch)
		pub.auth(mint(t, "pub-"+ch, ""))
		pw.Go(func() {
			go func() { // acks
				for {
					if _, _, err := pub.c.Read(ctx); err != nil {
						return
					}
				}
			}()
			for k := range n {
				// The readers that keep up stay within a window of it.
				for _, s := range subs {
					for s.ch == ch && s.stop == 0 && s.got.Load() < int64(k-64) {
						if ctx.Err() != nil {
							return
						}
						time.Sleep(100 * time.Microsecond) // flow control, not a wait the test fails on: the context ends it
					}
				}
				f := `{"type":"publish","channel":"` + ch + `","payload":"` + base64.StdEncoding.EncodeToString(payload(ch, k)) + `"}`
				if err := pub.c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	pw.Wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
