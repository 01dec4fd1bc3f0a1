package relay

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/feed"
	"github.com/skytale-oss/skytale/internal/waitfor"
)

const chOther = "acme/rooms/other"

// archivedRows counts the entries stored for a channel.
func archivedRows(t *testing.T, tr *testRelay, ch string) int {
	t.Helper()
	if app, ok := storedMsgs(t, tr, ch, false); ok {
		hs, _ := storedMsgs(t, tr, ch, true)
		return app + hs
	}
	var n int
	if err := tr.db.QueryRow(`SELECT count(*) FROM messages WHERE channel = ?`, ch).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStrangerCannotJamFence: an account that is not a member of a channel
// publishes forged commit headers (at the room's next epoch, and at 2^64-2
// on the first commit), over both socket forms. The relay refuses them all
// with not_a_member and stores nothing, so the members' next commit is
// still accepted.
func TestStrangerCannotJamFence(t *testing.T) { forBackends(t, testStrangerCannotJamFence) }

func testStrangerCannotJamFence(t *testing.T, be *testBackend) {
	ms := NewMemberSet()
	ms.Add(chA, "alice")
	ms.Add(chA, "bob")
	tr := be.start(t, Config{NoSync: true, Members: ms})
	gid := []byte("room")

	alice := dialWS(t, tr.URL, "/ws/"+chA)
	alice.auth(mint(t, "alice", ""))
	bob := dialWS(t, tr.URL, "/ws/"+chA)
	bob.auth(mint(t, "bob", ""))
	if seq := alice.publishAck(chA, publicMessage(gid, 0, 3)); seq != 1 {
		t.Fatalf("first commit seq %d", seq)
	}
	bob.expect(map[string]any{"type": "message", "seq": 1, "entry_type": 1})

	mallory := mint(t, "mallory", "")
	m := dialWS(t, tr.URL, "/ws")
	m.auth(mallory)
	m.send(map[string]string{"type": "subscribe", "channel": chA})
	if e := m.expectError("not_a_member"); e["channel"] != chA || !strings.Contains(e["message"].(string), chA) {
		t.Fatalf("not_a_member frame does not name the channel: %v", e)
	}
	for _, forged := range [][]byte{publicMessage(gid, 1, 3), privateMessage(gid, 1, 3), publicMessage(gid, 1<<64-2, 3), []byte("spam")} {
		m.publish(chA, forged)
		m.expectError("not_a_member")
	}
	// The path form: authenticated, but not subscribed to a channel it
	// is not a member of, and its publishes there are refused too.
	p := dialWS(t, tr.URL, "/ws/"+chA)
	p.auth(mallory)
	p.expectError("not_a_member")
	p.send(map[string]string{"type": "publish", "payload": "AAEAAQ=="})
	p.expectError("not_a_member")
	p.publish(chA, publicMessage(gid, 1, 3))
	p.expectError("not_a_member")
	// A fresh channel: no fence to poison either.
	m.publish("acme/rooms/fresh", publicMessage(gid, 1<<64-2, 3))
	m.expectError("not_a_member")

	for _, path := range []string{"/v1/messages", "/v1/sync"} {
		code, body := httpGet(t, tr.URL+path+"?channel="+chA, mallory)
		if code != http.StatusForbidden || body["error"] != "not_a_member" || body["message"] == "" {
			t.Fatalf("stranger %s: %d %v", path, code, body)
		}
	}
	if n := archivedRows(t, tr, chA); n != 1 {
		t.Fatalf("%d entries archived on %s, want only the members' commit", n, chA)
	}
	if n := archivedRows(t, tr, "acme/rooms/fresh"); n != 0 {
		t.Fatalf("%d entries archived on the fresh channel", n)
	}

	// The members' next commit goes through and reaches the other member.
	if seq := alice.publishAck(chA, publicMessage(gid, 1, 3)); seq != 2 {
		t.Fatalf("members' commit seq %d", seq)
	}
	bob.expect(map[string]any{"type": "message", "seq": 2, "entry_type": 1})
	bob.expectQuiet()
	// The stranger's sockets got none of the channel's traffic.
	m.expectQuiet()
	p.expectQuiet()
	if code, body := httpGet(t, tr.URL+"/v1/sync?channel="+chA, mint(t, "bob", "")); code != 200 || len(body["entries"].([]any)) != 2 {
		t.Fatalf("member read: %d %v", code, body)
	}
}

// TestMemberAddedIsServedAtOnce: a member the source learned after the
// relay last polled is found by the poll a miss starts, well before the
// next regular poll; a stranger stays refused.
func TestMemberAddedIsServedAtOnce(t *testing.T) {
	ms := NewMemberSet()
	tr := startRelay(t, Config{NoSync: true, Members: ms, MembersPoll: time.Hour})
	c := dialWS(t, tr.URL, "/ws")
	c.auth(mint(t, "alice", ""))
	c.send(map[string]string{"type": "subscribe", "channel": chA})
	c.expectError("not_a_member")

	ms.Add(chA, "alice") // the directory registered the channel for alice
	c.subscribe(chA)
	c.publishAck(chA, []byte("first"))

	// The same for a path socket and for the catch-up reads.
	ms.Add(chOther, "bob")
	b := dialWS(t, tr.URL, "/ws/"+chOther)
	b.auth(mint(t, "bob", ""))
	b.publishAck(chOther, []byte("hello"))
	ms.Add(chA, "carol")
	if code, _ := httpGet(t, tr.URL+"/v1/messages?channel="+chA, mint(t, "carol", "")); code != 200 {
		t.Fatalf("new member read: %d", code)
	}
}

// TestMemberAddedWithinOnePoll: the regular poll brings a new member in
// without any miss (the member's first request finds it known).
func TestMemberAddedWithinOnePoll(t *testing.T) {
	ms := NewMemberSet()
	tr := startRelay(t, Config{NoSync: true, Members: ms, MembersPoll: 20 * time.Millisecond})
	ms.Add(chA, "alice")
	waitfor.True(t, 10*time.Second, func() bool { return tr.isMember(chA, "alice") }, "alice is not a member after 10s of 20 ms polls")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, []byte("x"))
}

