package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestSubscribeThenCatchUpMissesNothing checks the reconnect contract: a
// client that subscribes, waits for the ok and then reads /v1/sync finds
// every entry either in that read or among its pushes, while a publisher
// keeps many messages in flight. Application messages are pushed before
// they are durable, so without the subscription's ok waiting for the
// archive, an entry pushed just before the subscription took effect was in
// neither.
func TestSubscribeThenCatchUpMissesNothing(t *testing.T) {
	forBackends(t, testSubscribeThenCatchUpMissesNothing)
}

func testSubscribeThenCatchUpMissesNothing(t *testing.T, be *testBackend) {
	// A deep send queue: the subscriber reads nothing while it catches up.
	// A cap the test never reaches: an entry the cap evicts between two
	// pages of a catch-up is gone by design, not missed.
	tr := be.start(t, Config{DBPath: filepath.Join(t.TempDir(), "relay.db"), SendQueue: 1 << 16, ArchiveCap: 1 << 22})
	const ch = "acme/ops/catchup"
	pub := dialWS(t, tr.URL, "/ws/"+ch)
	pub.auth(mint(t, "pub", ""))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Publishes in flight. The catch-up ends only once the reads outpace
	// the publisher; under the race detector the reads (SQLite's code,
	// instrumented) are slowed far more than the file-backed archive's
	// publishes, so the publisher goes slower there.
	inflight := 64
	if raceEnabled {
		inflight = 4
	}
	window := make(chan struct{}, inflight)
	wg.Go(func() { // the publisher's acks
		for {
			if _, _, err := pub.c.Read(context.Background()); err != nil {
				return
			}
			<-window
		}
	})
	wg.Go(func() {
		frame := []byte(`{"type":"publish","channel":"` + ch + `","payload":"cGF5bG9hZA=="}`)
		for {
			select {
			case window <- struct{}{}:
			case <-stop:
				return
			}
			if pub.c.Write(context.Background(), websocket.MessageText, frame) != nil {
				return
			}
		}
	})
	defer func() {
		close(stop)
		pub.c.CloseNow()
		wg.Wait()
	}()

	rounds := 30
	if testing.Short() {
		rounds = 10
	}
	tok := mint(t, "sub", "")
	var had uint64 // the highest seq the subscriber has, as a client keeps it
	for round := range rounds {
		sub := dialWS(t, tr.URL, "/ws/"+ch)
		got := map[uint64]bool{}
		var hi uint64
		read := func() string {
			_, b, err := sub.c.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var f struct {
				Type string `json:"type"`
				Seq  uint64 `json:"seq"`
			}
			json.Unmarshal(b, &f)
			if f.Type == "message" {
				got[f.Seq], hi = true, max(hi, f.Seq)
			}
			return f.Type
		}
		// Subscribed through the path once the ok is read; pushes may
		// come before it.
		sub.send(map[string]string{"type": "auth", "token": tok})
		for read() != "ok" {
		}
		var last uint64
		for since := had; ; {
			_, page := httpGet(t, fmt.Sprintf("%s/v1/sync?channel=%s&since_seq=%d&limit=500", tr.URL, ch, since), tok)
			for _, e := range page["entries"].([]any) {
				seq := uint64(e.(map[string]any)["seq"].(float64))
				got[seq], since = true, seq
			}
			if more, _ := page["has_more"].(bool); !more {
				last = since
				break
			}
		}
		// Read pushes until well past what the read returned.
		for hi < last+50 {
			read()
		}
		for seq := had + 1; seq <= hi; seq++ {
			if !got[seq] {
				t.Fatalf("round %d: seq %d neither pushed nor served by a read after the ok (read returned up to %d)", round, seq, last)
			}
		}
		had = hi
		sub.c.CloseNow()
		time.Sleep(time.Duration(round%3) * time.Millisecond) // time passes: the next round starts at a varied moment
	}
}
