package relay

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/jsarchive"
)

// startCluster starts n relays on one JetStream stream of nats, each
// behind its own httptest server: the nodes of one cluster.
func startCluster(t testing.TB, nats *natsServer, n int, cfg Config) []*testRelay {
	t.Helper()
	jc, _ := jsConfig(cfg)
	cfg = withJS(cfg, nats.URL, cmp.Or(jc.Stream, "CLUSTER"), jc.Replicas)
	nodes := make([]*testRelay, n)
	t.Cleanup(func() { checkNoRelayGoroutines(t) }) // runs after every node stopped
	for i := range nodes {
		nodes[i] = startRelay(t, cfg)
		nodes[i].inCluster = true
	}
	return nodes
}

// kill ends a node abruptly: its sockets are cut without a close
// handshake and its HTTP server is gone, as when the process dies.
func (tr *testRelay) kill(t testing.TB) {
	t.Helper()
	tr.hs.CloseClientConnections()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tr.Close(ctx)
	tr.hs.Close()
	tr.hs = nil
}

// pushFrame is a push as a client reads it.
type pushFrame struct {
	Type      string `json:"type"`
	Channel   string `json:"channel"`
	Payload   string `json:"payload"`
	Seq       uint64 `json:"seq"`
	EntryType int    `json:"entry_type"`
	Code      string `json:"code"`
	Message   string `json:"message"`
}