// TestRemovedMemberSubscriptionEnds: removing an account from a channel
// ends its live subscriptions there (with a not_a_member frame naming the
// channel) and refuses its publishes, while its socket stays open for its
// other channels.
func TestRemovedMemberSubscriptionEnds(t *testing.T) {
	forBackends(t, testRemovedMemberSubscriptionEnds)
}

func testRemovedMemberSubscriptionEnds(t *testing.T, be *testBackend) {
	ms := NewMemberSet()
	for _, ch := range []string{chA, chOther} {
		ms.Add(ch, "alice")
		ms.Add(ch, "bob")
	}
	tr := be.start(t, Config{NoSync: true, Members: ms, MembersPoll: 20 * time.Millisecond})
	alice := dialWS(t, tr.URL, "/ws")
	alice.auth(mint(t, "alice", ""))
	alice.subscribe(chA)
	alice.subscribe(chOther)
	bob := dialWS(t, tr.URL, "/ws/"+chA)
	bob.auth(mint(t, "bob", ""))
	bob.subscribe(chOther)
	bob2 := dialWS(t, tr.URL, "/ws")
	bob2.auth(mint(t, "bob", ""))
	bob2.subscribe(chA)
	bob.publishAck(chA, []byte("before"))
	alice.expect(map[string]any{"type": "message", "channel": chA})
	bob2.expect(map[string]any{"type": "message", "channel": chA})

	ms.Remove(chA, "bob")
	for _, c := range []*wsClient{bob, bob2} {
		if e := c.expectError("not_a_member"); e["channel"] != chA || !strings.Contains(e["message"].(string), chA) {
			t.Fatalf("removal frame does not name the channel: %v", e)
		}
	}
	alice.publishAck(chA, []byte("after"))
	bob.expectQuiet()
	bob2.expectQuiet()
	bob.publish(chA, []byte("still here?"))
	bob.expectError("not_a_member")
	bob2.send(map[string]string{"type": "subscribe", "channel": chA})
	bob2.expectError("not_a_member")
	bob2.send(map[string]string{"type": "unsubscribe", "channel": chA})
	bob2.expectError("not_subscribed")
	if code, body := httpGet(t, tr.URL+"/v1/sync?channel="+chA, mint(t, "bob", "")); code != 403 || body["error"] != "not_a_member" {
		t.Fatalf("removed member read: %d %v", code, body)
	}

	// The other channel is untouched, both ways.
	alice.publishAck(chOther, []byte("other"))
	bob.expect(map[string]any{"type": "message", "channel": chOther})
	bob.publishAck(chOther, []byte("reply"))
	alice.expect(map[string]any{"type": "message", "channel": chOther})

	// Admitted again, bob subscribes and publishes again.
	ms.Add(chA, "bob")
	bob2.subscribe(chA)
	back := bob2.publishAck(chA, []byte("back"))
	alice.expect(map[string]any{"type": "message", "channel": chA, "seq": back})
}

