package seat_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// Benchmarks of the seat through a real in-process stack (directory and
// relay on loopback, in-memory SQLite for both planes, a file-backed seat
// store). Run them with
//
//	go test ./seat -run '^$' -bench . -benchtime 5x

const benchEntries = 10_000

func benchStack(b *testing.B) *skytaletest.Stack {
	return skytaletest.NewStackWith(b, skytaletest.Options{Relay: skytale.RelayConfig{ArchiveCap: 1 << 20}})
}

// benchSeat opens a seat in a new home with a new phrase, or restored
// from phrase, signed in to acct (the home seals its key, so the phrase
// comes first).
func benchSeat(b *testing.B, st *skytaletest.Stack, acct skytaletest.Account, phrase string) *seat.Seat {
	b.Helper()
	ctx := context.Background()
	s, err := seat.Open(ctx, seat.Config{Home: b.TempDir(), APIURL: st.APIURL, RelayURL: st.RelayURL})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(context.Background()) })
	if phrase == "" {
		_, err = s.Init(ctx)
	} else {
		_, err = s.Restore(ctx, phrase)
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := s.UseAccount(ctx, acct.ID, acct.Org, acct.APIKey); err != nil {
		b.Fatal(err)
	}
	return s
}

// entryText is a typical short log entry (about 60 bytes).
func entryText(i int) string {
	return fmt.Sprintf("entry %05d: remember to water the plants on the balcony", i)
}

