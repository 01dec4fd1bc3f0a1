package relay

import (
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestResetFence: the owner's fence reset makes the channel expect the
// given epoch, refuses every other commit as stale, is ordered with the
// publishes around it, and survives a restart.
func TestResetFence(t *testing.T) { forBackends(t, testResetFence) }

func testResetFence(t *testing.T, be *testBackend) {
	path := filepath.Join(t.TempDir(), "relay.db")
	const chB = "acme/rooms/fresh"
	gid := []byte("g")
	tok := mint(t, "alice", "")
	stale := func(c *wsClient, epoch uint64, want uint64) {
		t.Helper()
		c.publish(chA, publicMessage(gid, epoch, 3))
		if m := c.expectError("stale_epoch"); uint64(m["epoch"].(float64)) != want {
			t.Fatalf("commit at %d: stale_epoch says %v, want %d", epoch, m["epoch"], want)
		}
	}

	tr := be.start(t, Config{DBPath: path, OpenChannels: true})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	// A jammer's commit far ahead of the group.
	c.publishAck(chA, publicMessage(gid, 1000, 3))
	stale(c, 3, 1001)

	if err := tr.arch.ResetFence(chA, 3, 0); err != nil {
		t.Fatal(err)
	}
	stale(c, 1001, 3)
	stale(c, 4, 3)
	c.publishAck(chA, publicMessage(gid, 3, 3)) // accepted; 4 next
	stale(c, 3, 4)

	// A reset on a channel that never saw a commit sets the fence too.
	if err := tr.arch.ResetFence(chB, 7, 0); err != nil {
		t.Fatal(err)
	}
	c.subscribe(chB)
	stale2 := func(epoch, want uint64) {
		t.Helper()
		c.publish(chB, publicMessage(gid, epoch, 3))
		if m := c.expectError("stale_epoch"); uint64(m["epoch"].(float64)) != want {
			t.Fatalf("%s commit at %d: stale_epoch says %v, want %d", chB, epoch, m["epoch"], want)
		}
	}
	stale2(0, 7)

	// The epoch nothing could ever follow is refused, and changes nothing.
	if err := tr.arch.ResetFence(chA, math.MaxUint64, 0); err == nil {
		t.Fatal("reset to MaxUint64 accepted")
	}
	stale(c, 5, 4)

	// Durable: a restart keeps both fences.
	c.c.CloseNow()
	tr.stop(t)
	tr = be.start(t, Config{DBPath: path, OpenChannels: true})
	c = dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	stale(c, 3, 4)
	c.publishAck(chA, publicMessage(gid, 4, 3))
	c.subscribe(chB)
	stale2(8, 7)
	c.publishAck(chB, publicMessage(gid, 7, 3))
}

// TestResetFenceOrdered: a reset submitted while publishes are queued is
// applied after them and before the ones queued after it.
func TestResetFenceOrdered(t *testing.T) { forBackends(t, testResetFenceOrdered) }

func testResetFenceOrdered(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true, OpenChannels: true})
	gid := []byte("g")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	for e := uint64(0); e < 50; e++ {
		c.publish(chA, publicMessage(gid, e, 3))
	}
	for range 50 {
		c.expect(map[string]any{"type": "ok", "message": "published"})
	}
	if err := tr.arch.ResetFence(chA, 10, 0); err != nil {
		t.Fatal(err)
	}
	c.publishAck(chA, publicMessage(gid, 10, 3))
	c.publish(chA, publicMessage(gid, 50, 3))
	if m := c.expectError("stale_epoch"); m["epoch"].(float64) != 11 {
		t.Fatalf("after the reset: stale_epoch %v, want 11", m["epoch"])
	}
}

// TestFenceOutlivesTTL: the commit fence is durable state, not derived
// from the archive. Once every entry of a channel has expired (and is
// served no more), a replayed commit for an old epoch is still refused.
// On JetStream the newest handshake message carries the fence, so it
// never expires by age there, while the relay hides and sweeps the
// others once they are past the TTL.
func TestFenceOutlivesTTL(t *testing.T) { forBackends(t, testFenceOutlivesTTL) }

func testFenceOutlivesTTL(t *testing.T, be *testBackend) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tr := be.start(t, Config{NoSync: true, OpenChannels: true, ArchiveTTL: 50 * time.Millisecond, Now: clock})
	gid := []byte("g")
	tok := mintAt(t, "alice", "", now)
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	for e := range uint64(3) {
		c.publishAck(chA, publicMessage(gid, e, 3))
	}
	c.publishAck(chA, []byte("chat"))
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	waitfor.Nil(t, 20*time.Second, func() error {
		if used := tr.arch.Used("alice"); used != 0 {
			return fmt.Errorf("alice still uses %d bytes after her entries expired", used)
		}
		return nil
	})
	if _, m := httpGet(t, tr.URL+"/v1/sync?channel="+chA, tok); len(m["entries"].([]any)) != 0 {
		t.Fatalf("expired entries served: %v", m)
	}
	c.publish(chA, publicMessage(gid, 0, 3))
	if m := c.expectError("stale_epoch"); m["epoch"].(float64) != 3 {
		t.Fatalf("after the TTL: stale_epoch %v, want 3", m["epoch"])
	}
	c.publishAck(chA, publicMessage(gid, 3, 3))
	if _, ok := jsConfig(tr.cfg); ok {
		// The sweep leaves the newest handshake message only.
		waitfor.Nil(t, 20*time.Second, func() error {
			if n, _ := storedMsgs(t, tr, chA, true); n > 2 {
				return fmt.Errorf("%d handshake messages kept past the TTL", n)
			}
			return nil
		})
	}
}