// TestOpenReads: with OpenReads every authenticated account may subscribe
// and read, but only members publish; a removed member keeps reading.
func TestOpenReads(t *testing.T) {
	ms := NewMemberSet()
	ms.Add(chA, "alice")
	ms.Add(chA, "bob")
	tr := startRelay(t, Config{NoSync: true, Members: ms, OpenReads: true, MembersPoll: 20 * time.Millisecond})
	alice := dialWS(t, tr.URL, "/ws/"+chA)
	alice.auth(mint(t, "alice", ""))
	reader := dialWS(t, tr.URL, "/ws")
	reader.auth(mint(t, "reader", ""))
	reader.subscribe(chA)
	bob := dialWS(t, tr.URL, "/ws/"+chA)
	bob.auth(mint(t, "bob", ""))

	alice.publishAck(chA, []byte("one"))
	reader.expect(map[string]any{"type": "message", "seq": 1})
	bob.expect(map[string]any{"type": "message", "seq": 1})
	reader.publish(chA, publicMessage([]byte("g"), 1<<64-2, 3))
	reader.expectError("not_a_member")
	if code, body := httpGet(t, tr.URL+"/v1/messages?channel="+chA, mint(t, "reader", "")); code != 200 || len(body["messages"].([]any)) != 1 {
		t.Fatalf("open read: %d %v", code, body)
	}

	ms.Remove(chA, "bob")
	waitfor.True(t, 10*time.Second, func() bool { return !tr.isMember(chA, "bob") }, "bob is still a member after 10s of polls")
	bob.publish(chA, []byte("x"))
	bob.expectError("not_a_member")
	alice.publishAck(chA, []byte("two"))
	bob.expect(map[string]any{"type": "message", "seq": 2})
}

// TestOpenChannels: gating off, every account publishes everywhere.
func TestOpenChannels(t *testing.T) {
	tr := startRelay(t, Config{NoSync: true, Members: NewMemberSet(), OpenChannels: true})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "anyone", ""))
	c.publishAck(chA, []byte("x"))
}

// TestScopedTokenMembership: a channel-scoped token (a seat's sk_chan_
// credential) works on its channel when its account is a member there,
// and is refused when not.
func TestScopedTokenMembership(t *testing.T) {
	ms := NewMemberSet()
	ms.Add(chA, "owner")
	tr := startRelay(t, Config{NoSync: true, Members: ms})
	seatTok := mint(t, "owner", chA)
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(seatTok)
	c.publishAck(chA, []byte("sealed batch"))
	if code, _ := httpGet(t, tr.URL+"/v1/sync?channel="+chA, seatTok); code != 200 {
		t.Fatalf("scoped member read: %d", code)
	}
	other := mint(t, "stranger", chA)
	d := dialWS(t, tr.URL, "/ws/"+chA)
	d.auth(other)
	d.expectError("not_a_member")
	if code, _ := httpGet(t, tr.URL+"/v1/sync?channel="+chA, other); code != 403 {
		t.Fatalf("scoped stranger read: %d", code)
	}
}

// TestMembersSurviveRestart: the members and the feed cursor are stored,
// so a restarted relay serves its members even while the directory is
// unreachable, and does not replay the feed.
func TestMembersSurviveRestart(t *testing.T) { forBackends(t, testMembersSurviveRestart) }

