package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/internal/waitfor"
)

// TestFirstEpochBounded: a first commit far ahead of any group, or at the
// last epoch, is refused with epoch_out_of_range, is neither stored nor
// delivered, and leaves the channel open to the real first commit.
func TestFirstEpochBounded(t *testing.T) { forBackends(t, testFirstEpochBounded) }

func testFirstEpochBounded(t *testing.T, be *testBackend) {
	tr := be.start(t, Config{NoSync: true, OpenChannels: true, MaxFirstEpoch: 100})
	gid := []byte("g")
	tok := mint(t, "alice", "")
	a := dialWS(t, tr.URL, "/ws/"+chA)
	a.auth(tok)
	b := dialWS(t, tr.URL, "/ws/"+chA)
	b.auth(mint(t, "bob", ""))

	for _, p := range [][]byte{
		publicMessage(gid, math.MaxUint64-1, 3),
		privateMessage(gid, math.MaxUint64, 3),
		publicMessage(gid, 101, 3),
	} {
		a.publish(chA, p)
		if m := a.expectError("epoch_out_of_range"); m["max_epoch"].(float64) != 100 {
			t.Fatalf("refusal %v", m)
		}
	}
	b.expectQuiet()
	if _, m := httpGet(t, tr.URL+"/v1/sync?channel="+chA, tok); len(m["entries"].([]any)) != 0 {
		t.Fatalf("refused commits archived: %v", m)
	}
	// The group's real first commit at the bound sets the fence.
	if seq := a.publishAck(chA, publicMessage(gid, 100, 3)); seq != 1 {
		t.Fatalf("first accepted commit got seq %d", seq)
	}
	b.expect(map[string]any{"type": "message", "seq": 1, "entry_type": 1})
	a.publish(chA, publicMessage(gid, 100, 3))
	a.expectError("stale_epoch")

	// A fence reset to the last epoch but one: the commit there would
	// move the fence past every epoch, so it is refused too.
	if err := tr.arch.ResetFence(chA, math.MaxUint64-1, 0); err != nil {
		t.Fatal(err)
	}
	a.publishAck(chA, publicMessage(gid, math.MaxUint64-1, 3)) // expects MaxUint64 next
	a.publish(chA, publicMessage(gid, math.MaxUint64, 3))
	a.expectError("epoch_out_of_range")

	// The default bound is 2^32.
	a.c.CloseNow()
	b.c.CloseNow()
	tr.stop(t)
	tr2 := be.start(t, Config{NoSync: true, OpenChannels: true})
	c := dialWS(t, tr2.URL, "/ws/"+chA)
	c.auth(tok)
	c.publish(chA, publicMessage(gid, 1<<32+1, 3))
	c.expectError("epoch_out_of_range")
	c.publishAck(chA, publicMessage(gid, 1<<32, 3))
}

// TestAccountQuota: an account that fills its quota is refused with
// quota_exceeded (nothing stored, nothing delivered); another account is
// unaffected; eviction by the cap and by the TTL gives the bytes back; the
// figures survive a restart, clean or not.
func TestAccountQuota(t *testing.T) { forBackends(t, testAccountQuota) }