// TestClusterFanOut: publishers on node A, subscribers on nodes B and C
// (and one on A): every subscriber sees every message exactly once, in
// strictly increasing seq, with the seq its publisher was acknowledged;
// a publisher gets none of its own messages back.
func TestClusterFanOut(t *testing.T) {
	n := startNATS(t)
	nodes := startCluster(t, n, 3, Config{OpenChannels: true})
	const ch = "acme/cluster/fanout"
	var subs []*wsClient
	for i, node := range []*testRelay{nodes[1], nodes[1], nodes[2], nodes[2], nodes[0]} {
		c := dialWS(t, node.URL, "/ws/"+ch)
		c.auth(mint(t, fmt.Sprint("sub-", i), ""))
		subs = append(subs, c)
	}
	const pubs, each = 3, 40
	acked := make(map[uint64]string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	clients := make([]*wsClient, pubs)
	for p := range pubs {
		clients[p] = dialWS(t, nodes[0].URL, "/ws/"+ch)
		clients[p].auth(mint(t, fmt.Sprint("pub-", p), ""))
	}
	for p := range pubs {
		wg.Go(func() {
			for i := range each {
				payload := fmt.Sprintf("p%d-%d", p, i)
				clients[p].publish(ch, []byte(payload))
				var m map[string]any
				for {
					var err error
					m, err = clients[p].tryRecv(10 * time.Second)
					if err != nil {
						t.Errorf("publisher %d: %v", p, err)
						return
					}
					if m["type"] != "message" {
						break
					}
					// The publishers are subscribers too: they get each
					// other's messages, never their own.
					if b, _ := base64.StdEncoding.DecodeString(m["payload"].(string)); strings.HasPrefix(string(b), fmt.Sprintf("p%d-", p)) {
						t.Errorf("publisher %d got its own %q back", p, b)
					}
				}
				if m["message"] != "published" {
					t.Errorf("publisher %d: %v", p, m)
					return
				}
				mu.Lock()
				acked[uint64(m["seq"].(float64))] = payload
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(acked) != pubs*each {
		t.Fatalf("%d distinct acked seqs, want %d", len(acked), pubs*each)
	}
	for i, c := range subs {
		var last uint64
		for range pubs * each {
			m := c.expect(map[string]any{"type": "message", "channel": ch})
			seq := uint64(m["seq"].(float64))
			if seq <= last {
				t.Fatalf("subscriber %d: seq %d after %d", i, seq, last)
			}
			last = seq
			p, _ := base64.StdEncoding.DecodeString(m["payload"].(string))
			if acked[seq] != string(p) {
				t.Fatalf("subscriber %d: seq %d carries %q, acked for %q", i, seq, p, acked[seq])
			}
		}
		c.expectQuiet()
	}
	for p, c := range clients {
		// What is left are the others' messages after its last ack,
		// never one of its own, from any node.
		for {
			c.send(map[string]string{"type": "probe"})
			m := c.recv()
			if m["type"] != "message" {
				break
			}
			if b, _ := base64.StdEncoding.DecodeString(m["payload"].(string)); strings.HasPrefix(string(b), fmt.Sprintf("p%d-", p)) {
				t.Fatalf("publisher %d got its own %q back", p, b)
			}
		}
	}
}

// TestClusterCommitRace: two nodes take a commit for the same epoch at
// the same moment, round after round. Exactly one is accepted each time;
// the other gets stale_epoch naming the next epoch, and the archive holds
// one commit per epoch. Without the compare-and-set on the handshake
// subject, both nodes would accept (each checks its own view).
func TestClusterCommitRace(t *testing.T) {
	n := startNATS(t)
	nodes := startCluster(t, n, 2, Config{OpenChannels: true})
	const ch = "acme/cluster/race"
	gid := []byte("race-group")
	a := dialWS(t, nodes[0].URL, "/ws/"+ch)
	a.auth(mint(t, "alice", ""))
	b := dialWS(t, nodes[1].URL, "/ws/"+ch)
	b.auth(mint(t, "bob", ""))
	rounds := 40
	if testing.Short() {
		rounds = 15
	}
	drainPush := func(c *wsClient) map[string]any {
		for {
			m := c.recv()
			if m["type"] != "message" {
				return m
			}
		}
	}
	for e := range uint64(rounds) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		res := make([]map[string]any, 2)
		for _, c := range []*wsClient{a, b} {
			wg.Go(func() {
				<-start
				c.publish(ch, publicMessage(gid, e, 3))
			})
		}
		close(start)
		wg.Wait()
		res[0], res[1] = drainPush(a), drainPush(b)
		won := 0
		for i, m := range res {
			switch {
			case m["message"] == "published":
				won++
			case m["code"] == "stale_epoch":
				if uint64(m["epoch"].(float64)) != e+1 {
					t.Fatalf("round %d: node %d says stale, expecting %v", e, i, m["epoch"])
				}
			default:
				t.Fatalf("round %d: node %d answered %v", e, i, m)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d commits accepted for one epoch", e, won)
		}
	}
	_, m := httpGet(t, nodes[1].URL+"/v1/sync?channel="+ch+"&limit=500", mint(t, "bob", ""))
	if got := len(m["entries"].([]any)); got != rounds {
		t.Fatalf("%d commits archived, want %d (one per epoch)", got, rounds)
	}
}

// TestClusterFenceResetOnce: every node follows the directory's feed, so
// each applies an owner's fence reset; the reset carries the feed event's
// id and takes effect once. A node applying it late, after the group
// committed at the reset epoch, must not open that epoch again.
func TestClusterFenceResetOnce(t *testing.T) {
	n := startNATS(t)
	nodes := startCluster(t, n, 2, Config{OpenChannels: true})
	const ch = "acme/cluster/reset"
	gid := []byte("g")
	a := dialWS(t, nodes[0].URL, "/ws/"+ch)
	a.auth(mint(t, "alice", ""))
	b := dialWS(t, nodes[1].URL, "/ws/"+ch)
	b.auth(mint(t, "bob", ""))
	a.publishAck(ch, publicMessage(gid, 1000, 3)) // a jammer far ahead
	if err := nodes[0].arch.ResetFence(ch, 5, 7); err != nil {
		t.Fatal(err)
	}
	b.expect(map[string]any{"type": "message", "entry_type": 1})
	a.publishAck(ch, publicMessage(gid, 5, 3))
	b.expect(map[string]any{"type": "message", "entry_type": 1})
	if err := nodes[1].arch.ResetFence(ch, 5, 7); err != nil { // the same event, late
		t.Fatal(err)
	}
	b.publish(ch, publicMessage(gid, 5, 3))
	if m := b.expectError("stale_epoch"); m["epoch"].(float64) != 6 {
		t.Fatalf("after the late reset: stale_epoch %v, want 6", m["epoch"])
	}
	// A later event does apply.
	if err := nodes[1].arch.ResetFence(ch, 2, 8); err != nil {
		t.Fatal(err)
	}
	b.publishAck(ch, publicMessage(gid, 2, 3))
}

// TestClusterMembersAndRevocation: membership and revocations reach every
// node through its own poll of the directory's feeds: a removed member's
// subscription ends on the node it is on, and a revoked account is
// refused and disconnected everywhere.
func TestClusterMembersAndRevocation(t *testing.T) {
	n := startNATS(t)
	ms := NewMemberSet()
	rev := &fakeRevocations{}
	const ch = "acme/cluster/members"
	ms.Add(ch, "alice")
	ms.Add(ch, "bob")
	ms.Add(ch, "mallory")
	nodes := startCluster(t, n, 3, Config{Members: ms, MembersPoll: 20 * time.Millisecond,
		Revocations: rev, RevocationPoll: 20 * time.Millisecond})
	alice := dialWS(t, nodes[0].URL, "/ws/"+ch)
	alice.auth(mint(t, "alice", ""))
	bob := dialWS(t, nodes[1].URL, "/ws/"+ch)
	bob.auth(mint(t, "bob", ""))
	mal := dialWS(t, nodes[2].URL, "/ws/"+ch)
	mal.auth(mint(t, "mallory", ""))
	alice.publishAck(ch, []byte("hello"))
	bob.expect(map[string]any{"type": "message"})
	mal.expect(map[string]any{"type": "message"})

	// Each node learns within its own poll.
	refusedEverywhere := func(sub string) {
		t.Helper()
		for _, node := range nodes {
			waitfor.Nil(t, 10*time.Second, func() error {
				if code, _ := httpGet(t, node.URL+"/v1/sync?channel="+ch, mint(t, sub, "")); code != http.StatusForbidden {
					return fmt.Errorf("%s still served by a node: %d", sub, code)
				}
				return nil
			})
		}
	}
	ms.Remove(ch, "bob")
	bob.expectError("not_a_member")
	refusedEverywhere("bob")
	rev.revoke("mallory")
	mal.expectError("forbidden")
	mal.expectClose(websocket.StatusPolicyViolation)
	refusedEverywhere("mallory")
	alice.publishAck(ch, []byte("after"))
	bob.expectQuiet()
}

// TestClusterNATSRestart: the nats-server stops and starts again on its
// file store; every acknowledged entry is still there, the relays
// reconnect on their own, publishes go on above the old seqs, and live
// delivery across nodes resumes.
func TestClusterNATSRestart(t *testing.T) {
	n := startNATS(t)
	nodes := startCluster(t, n, 2, Config{OpenChannels: true})
	const ch = "acme/cluster/restart"
	gid := []byte("g")
	tok := mint(t, "alice", "")
	a := dialWS(t, nodes[0].URL, "/ws/"+ch)
	a.auth(tok)
	acked := map[uint64]string{}
	var last uint64
	for i := range 30 {
		p := fmt.Sprint("before ", i)
		last = a.publishAck(ch, []byte(p))
		acked[last] = p
	}
	a.publishAck(ch, publicMessage(gid, 3, 3)) // the fence: 4 next

	n.restart()

	// Publishes during the reconnect may fail; one goes through soon.
	waitfor.Nil(t, 20*time.Second, func() error {
		a.publish(ch, []byte("after"))
		m := a.recv()
		if m["message"] != "published" {
			return fmt.Errorf("no publish accepted after the restart: %v", m)
		}
		if seq := uint64(m["seq"].(float64)); seq <= last {
			t.Fatalf("seq %d after the restart, not above %d", seq, last)
		}
		return nil
	})
	for _, node := range nodes {
		_, m := httpGet(t, node.URL+"/v1/messages?channel="+ch+"&limit=500", tok)
		got := map[uint64]string{}
		for _, e := range m["messages"].([]any) {
			e := e.(map[string]any)
			p, _ := base64.StdEncoding.DecodeString(e["payload"].(string))
			got[uint64(e["seq"].(float64))] = string(p)
		}
		for seq, p := range acked {
			if got[seq] != p {
				t.Fatalf("acked seq %d: %q after the restart, want %q", seq, got[seq], p)
			}
		}
	}
	a.publish(ch, publicMessage(gid, 3, 3))
	a.expectError("stale_epoch")
	// Live delivery from the other node works again.
	b := dialWS(t, nodes[1].URL, "/ws/"+ch)
	b.auth(mint(t, "bob", ""))
	waitfor.True(t, 20*time.Second, func() bool {
		b.publish(ch, []byte("from b"))
		return b.recv()["message"] == "published"
	}, "node B accepts no publish after the restart")
	for {
		m := a.recv()
		if m["type"] == "message" && m["payload"] == base64.StdEncoding.EncodeToString([]byte("from b")) {
			break
		}
	}
}

// follower is a subscriber as a client runs one: on a dropped socket it
// moves to the next node, subscribes, catches up through /v1/sync from
// the last seq it has, and drops pushes it already has by seq.
type follower struct {
	t    *testing.T
	urls []string
	ch   string
	tok  string

	mu   sync.Mutex
	seen map[uint64]string
	last uint64
	errs []string
}

func (f *follower) add(seq uint64, payload string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.seen[seq]; ok {
		if p != payload {
			f.errs = append(f.errs, fmt.Sprintf("seq %d carried %q and %q", seq, p, payload))
		}
		return
	}
	f.seen[seq] = payload
	f.last = max(f.last, seq)
}

func (f *follower) catchUp(base string) error {
	for {
		f.mu.Lock()
		since := f.last
		f.mu.Unlock()
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/sync?channel=%s&since_seq=%d&limit=500", base, f.ch, since), nil)
		req.Header.Set("Authorization", "Bearer "+f.tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var page struct {
			Entries []struct {
				Seq     uint64 `json:"seq"`
				Payload string `json:"payload"`
			} `json:"entries"`
			HasMore bool `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("sync: %d", resp.StatusCode)
		}
		for _, e := range page.Entries {
			p, _ := base64.StdEncoding.DecodeString(e.Payload)
			f.add(e.Seq, string(p))
		}
		if !page.HasMore {
			return nil
		}
	}
}

// run follows the channel until stop, starting on node first.
func (f *follower) run(stop <-chan struct{}, first int) {
	for i := first; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		// A node that is gone refuses the connection at once.
		f.session(f.urls[i%len(f.urls)], stop)
	}
}

func (f *follower) session(base string, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/"+f.ch, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 20)
	auth, _ := json.Marshal(map[string]string{"type": "auth", "token": f.tok})
	if c.Write(ctx, websocket.MessageText, auth) != nil {
		return
	}
	var lastPush uint64
	for caughtUp := false; ; {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m pushFrame
		json.Unmarshal(b, &m)
		switch m.Type {
		case "ok":
			if !caughtUp { // subscribed: now catch up
				if f.catchUp(base) != nil {
					return
				}
				caughtUp = true
			}
		case "message":
			if m.Seq <= lastPush {
				f.mu.Lock()
				f.errs = append(f.errs, fmt.Sprintf("push seq %d after %d on one socket", m.Seq, lastPush))
				f.mu.Unlock()
			}
			lastPush = m.Seq
			p, _ := base64.StdEncoding.DecodeString(m.Payload)
			f.add(m.Seq, string(p))
		}
	}
}

// TestClusterNodeKill: publishers on every node and followers spread over
// the nodes; one node is killed mid-stream. Its followers move to another
// node and catch up; at the end every follower has every acknowledged
// message (from publishers on any node, the dead one's included) under
// the seq it was acknowledged with, and no seq twice.
func TestClusterNodeKill(t *testing.T) {
	n := startNATS(t)
	nodes := startCluster(t, n, 3, Config{OpenChannels: true})
	const ch = "acme/cluster/kill"
	tok := mint(t, "reader", "")

	var fs []*follower
	stopF := make(chan struct{})
	var fwg sync.WaitGroup
	for i := range 6 {
		f := &follower{t: t, urls: []string{nodes[0].URL, nodes[1].URL, nodes[2].URL}, ch: ch, tok: tok, seen: map[uint64]string{}}
		fs = append(fs, f)
		fwg.Go(func() { f.run(stopF, i) })
	}

	var amu sync.Mutex
	acked := map[uint64]string{}
	stopP := make(chan struct{})
	var pwg sync.WaitGroup
	for p := range 3 {
		pwg.Go(func() {
			ctx := context.Background()
			c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(nodes[p].URL, "http")+"/ws/"+ch, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.CloseNow()
			auth, _ := json.Marshal(map[string]string{"type": "auth", "token": mint(t, fmt.Sprint("pub-", p), "")})
			c.Write(ctx, websocket.MessageText, auth)
			c.Read(ctx) // authenticated
			for i := 0; ; i++ {
				select {
				case <-stopP:
					return
				default:
				}
				payload := fmt.Sprintf("node%d-%d", p, i)
				frame, _ := json.Marshal(map[string]string{"type": "publish", "channel": ch, "payload": base64.StdEncoding.EncodeToString([]byte(payload))})
				if c.Write(ctx, websocket.MessageText, frame) != nil {
					return // its node is gone; what it was never told is not promised
				}
				var m pushFrame
				for m.Type = "message"; m.Type == "message"; { // others' pushes come in between
					_, b, err := c.Read(ctx)
					if err != nil {
						return
					}
					m = pushFrame{}
					json.Unmarshal(b, &m)
				}
				if m.Message == "published" {
					amu.Lock()
					acked[m.Seq] = payload
					amu.Unlock()
				}
			}
		})
	}
	count := func() int { amu.Lock(); defer amu.Unlock(); return len(acked) }
	waitFor := func(k int) {
		waitfor.Nil(t, 30*time.Second, func() error {
			if n := count(); n < k {
				return fmt.Errorf("only %d publishes acknowledged", n)
			}
			return nil
		})
	}
	waitFor(150)
	nodes[1].kill(t)
	base := count()
	waitFor(base + 150)
	close(stopP)
	pwg.Wait()

	// Every follower ends with a last catch-up on a live node, as a
	// client that was away does.
	close(stopF)
	fwg.Wait()
	for i, f := range fs {
		if err := f.catchUp(nodes[(i%2)*2].URL); err != nil {
			t.Fatal(err)
		}
		if len(f.errs) > 0 {
			t.Fatalf("follower %d: %v", i, f.errs)
		}
		for seq, p := range acked {
			if f.seen[seq] != p {
				t.Fatalf("follower %d: acked seq %d has %q, want %q", i, seq, f.seen[seq], p)
			}
		}
	}
	t.Logf("%d publishes acknowledged, %d of them after the kill", len(acked), len(acked)-base)
}

// TestJetStreamFenceOutlivesMaxAge: JetStream's own MaxAge removes
// application entries past the TTL, but the handshake message holding the
// fence stays (Nats-TTL: never), so a replayed commit is still refused
// after everything else expired. Without that header MaxAge would take the
// fence with the entries and the replay would be accepted.
func TestJetStreamFenceOutlivesMaxAge(t *testing.T) {
	n := startNATS(t)
	tr := startRelay(t, withJS(Config{OpenChannels: true, ArchiveTTL: time.Second}, n.URL, "", 0))
	gid := []byte("g")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(mint(t, "alice", ""))
	c.publishAck(chA, publicMessage(gid, 0, 3))
	c.publishAck(chA, []byte("chat"))
	waitfor.True(t, 30*time.Second, func() bool { n, _ := storedMsgs(t, tr, chA, false); return n == 0 },
		"MaxAge never removed the application entry")
	c.publish(chA, publicMessage(gid, 0, 3))
	if m := c.expectError("stale_epoch"); m["epoch"].(float64) != 1 {
		t.Fatalf("after MaxAge: stale_epoch %v, want 1", m["epoch"])
	}
	// A relay that starts now learns the fence from the stream too.
	tr2 := startRelay(t, withJS(Config{OpenChannels: true, ArchiveTTL: time.Second}, n.URL, "", 0))
	tr2.inCluster = true // tr, stopped after it, checks for goroutines
	d := dialWS(t, tr2.URL, "/ws/"+chA)
	d.auth(mint(t, "bob", ""))
	d.publish(chA, publicMessage(gid, 0, 3))
	d.expectError("stale_epoch")
}

// TestClusterQuota: an account's quota is the cluster's: bytes stored
// through one node count on every node (each mirrors the stream), a node
// started later counts them from the stream, and eviction by the cap gives
// them back everywhere.
func TestClusterQuota(t *testing.T) {
	n := startNATS(t)
	cfg := Config{OpenChannels: true, AccountQuota: 1000, ArchiveCap: 3}
	nodes := startCluster(t, n, 2, cfg)
	const ch = "acme/cluster/quota"
	p := func(tag byte) []byte { return []byte(strings.Repeat(string(tag), 300)) }
	a := dialWS(t, nodes[0].URL, "/ws/"+ch)
	a.auth(mint(t, "alice", ""))
	b := dialWS(t, nodes[1].URL, "/ws/"+ch)
	b.auth(mint(t, "alice", ""))
	a.publishAck(ch, p('a'))
	a.publishAck(ch, p('b'))
	a.publishAck(ch, p('c'))
	for range 3 {
		b.expect(map[string]any{"type": "message"}) // node B has mirrored them
	}
	b.publish(ch, p('x'))
	b.expectError("quota_exceeded")
	late := startRelay(t, withJS(cfg, n.URL, "CLUSTER", 0))
	late.inCluster = true
	for _, node := range append(nodes, late) {
		if got := node.arch.Used("alice"); got != 900 {
			t.Fatalf("a node counts %d bytes for alice, want 900", got)
		}
	}
	// Bob's entries push alice's out of the cap of 3; every node gives
	// her bytes back, and charges her, the channel's payer, for his (no
	// entry says bob sent it).
	c := dialWS(t, nodes[1].URL, "/ws/"+ch)
	c.auth(mint(t, "bob", ""))
	for i := range 3 {
		c.publishAck(ch, []byte(fmt.Sprint("bob ", i)))
		a.expect(map[string]any{"type": "message"})
		b.expect(map[string]any{"type": "message"})
	}
	for _, node := range append(nodes, late) {
		waitfor.Nil(t, 10*time.Second, func() error {
			if node.arch.Used("alice") != int64(3*len("bob 0")) || node.arch.Used("bob") != 0 {
				return fmt.Errorf("a node still counts %d bytes for alice", node.arch.Used("alice"))
			}
			return nil
		})
	}
	b.publishAck(ch, p('y'))
}

// TestJetStreamSubjects: channel names map to subject tokens that NATS
// treats as one token and that never collide: names that differ only in
// where a dot or slash sits stay apart.
func TestJetStreamSubjects(t *testing.T) {
	n := startNATS(t)
	tr := startRelay(t, withJS(Config{OpenChannels: true}, n.URL, "", 0))
	names := []string{"a.b/c/d", "a/b.c/d", "a/b/c.d", "a-b/c_d/e.f", "x/y/" + strings.Repeat("z", 250)}
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws")
	c.auth(tok)
	for _, name := range names {
		c.subscribe(name)
		c.publishAck(name, []byte("on "+name))
	}
	for _, name := range names {
		_, m := httpGet(t, tr.URL+"/v1/sync?channel="+name, tok)
		es := m["entries"].([]any)
		if len(es) != 1 || es[0].(map[string]any)["payload"] != base64.StdEncoding.EncodeToString([]byte("on "+name)) {
			t.Fatalf("%s holds %v", name, es)
		}
	}
}

// TestJetStreamConfigRefused: a bad stream name, a replica count out of
// range, or a NATS whose max_payload cannot carry a 1 MiB payload: New
// refuses with a clear error, and nothing is left running.
func TestJetStreamConfigRefused(t *testing.T) {
	n := startNATS(t)
	for _, jc := range []jsarchive.Config{
		{Stream: "has.dot"},
		{Stream: "has space"},
		{Replicas: 7},
		{Replicas: -1},
	} {
		cfg := withJS(Config{JWTSecret: testSecret, OpenChannels: true}, n.URL, jc.Stream, jc.Replicas)
		if s, err := New(context.Background(), cfg); err == nil {
			s.Close(context.Background())
			t.Fatalf("%+v accepted", cfg)
		}
	}
	small := &natsServer{t: t, dir: t.TempDir(), port: -1, maxPayload: 1 << 20}
	small.start()
	t.Cleanup(small.shutdown)
	_, err := New(context.Background(), withJS(Config{JWTSecret: testSecret, OpenChannels: true}, small.URL, "", 0))
	if err == nil || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("NATS with max_payload 1 MB: %v", err)
	}
	if _, err := New(context.Background(), withJS(Config{JWTSecret: testSecret, OpenChannels: true}, "nats://127.0.0.1:1", "", 0)); err == nil {
		t.Fatal("unreachable NATS accepted")
	}
	checkNoRelayGoroutines(t)
}

// TestNATSChild is the nats-server TestNATSKillDurability kills. It only
// runs when started by it.
func TestNATSChild(t *testing.T) {
	dir := os.Getenv("RELAY_NATS_CHILD_DIR")
	if dir == "" {
		t.Skip("run by TestNATSKillDurability")
	}
	port, _ := strconv.Atoi(os.Getenv("RELAY_NATS_CHILD_PORT"))
	n := &natsServer{t: t, dir: dir, port: port, name: os.Getenv("RELAY_NATS_CHILD_NAME"), routes: os.Getenv("RELAY_NATS_CHILD_ROUTES")}
	n.clusterPort, _ = strconv.Atoi(os.Getenv("RELAY_NATS_CHILD_CLUSTER_PORT"))
	n.start()
	fmt.Printf("listening %d\n", n.port)
	select {} // until killed
}

// startNATSChild runs a nats-server in a child process on dir (port 0:
// any) and returns it and its port.
func startNATSChild(t *testing.T, dir string, port int) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNATSChild$")
	cmd.Env = append(os.Environ(), "RELAY_NATS_CHILD_DIR="+dir, "RELAY_NATS_CHILD_PORT="+strconv.Itoa(cmp.Or(port, -1)))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		t.Fatalf("nats child: %q %v", line, err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "listening ")))
	return cmd, p
}

// TestNATSKillDurability: the nats-server (JetStream on file storage,
// syncing every write) is killed with SIGKILL while a relay has many
// publishes in flight, and started again on its store. Every publish the
// relay acknowledged is there under its seq, commits included, and the
// next seq is above everything a subscriber saw.
func TestNATSKillDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd, port := startNATSChild(t, dir, 0)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	tr := startRelay(t, withJS(Config{OpenChannels: true}, url, "", 0))
	pub := dialWS(t, tr.URL, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))
	sub := dialWS(t, tr.URL, "/ws/"+chA)
	sub.auth(mint(t, "sub", ""))
	var mu sync.Mutex
	var maxSeen uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			m, err := sub.tryRecv(time.Minute)
			if err != nil {
				return
			}
			if s, ok := m["seq"].(float64); ok {
				mu.Lock()
				maxSeen = max(maxSeen, uint64(s))
				mu.Unlock()
			}
		}
	})
	gid := []byte("g")
	payload := func(i int) []byte {
		if i%25 == 0 {
			return publicMessage(gid, uint64(i/25), 3) // a commit every 25th
		}
		return []byte(fmt.Sprintf("message %d", i))
	}
	acked := map[uint64][]byte{}
	var pending []int
	next := 0
	for len(acked) < 400 {
		for len(pending) < 64 {
			pub.publish(chA, payload(next))
			pending = append(pending, next)
			next++
		}
		m := pub.expect(map[string]any{"type": "ok", "message": "published"})
		acked[uint64(m["seq"].(float64))] = payload(pending[0])
		pending = pending[1:]
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	startNATSChild(t, dir, port)
	pub.c.CloseNow()
	sub.c.CloseNow()
	wg.Wait()

	tok := mint(t, "reader", "")
	var got map[uint64]syncEntry
	waitfor.Nil(t, 30*time.Second, func() error { // the relay reconnects on its own
		if code, _ := httpGet(t, tr.URL+"/v1/sync?channel="+chA+"&limit=1", tok); code != 200 {
			return fmt.Errorf("reads still fail after the restart: %d", code)
		}
		return nil
	})
	got = readChannel(t, tr.URL, chA, tok)
	for seq, p := range acked {
		if !bytes.Equal(got[seq].payload, p) {
			t.Fatalf("acknowledged seq %d: archive has %q, want %q", seq, got[seq].payload, p)
		}
	}
	for s := range got {
		maxSeen = max(maxSeen, s)
	}
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	waitfor.Nil(t, 30*time.Second, func() error {
		// Answers leave in order: this one waits until the publishes
		// lost in flight have timed out.
		c.publish(chA, []byte("after the crash"))
		m, err := c.tryRecv(30 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m["message"] != "published" {
			return fmt.Errorf("no publish accepted after the restart: %v", m)
		}
		if seq := uint64(m["seq"].(float64)); seq <= maxSeen {
			t.Fatalf("seq %d after the crash reuses a number already seen (max %d)", seq, maxSeen)
		}
		return nil
	})
	t.Logf("%d acked, %d archived after the kill", len(acked), len(got))
}