func testMembersSurviveRestart(t *testing.T, be *testBackend) {
	path := filepath.Join(t.TempDir(), "relay.db")
	dir := newFeedServer(t)
	dir.set.Add(chA, "alice")
	dir.set.Add(chA, "gone")
	dir.set.Remove(chA, "gone")
	src := NewHTTPMembers(dir.URL, "internal-secret", nil)
	tr := be.start(t, Config{DBPath: path, NoSync: true, Members: src})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, []byte("x"))
	c.c.CloseNow()
	tr.stop(t)

	dir.down.Store(true)
	tr = be.start(t, Config{DBPath: path, NoSync: true, Members: src})
	c = dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, []byte("y"))
	d := dialWS(t, tr.URL, "/ws/"+chA)
	d.auth(mint(t, "gone", ""))
	d.expectError("not_a_member")
	c.c.CloseNow()
	d.c.CloseNow()
	tr.stop(t)
	if dir.lastAfter.Load() < 3 {
		t.Fatalf("the restarted relay asked after %d, want its stored cursor 3", dir.lastAfter.Load())
	}
}

// TestMemberSetRestart: a MemberSet is the embedder's in-memory truth, so
// a relay restarted with a new set forgets members the old one had.
func TestMemberSetRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	ms := NewMemberSet()
	ms.Add(chA, "alice")
	tr := startRelay(t, Config{DBPath: path, NoSync: true, Members: ms})
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, []byte("x"))
	c.c.CloseNow()
	tr.stop(t)

	ms2 := NewMemberSet()
	ms2.Add(chA, "bob")
	tr = startRelay(t, Config{DBPath: path, NoSync: true, Members: ms2})
	c = dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.expectError("not_a_member")
	b := dialWS(t, tr.URL, "/ws/"+chA)
	b.auth(mint(t, "bob", ""))
	b.publishAck(chA, []byte("y"))
}

// TestFenceResetEvent: a fence_reset event from the source resets the
// channel's commit fence, so the owner recovers a channel a member jammed.
func TestFenceResetEvent(t *testing.T) { forBackends(t, testFenceResetEvent) }

func testFenceResetEvent(t *testing.T, be *testBackend) {
	ms := NewMemberSet()
	ms.Add(chA, "owner")
	ms.Add(chA, "jammer")
	tr := be.start(t, Config{NoSync: true, Members: ms, MembersPoll: 20 * time.Millisecond})
	gid := []byte("g")
	j := dialWS(t, tr.URL, "/ws/"+chA)
	j.auth(mint(t, "jammer", ""))
	j.publishAck(chA, publicMessage(gid, 1000, 3))
	o := dialWS(t, tr.URL, "/ws/"+chA)
	o.auth(mint(t, "owner", ""))
	// On JetStream the jammer's commit may still be pushed to the owner,
	// who subscribed after its ack: a client drops it by seq.
	answer := func() map[string]any {
		for {
			if m := o.recv(); m["type"] != "message" {
				return m
			}
		}
	}
	o.publish(chA, publicMessage(gid, 5, 3))
	if m := answer(); m["code"] != "stale_epoch" {
		t.Fatalf("commit before the reset: %v", m)
	}

	ms.Remove(chA, "jammer")
	ms.ResetFence(chA, 5)
	j.expectError("not_a_member")
	waitfor.True(t, 10*time.Second, func() bool { // the next poll brings the reset
		o.publish(chA, publicMessage(gid, 5, 3))
		m := answer()
		if m["type"] == "ok" {
			return true
		}
		if m["code"] != "stale_epoch" {
			t.Fatalf("commit after the reset: %v", m)
		}
		return false
	}, "the commit after the reset is still refused after 10s")
	o.publish(chA, publicMessage(gid, 5, 3))
	if m := o.expectError("stale_epoch"); m["epoch"].(float64) != 6 {
		t.Fatalf("after the owner's commit at 5 the fence expects %v", m["epoch"])
	}
}