// BenchmarkPush10k seals and publishes 10,000 new log entries per
// operation (adding them to the local log is not timed).
func BenchmarkPush10k(b *testing.B) {
	ctx := context.Background()
	st := benchStack(b)
	s := benchSeat(b, st, st.NewAccount(b, "acme"), "")
	if _, err := s.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for j := range benchEntries {
			if _, err := s.Add(ctx, entryText(j)); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		n, err := s.Push(ctx)
		if err != nil || n != benchEntries {
			b.Fatalf("pushed %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(benchEntries*b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkPull10k restores a fresh home from the phrase and pulls, opens
// and merges a log of 10,000 entries per operation.
func BenchmarkPull10k(b *testing.B) {
	ctx := context.Background()
	st := benchStack(b)
	acct := st.NewAccount(b, "acme")
	a := benchSeat(b, st, acct, "")
	for j := range benchEntries {
		if _, err := a.Add(ctx, entryText(j)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := a.Push(ctx); err != nil {
		b.Fatal(err)
	}
	words, _ := a.Phrase()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h := benchSeat(b, st, acct, strings.Join(words, " "))
		b.StartTimer()
		n, err := h.Pull(ctx, nil)
		if err != nil || n != benchEntries {
			b.Fatalf("pulled %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(benchEntries*b.N)/b.Elapsed().Seconds(), "entries/s")
}

// benchRoom sets up a room of Alice and Bob on a fresh stack.
func benchRoom(b *testing.B) (alice, bob *seat.Seat, room string) {
	b.Helper()
	return benchRoomOn(b, benchStack(b))
}

// benchRoomOn sets up a room of Alice and Bob on st.
func benchRoomOn(b *testing.B, st *skytaletest.Stack) (alice, bob *seat.Seat, room string) {
	b.Helper()
	ctx := context.Background()
	alice = benchSeat(b, st, st.NewAccount(b, "alice"), "")
	bob = benchSeat(b, st, st.NewAccount(b, "bob"), "")
	room, err := alice.Room("bench").Create(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := alice.Room("bench").Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	joined := make(chan error, 1)
	go func() { _, err := bob.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: time.Minute}); joined <- err }()
	waitfor.True(b, time.Minute, func() bool {
		a, err := alice.Room("bench").Admit(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return len(a) > 0
	}, "alice admitted no join request in a minute")
	if err := <-joined; err != nil {
		b.Fatal(err)
	}
	return alice, bob, room
}

// BenchmarkRoomMessageWatch measures one room message from Alice's
// RoomSend (catch up, MLS protect, publish, durable ack, store) to Bob's
// running watch delivering it (relay push, decrypt, store, callback):
// ns/op is that latency. send-ms is the part until RoomSend returns.
func BenchmarkRoomMessageWatch(b *testing.B) {
	alice, bob, room := benchRoom(b)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan seat.RoomMessage, 16)
	ready := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- bob.WatchWith(ctx, []string{room}, seat.WatchOptions{
			OnMessage: func(m seat.RoomMessage) { got <- m },
			OnEvent: func(e seat.WatchEvent) {
				if e.Connected {
					select {
					case ready <- struct{}{}:
					default:
					}
				}
			},
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	<-ready

	var sendTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := alice.Room("bench").Send(context.Background(), "ping"); err != nil {
			b.Fatal(err)
		}
		sendTotal += time.Since(start)
		select {
		case m := <-got:
			if m.Text != "ping" {
				b.Fatalf("bob got %q", m.Text)
			}
		case <-time.After(10 * time.Second):
			b.Fatal("the watch delivered nothing")
		}
	}
	b.ReportMetric(sendTotal.Seconds()*1000/float64(b.N), "send-ms")
}

// BenchmarkRoomMessageSync is the same message received without a live
// connection: after Alice's RoomSend returns, Bob's RoomSync fetches it
// through /v1/sync, decrypts and stores it. ns/op covers both calls.
func BenchmarkRoomMessageSync(b *testing.B) {
	alice, bob, room := benchRoom(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := alice.Room("bench").Send(ctx, "ping"); err != nil {
			b.Fatal(err)
		}
		msgs, err := bob.Room(room).Sync(ctx)
		if err != nil || len(msgs) != 1 || msgs[0].Text != "ping" {
			b.Fatalf("bob got %v, %v", msgs, err)
		}
	}
}

// wireLen is the size of the WebSocket frame that publishes payload on
// channel: the JSON publish frame plus the client frame header (2 bytes,
// 2 or 8 more for the length, and the 4-byte mask).
func wireLen(channel string, payload []byte) int {
	f, _ := json.Marshal(map[string]string{"type": "publish", "channel": channel, "payload": base64.StdEncoding.EncodeToString(payload)})
	n := len(f)
	switch {
	case n < 126:
		return n + 6
	case n < 1<<16:
		return n + 8
	default:
		return n + 14
	}
}

// BenchmarkCoverBandwidth puts a number on cover traffic at the default
// rate. The scheduler runs sped up (a mean interval of 50 µs instead of
// 10 s); every frame it asks for is sealed for real and measured as it
// would go on the wire. The cost per second at the real rate is then the
// mean cover frame's wire size divided by the default mean interval.
//
// Two cases: an idle connection (cover sizes from the default
// distribution) and a connection carrying one real message per second
// (one 60-byte log entry, sealed as a sync batch: a 256-byte block), whose
// sizes cover then copies. Metrics: cover-B/s (wire bytes per second of
// cover at the default rate), real-B/s (the real message per second) and
// overhead-% (cover relative to the real traffic).
func BenchmarkCoverBandwidth(b *testing.B) {
	p, err := seat.ParsePhrase(strings.Repeat("abandon ", 23) + "art")
	if err != nil {
		b.Fatal(err)
	}
	key := p.Seed().SyncKey()
	const ch = "acme/tally/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	real, err := key.Seal(ch, []seat.Entry{seat.NewEntry(entryText(0), time.Now())})
	if err != nil {
		b.Fatal(err)
	}
	realWire := float64(wireLen(ch, real))

	for _, tc := range []struct {
		name    string
		observe bool
	}{{"idle", false}, {"1msg-per-s", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var frames, bytes int
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sched := cover.New(cover.Config{MeanInterval: 50 * time.Microsecond, Rand: rand.NewPCG(1, 2)},
				func(ctx context.Context, size int) error {
					c, err := key.SealCover(ch, size)
					if err != nil {
						return err
					}
					frames++
					bytes += wireLen(ch, c)
					if frames >= b.N {
						cancel()
					}
					return nil
				})
			if tc.observe {
				sched.Observe(len(real) - seat.Overhead)
			}
			b.ResetTimer()
			if err := sched.Run(ctx); err != nil {
				b.Fatal(err)
			}
			perSec := float64(bytes) / float64(frames) / cover.DefaultMeanInterval.Seconds()
			b.ReportMetric(perSec, "cover-B/s")
			b.ReportMetric(realWire, "real-B/s")
			b.ReportMetric(100*perSec/realWire, "overhead-%")
		})
	}
}

// BenchmarkRoomJoinWithoutOwner measures a newcomer's join by an invite
// that admits on its own, with the owner's seat closed: ns/op runs from
// RoomJoin (directory join, GroupInfo, external Commit, relay) until an
// existing member's RoomSync has read the newcomer's first message.
// join-ms is the part until RoomJoin returns.
func BenchmarkRoomJoinWithoutOwner(b *testing.B) {
	ctx := context.Background()
	st := benchStack(b)
	alice, bob, room := benchRoomOn(b, st)
	var joinTotal time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tok, err := alice.Room("bench").Invite(ctx, &seat.InviteOptions{Uses: 1, TTL: time.Hour, Auto: true})
		if err != nil {
			b.Fatal(err)
		}
		newcomer := benchSeat(b, st, st.NewAccount(b, fmt.Sprintf("newcomer%d", i)), "")
		b.StartTimer()
		start := time.Now()
		if _, err := newcomer.Room(room).Join(ctx, tok, &seat.JoinOptions{Wait: 0}); err != nil {
			b.Fatal(err)
		}
		joinTotal += time.Since(start)
		if _, err := newcomer.Room(room).Send(ctx, "hello"); err != nil {
			b.Fatal(err)
		}
		msgs, err := bob.Room(room).Sync(ctx)
		if err != nil || len(msgs) == 0 || msgs[len(msgs)-1].Text != "hello" {
			b.Fatalf("bob read %+v %v", msgs, err)
		}
	}
	b.ReportMetric(joinTotal.Seconds()*1000/float64(b.N), "join-ms")
}

// BenchmarkRoomHistory10k reads a room's history of 10,000 messages (and
// the names of their three senders) from the home's database, as
// `tally room history` does. The rows are written the way a home from
// before sealing kept them and the home is reopened, so a build that
// seals history reads them sealed.
func BenchmarkRoomHistory10k(b *testing.B) {
	ctx := context.Background()
	home := b.TempDir()
	s, err := seat.Open(ctx, seat.Config{Home: home})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Init(ctx); err != nil {
		b.Fatal(err)
	}
	if err := s.UseAccount(ctx, "acct", "acme", "sk_live_bench"); err != nil {
		b.Fatal(err)
	}
	s.Close(context.Background())
	db, err := sql.Open("sqlite", filepath.Join(home, "seat.db"))
	if err != nil {
		b.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	const ch = "acme/rooms/ops"
	senders := []string{"did:key:z6MkAlice", "did:key:z6MkBob", "did:key:z6MkCarol"}
	for i, who := range senders {
		if _, err := tx.Exec(`INSERT INTO room_history(channel, seq, sender, text, ts, kind) VALUES (?, ?, ?, ?, ?, 'name')`,
			ch, i+1, who, fmt.Sprintf("Person %d", i), time.Now().UnixMilli()); err != nil {
			b.Fatal(err)
		}
	}
	for i := range benchEntries {
		if _, err := tx.Exec(`INSERT INTO room_history(channel, seq, sender, text, ts, kind) VALUES (?, ?, ?, ?, ?, '')`,
			ch, i+10, senders[i%3], fmt.Sprintf("message %d: %s", i, strings.Repeat("x", 60)), time.Now().UnixMilli()); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tx.Exec(`DELETE FROM meta WHERE key = 'local_sealed'`); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	db.Close()
	s, err = seat.Open(ctx, seat.Config{Home: home})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	b.ResetTimer()
	for b.Loop() {
		msgs, err := s.Room("ops").History(ctx)
		if err != nil || len(msgs) != benchEntries+len(senders) || msgs[len(msgs)-1].SenderName == "" {
			b.Fatalf("%d messages, %v", len(msgs), err)
		}
	}
}