func testAccountQuota(t *testing.T, be *testBackend) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	path := filepath.Join(t.TempDir(), "relay.db")
	cfg := Config{DBPath: path, NoSync: true, OpenChannels: true, ArchiveCap: 4, AccountQuota: 1000,
		ArchiveTTL: time.Hour, Now: clock}
	const chQ = "acme/rooms/quota"
	tr := be.start(t, cfg)
	alice := dialWS(t, tr.URL, "/ws/"+chA)
	alice.auth(mintAt(t, "alice", "", clock()))
	alice.subscribe(chQ)
	bob := dialWS(t, tr.URL, "/ws/"+chA)
	bob.auth(mintAt(t, "bob", "", clock()))
	bob.subscribe(chQ)
	p := func(tag byte) []byte { return bytes.Repeat([]byte{tag}, 300) }

	// 300 bytes each: three fit, across channels; the fourth does not.
	s1 := alice.publishAck(chA, p('a'))
	s2 := alice.publishAck(chQ, p('b'))
	s3 := alice.publishAck(chA, p('c'))
	for _, ch := range []string{chA, chQ} {
		alice.publish(ch, p('x'))
		alice.expectError("quota_exceeded")
	}
	bob.expect(map[string]any{"type": "message", "seq": s1})
	bob.expect(map[string]any{"type": "message", "seq": s2, "channel": chQ})
	bob.expect(map[string]any{"type": "message", "seq": s3})
	bob.expectQuiet()
	if got := settled(t, tr).Used("alice"); got != 900 {
		t.Fatalf("alice uses %d bytes, want 900", got)
	}
	// Bob fills chA, whose cap (4) evicts alice's oldest entries there.
	// The channel pays for its entries: alice, its first publisher, is
	// charged his 15 bytes too (no entry records that bob sent them).
	for i := range 3 {
		bob.publishAck(chA, []byte(fmt.Sprint("bob ", i)))
		alice.expect(map[string]any{"type": "message", "channel": chA})
	}
	if got := settled(t, tr).Used("alice"); got != 615 {
		t.Fatalf("after eviction alice uses %d bytes, want 615", got)
	}
	if got := settled(t, tr).Used("bob"); got != 0 {
		t.Fatalf("bob, who pays for no channel, uses %d bytes", got)
	}
	alice.publishAck(chQ, p('d'))
	alice.publish(chQ, p('y'))
	alice.expectError("quota_exceeded")
	_, m := httpGet(t, tr.URL+"/v1/sync?channel="+chQ, mintAt(t, "alice", "", clock()))
	if n := len(m["entries"].([]any)); n != 2 {
		t.Fatalf("%s holds %d entries, want 2", chQ, n)
	}

	// A clean restart keeps the figures.
	alice.c.CloseNow()
	bob.c.CloseNow()
	tr.stop(t)
	tr = be.start(t, cfg)
	if got, bobs := settled(t, tr).Used("alice"), settled(t, tr).Used("bob"); got != 915 || bobs != 0 {
		t.Fatalf("after a clean restart alice uses %d, bob %d", got, bobs)
	}
	if be.nats != nil {
		// JetStream has no saved figures: every start counts the stream.
		return
	}
	// So does a restart after a crash: the saved figures are not current
	// then (the mark is cleared while the relay runs), and the archive is
	// scanned instead.
	var clean int64
	tr.db.QueryRow(`SELECT value FROM state WHERE key = 'usage_clean'`).Scan(&clean)
	if clean != 0 {
		t.Fatalf("usage_clean is %d while the relay runs", clean)
	}
	tr.stop(t)
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	db.Exec(`UPDATE usage SET bytes = 5`)                           // stale figures
	db.Exec(`UPDATE state SET value = 0 WHERE key = 'usage_clean'`) // as a crash leaves it
	db.Close()
	tr = be.start(t, cfg)
	if got := settled(t, tr).Used("alice"); got != 915 {
		t.Fatalf("after an unclean restart alice uses %d, want 915", got)
	}
}

// TestQuotaFreedByTTL: entries that expire give their bytes back.
func TestQuotaFreedByTTL(t *testing.T) { forBackends(t, testQuotaFreedByTTL) }

func testQuotaFreedByTTL(t *testing.T, be *testBackend) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// The sweep runs every TTL; entries expire only when the clock moves.
	tr := be.start(t, Config{NoSync: true, OpenChannels: true, AccountQuota: 1000,
		ArchiveTTL: 50 * time.Millisecond, Now: clock})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, bytes.Repeat([]byte{1}, 600))
	c.publish(chA, bytes.Repeat([]byte{2}, 600))
	c.expectError("quota_exceeded")
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	waitfor.Nil(t, 20*time.Second, func() error {
		if used := tr.arch.Used("alice"); used != 0 {
			return fmt.Errorf("alice still uses %d bytes after her entry expired", used)
		}
		return nil
	})
	c.publishAck(chA, bytes.Repeat([]byte{3}, 1000))
}