// TestMissPollsAreBounded: a stranger's requests make the relay poll the
// source at most about ten times per poll interval, however many it sends.
func TestMissPollsAreBounded(t *testing.T) {
	var polls atomic.Int64
	src := countingSource{MemberSet: NewMemberSet(), n: &polls}
	const every = 200 * time.Millisecond
	tr := startRelay(t, Config{NoSync: true, Members: src, MembersPoll: every})
	c := dialWS(t, tr.URL, "/ws")
	c.auth(mint(t, "mallory", ""))
	start := time.Now()
	p0 := polls.Load()
	const n = 100
	for range n {
		c.publish(chA, []byte("x"))
	}
	for range n {
		c.expectError("not_a_member")
	}
	elapsed := time.Since(start)
	got := polls.Load() - p0
	limit := int64(elapsed/(every/10)) + int64(elapsed/every) + 5
	t.Logf("%d refused publishes in %v made %d polls (bound %d)", n, elapsed, got, limit)
	if got > limit {
		t.Fatalf("%d polls for %d misses in %v, more than %d", got, n, elapsed, limit)
	}
}

type countingSource struct {
	*MemberSet
	n *atomic.Int64
}

func (c countingSource) ChannelEventsSince(ctx context.Context, after int64) ([]ChannelEvent, int64, error) {
	c.n.Add(1)
	return c.MemberSet.ChannelEventsSince(ctx, after)
}

// feedServer is a directory's internal channel feed on loopback, served
// from a MemberSet.
type feedServer struct {
	*httptest.Server
	set       *MemberSet
	down      atomic.Bool
	lastAfter atomic.Int64
}

func newFeedServer(t *testing.T) *feedServer {
	f := &feedServer{set: NewMemberSet()}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/internal/channels/events" || r.Header.Get("Authorization") != "Bearer internal-secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if f.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		f.lastAfter.Store(after)
		evs, next, _ := f.set.ChannelEventsSince(r.Context(), after)
		if evs == nil {
			evs = []ChannelEvent{}
		}
		json.NewEncoder(w).Encode(feed.Page{Events: evs, Next: next})
	}))
	t.Cleanup(f.Close)
	return f
}

// TestHTTPMembers: the HTTP source reads the directory's feed with the
// internal secret, and a relay on it follows adds and removals.
func TestHTTPMembers(t *testing.T) {
	dir := newFeedServer(t)
	dir.set.Add(chA, "alice")
	evs, next, err := NewHTTPMembers(dir.URL+"/", "internal-secret", nil).ChannelEventsSince(context.Background(), 0)
	if err != nil || len(evs) != 1 || next != 1 || evs[0] != (ChannelEvent{ID: 1, Kind: EventMemberAdded, Channel: chA, Account: "alice"}) {
		t.Fatalf("feed: %v %d %v", evs, next, err)
	}
	if _, _, err := NewHTTPMembers(dir.URL, "wrong", nil).ChannelEventsSince(context.Background(), 0); err == nil {
		t.Fatal("wrong secret accepted")
	}

	tr := startRelay(t, Config{NoSync: true, Members: NewHTTPMembers(dir.URL, "internal-secret", nil), MembersPoll: 20 * time.Millisecond})
	a := dialWS(t, tr.URL, "/ws/"+chA)
	a.auth(mint(t, "alice", ""))
	dir.set.Add(chA, "bob")
	b := dialWS(t, tr.URL, "/ws/"+chA)
	b.auth(mint(t, "bob", ""))
	a.publishAck(chA, []byte("hi"))
	b.expect(map[string]any{"type": "message", "seq": 1})
	dir.set.Remove(chA, "bob")
	b.expectError("not_a_member")
	a.publishAck(chA, []byte("bye"))
	b.expectQuiet()
}

// TestNewNeedsMembers: a relay checks membership unless told not to, so it
// needs a source of it.
func TestNewNeedsMembers(t *testing.T) {
	if _, err := New(context.Background(), Config{JWTSecret: testSecret}); err == nil || !strings.Contains(err.Error(), "Members") {
		t.Fatalf("New without Members or OpenChannels: %v", err)
	}
	for _, cfg := range []Config{
		{JWTSecret: testSecret, OpenChannels: true},
		{JWTSecret: testSecret, Members: NewMemberSet()},
	} {
		s, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		s.Close(context.Background())
	}
}
