package seat_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// watching runs a watch in the background and collects what it delivers.
type watching struct {
	msgs   chan seat.RoomMessage
	events chan seat.WatchEvent
	cancel context.CancelFunc
	done   chan error
}

func startWatch(t *testing.T, s *seat.Seat, rooms ...string) *watching {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watching{msgs: make(chan seat.RoomMessage, 100), events: make(chan seat.WatchEvent, 100), cancel: cancel, done: make(chan error, 1)}
	go func() {
		w.done <- s.WatchWith(ctx, rooms, seat.WatchOptions{
			OnMessage: func(m seat.RoomMessage) { w.msgs <- m },
			OnEvent:   func(e seat.WatchEvent) { w.events <- e },
		})
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *watching) stop() {
	w.cancel()
	<-w.done
	w.done <- nil // a second stop returns at once
}

// connected waits until the watch is live.
func (w *watching) connected(t *testing.T) {
	t.Helper()
	for {
		select {
		case e := <-w.events:
			if e.Connected {
				return
			}
		case err := <-w.done:
			w.done <- err
			t.Fatalf("watch returned: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("watch did not connect")
		}
	}
}

// expectMsgs waits for exactly these texts, in order.
func (w *watching) expectMsgs(t *testing.T, want ...string) []seat.RoomMessage {
	t.Helper()
	var got []seat.RoomMessage
	for len(got) < len(want) {
		select {
		case m := <-w.msgs:
			got = append(got, m)
			if m.Text != want[len(got)-1] {
				t.Fatalf("watch delivered %q, want %q", m.Text, want[len(got)-1])
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("watch delivered %d of %q", len(got), want)
		}
	}
	return got
}

func newWatcher(t *testing.T, st *skytaletest.Stack, org string, cov cover.Config) *member {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	s, err := seat.Open(ctx, seat.Config{Home: home, APIURL: st.APIURL, RelayURL: st.RelayURL, Cover: cov})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	did, err := s.Init(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.SignIn(ctx, org+"@example.test", org)
	if err != nil {
		t.Fatal(err)
	}
	return &member{Seat: s, did: did, acct: a, home: home}
}

func TestWatch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{DBPath: filepath.Join(dir, "relay.db")},
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dir, "directory.db")},
	})
	alice := newMember(t, st, "acme")
	bob := newMember(t, st, "bobco")
	carol := newWatcher(t, st, "carolco", cover.Config{MeanInterval: 20 * time.Millisecond})
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	join(t, alice, bob, room)
	join(t, alice, carol, room)

	// Real frames of four block sizes, so cover has sizes to copy.
	var realSeqs []uint64
	for _, n := range []int{10, 300, 700, 1500} {
		seq, err := carol.Room(room).Send(ctx, strings.Repeat("c", n))
		if err != nil {
			t.Fatal(err)
		}
		realSeqs = append(realSeqs, seq)
	}

	// Live: messages from two other members arrive in order.
	w := startWatch(t, carol.Seat, room)
	w.connected(t)
	sendTo(t, alice, room, "a1")
	sendTo(t, bob, room, "b1")
	got := w.expectMsgs(t, "a1", "b1")
	if got[0].Sender != alice.did || got[1].Sender != bob.did || got[0].Room != room {
		t.Fatalf("senders: %+v", got)
	}
	time.Sleep(300 * time.Millisecond) // time passes: cover flows at the 20 ms mean interval
	w.stop()

	// Offline: a message, a commit (dave joins), a message in the new epoch.
	sendTo(t, alice, room, "a2")
	dave := newMember(t, st, "daveco")
	join(t, alice, dave, room)
	sendTo(t, bob, room, "b2")

	// A restarted watch catches up first, then goes live again.
	w = startWatch(t, carol.Seat)
	w.expectMsgs(t, "a2", "b2")
	w.connected(t)
	sendTo(t, dave, room, "d1")
	w.expectMsgs(t, "d1")
	time.Sleep(200 * time.Millisecond) // time passes: cover flows again
	w.stop()

	// Cover never reaches anyone's history.
	wantHist := []string{strings.Repeat("c", 10), strings.Repeat("c", 300), strings.Repeat("c", 700), strings.Repeat("c", 1500), "a1", "b1", "a2", "b2", "d1"}
	h, err := carol.Room(room).History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range h {
		texts = append(texts, m.Text)
	}
	expect(t, "carol's history", texts, wantHist...)
	expect(t, "bob", received(t, bob, room), "d1")
	h, err = bob.Room(room).History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	texts = texts[:0]
	for _, m := range h {
		texts = append(texts, m.Text)
	}
	expect(t, "bob's history", texts, wantHist...)

	// The relay's view: carol's cover frames are application messages of
	// exactly the lengths her real messages had.
	tok := st.Token(t, alice.acct.APIKey)
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	lens := map[int]bool{}
	apps := map[uint64]int{}
	if _, err := rc.SyncAll(ctx, room, 0, func(e seat.RelayEntry) error {
		if e.EntryType == seat.EntryApp {
			apps[e.Seq] = len(e.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range realSeqs {
		lens[apps[seq]] = true
		delete(apps, seq)
	}
	covers := len(apps) - 5 // a1 b1 a2 b2 d1
	if covers < 5 {
		t.Fatalf("%d cover frames in about half a second at 50/s", covers)
	}
	odd := 0
	for _, n := range apps {
		if !lens[n] {
			odd++
		}
	}
	// a1, b1, a2, b2 and d1 are short real messages: the 256 bucket.
	if odd != 0 {
		t.Fatalf("%d frames whose length no real frame of carol's had (lengths %v)", odd, lens)
	}

	secrets := append([]string{}, wantHist[:4]...) // the two-byte texts are too short to be telling
	for _, m := range []*member{alice, bob, carol, dave} {
		words, _ := m.Phrase()
		secrets = append(secrets, strings.Join(words, " "), m.acct.APIKey)
	}
	scanForSecrets(t, filepath.Join(dir, "relay.db"), secrets)
	scanForSecrets(t, filepath.Join(dir, "directory.db"), secrets)
}

func TestWatchErrors(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	if err := alice.WatchWith(ctx, nil, seat.WatchOptions{OnMessage: nil}); !errors.Is(err, seat.ErrNoRooms) {
		t.Fatalf("watch with no rooms: %v", err)
	}
	if err := alice.WatchWith(ctx, []string{"nope"}, seat.WatchOptions{OnMessage: nil}); !errors.Is(err, seat.ErrNoRoom) {
		t.Fatalf("watch of an unknown room: %v", err)
	}
}

func TestWatchNoCover(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newWatcher(t, st, "acme", cover.Config{Disabled: true, MeanInterval: time.Millisecond})
	room, err := alice.Room("quiet").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, alice.Seat, room)
	w.connected(t)
	time.Sleep(200 * time.Millisecond) // time passes: long enough for cover at a 1 ms interval, were it on
	w.stop()
	tok := st.Token(t, alice.acct.APIKey)
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	if entries, _, err := rc.Sync(ctx, room, 0, 100); err != nil || len(entries) != 0 {
		t.Fatalf("cover off, yet %d entries (%v)", len(entries), err)
	}
}

// connTracker records the network connections of an HTTP client, so a
// test can cut them.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *connTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *connTracker) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func TestWatchReconnects(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")

	// Bob's watch runs on a second handle of his home whose connections
	// the test can cut.
	tr := &connTracker{}
	hc := &http.Client{Transport: &http.Transport{DialContext: tr.dial}}
	watcher, err := seat.Open(ctx, seat.Config{Home: bob.home, APIURL: st.APIURL, RelayURL: st.RelayURL, HTTPClient: hc,
		Cover: cover.Config{MeanInterval: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	w := startWatch(t, watcher, room)
	w.connected(t)
	sendTo(t, alice, room, "before")
	w.expectMsgs(t, "before")

	tr.cut()
	// The cut is reported with a retry delay; what is sent meanwhile,
	// a commit included, arrives after the reconnection.
	for e := range w.events {
		if !e.Connected {
			if e.Err == nil || e.Retry <= 0 {
				t.Fatalf("disconnect event %+v", e)
			}
			break
		}
	}
	sendTo(t, alice, room, "during")
	carol := newMember(t, st, "carolco")
	join(t, alice, carol, room)
	sendTo(t, carol, room, "after the commit")
	w.expectMsgs(t, "during", "after the commit")
	w.connected(t)
	sendTo(t, alice, room, "live again")
	w.expectMsgs(t, "live again")
	// Bob's other handle sends while the watch sends cover from the same
	// group state: the stored state is compared before it is replaced, so
	// no message key is used twice and carol reads every message.
	var want []string
	for i := range 10 {
		text := fmt.Sprintf("concurrent %d", i)
		if _, err := bob.Room(room).Send(ctx, text); err != nil {
			t.Fatal(err)
		}
		want = append(want, text)
		time.Sleep(20 * time.Millisecond) // time passes: the sends spread over the watch's cover
	}
	w.stop()

	// Bob's own handle sees the same state: the watch stored it.
	mem, epoch, err := roomMembers(bob, ctx, room)
	if err != nil || len(mem) != 3 || epoch != 2 {
		t.Fatalf("members after the watch: %d epoch %d %v", len(mem), epoch, err)
	}
	if _, err := bob.Room(room).Send(ctx, "bob still sends"); err != nil {
		t.Fatal(err)
	}
	expect(t, "carol", received(t, carol, room), append(append([]string{"live again"}, want...), "bob still sends")...)
}

// TestWatchWhileOwnerCommits runs the owner's watch and the owner's admit
// and remove commits through two handles of one home, as a watch in one
// terminal and `tally room admit` in another do: the watch cannot process
// its own home's commits, and must not store a state that loses them.
func TestWatchWhileOwnerCommits(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	room, err := alice.Room("ops").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := seat.Open(ctx, seat.Config{Home: alice.home, APIURL: st.APIURL, RelayURL: st.RelayURL,
		Cover: cover.Config{MeanInterval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	w := startWatch(t, watcher, room)
	w.connected(t)

	bob := newMember(t, st, "bobco")
	carol := newMember(t, st, "carolco")
	join(t, alice, bob, room)
	sendTo(t, bob, room, "bob 1")
	join(t, alice, carol, room)
	sendTo(t, carol, room, "carol 1")
	if err := removeFrom(alice, ctx, room, bob.did); err != nil {
		t.Fatal(err)
	}
	sendTo(t, carol, room, "carol 2")
	w.expectMsgs(t, "bob 1", "carol 1", "carol 2")
	sendTo(t, alice, room, "alice 1")
	expect(t, "carol", received(t, carol, room), "alice 1")
	w.stop()
	mem, epoch, err := roomMembers(alice, ctx, room)
	if err != nil || len(mem) != 2 || epoch != 3 {
		t.Fatalf("alice's roster: %d members, epoch %d, %v", len(mem), epoch, err)
	}
}

// TestWatchReportsCatchUp: a watch that connects behind the relay's log
// reports each page of its catch-up, up to the newest entry.
func TestWatchReportsCatchUp(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, bob, room := roomOfTwo(t, st, "ops")
	var last uint64
	for _, m := range []string{"one", "two", "three"} {
		seq, err := alice.Room(room).Send(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	var mu sync.Mutex
	var seqs []uint64
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	connected := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- bob.WatchWith(wctx, []string{room}, seat.WatchOptions{
			OnCatchUp: func(r string, seq uint64) {
				mu.Lock()
				defer mu.Unlock()
				if r == room {
					seqs = append(seqs, seq)
				}
			},
			OnEvent: func(e seat.WatchEvent) {
				if e.Connected {
					close(connected)
				}
			},
		})
	}()
	select {
	case <-connected:
	case err := <-done:
		t.Fatal(err)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) == 0 || seqs[len(seqs)-1] != last {
		t.Fatalf("catch-up reported %v, want it to reach %d", seqs, last)
	}
}