// BenchmarkOpenRecomputeUsage: opening an archive of 200,000 rows of 1 KiB
// after a crash, when the accounts' usage is recomputed from the rows (the
// file is in the page cache). One op is one New and Close.
func BenchmarkOpenRecomputeUsage(b *testing.B) {
	const rows = 200000
	path := filepath.Join(b.TempDir(), "relay.db")
	cfg := Config{DBPath: path, JWTSecret: testSecret, NoSync: true, OpenChannels: true}
	s, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	s.Close(context.Background())
	db, err := sqlitedb.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO messages (channel, seq, entry_type, ts, payload, size)
		SELECT 'acme/ch/' || (i % 100), i, 0, i, randomblob(1024), 1024 FROM n`, rows); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99)
		INSERT INTO channels (name, reserved, payer) SELECT 'acme/ch/' || i, ?, 'account-' || (i % 50) FROM n`, rows); err != nil {
		b.Fatal(err)
	}
	clear := func() {
		if _, err := db.Exec(`UPDATE state SET value = 0 WHERE key = 'usage_clean'`); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		clear()
		b.StartTimer()
		s, err := New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := s.arch.Used("account-1"); got != rows/50*1024 {
			b.Fatalf("account-1 uses %d bytes", got)
		}
		s.Close(context.Background())
		b.StartTimer()
	}
	b.StopTimer()
	db.Close()
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)*1e6/rows, "ms/Mrows")
}

// TestQuotaMatchesArchive: with random publishes from several accounts,
// evictions by a small cap, TTL sweeps that cut into what the cap would
// evict next, and restarts, the bytes the relay counts per account are
// always, once it is idle, what the archive holds.
func TestQuotaMatchesArchive(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	path := filepath.Join(t.TempDir(), "relay.db")
	// The sweep runs every TTL of real time; entries expire only when the
	// clock is moved past it.
	cfg := Config{DBPath: path, NoSync: true, OpenChannels: true, ArchiveCap: 32, ArchiveTTL: 100 * time.Millisecond, Now: clock}
	chans := []string{chA, "acme/rooms/quota"}
	subs := []string{"alice", "bob", "carol"}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(tr *testRelay, when string) {
		t.Helper()
		waitfor.Nil(t, 10*time.Second, func() error {
			want := map[string]int64{}
			rows, err := tr.db.Query(`SELECT c.payer, sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel GROUP BY c.payer`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var sub string
				var n int64
				rows.Scan(&sub, &n)
				want[sub] = n
			}
			rows.Close()
			ok := true
			var report []string
			for _, s := range subs {
				used := tr.arch.Used(s)
				if used != want[s] {
					ok = false
				}
				report = append(report, fmt.Sprintf("%s: %s uses %d bytes, the archive holds %d", when, s, used, want[s]))
			}
			if ok {
				return nil
			}
			return errors.New(strings.Join(report, "\n"))
		})
	}
	for round := range 4 {
		tr := startRelay(t, cfg)
		conns := map[string]*wsClient{}
		for _, s := range subs {
			c := dialWS(t, tr.URL, "/ws")
			c.auth(mintAt(t, s, "", clock()))
			for _, ch := range chans {
				c.subscribe(ch)
			}
			conns[s] = c
		}
		for step := range 300 {
			s := subs[rng.IntN(len(subs))]
			// Pushes of the others' publishes come first; read to the ack.
			c := conns[s]
			c.publish(chans[rng.IntN(len(chans))], bytes.Repeat([]byte{byte(step)}, 1+rng.IntN(500)))
			for {
				m := c.recv()
				if m["type"] == "ok" && m["message"] == "published" {
					break
				}
				if m["type"] == "error" {
					t.Fatalf("publish refused: %v", m)
				}
			}
			if step%50 == 49 {
				check(tr, fmt.Sprintf("round %d step %d", round, step))
				// Expire the oldest entries, often some within the cap:
				// the sweep then cuts into what the cap evicts next.
				advance(time.Duration(40+rng.IntN(60)) * time.Millisecond)
				cutoff := clock().Add(-cfg.ArchiveTTL).UnixMilli()
				waitfor.Nil(t, 10*time.Second, func() error {
					var old int
					tr.db.QueryRow(`SELECT count(*) FROM messages WHERE ts < ?`, cutoff).Scan(&old)
					if old != 0 {
						return fmt.Errorf("%d expired rows are not swept", old)
					}
					return nil
				})
				check(tr, fmt.Sprintf("round %d step %d after a sweep", round, step))
			} else {
				advance(time.Millisecond)
			}
		}
		check(tr, fmt.Sprintf("round %d end", round))
		for _, c := range conns {
			c.c.CloseNow()
		}
		tr.stop(t)
	}
}
