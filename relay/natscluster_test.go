package relay

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/relay/jsarchive"
)

var clusterCycles = flag.Int("cluster.cycles", 0, "fault cycles of TestNATSClusterFaults (default 4, or 3 with -short)")

// natsCluster is three nats-server processes joined by routes, with
// JetStream: kill -9 and SIGSTOP reach a real process. Each server is
// the test binary run as TestNATSChild, on its own store and ports.
type natsCluster struct {
	t       *testing.T
	names   []string
	dirs    []string
	ports   []int // client ports
	cports  []int // route ports
	cmds    []*exec.Cmd
	stopped []bool
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func startNATSCluster(t *testing.T) *natsCluster {
	t.Helper()
	ports := freePorts(t, 6)
	c := &natsCluster{t: t, ports: ports[:3], cports: ports[3:], cmds: make([]*exec.Cmd, 3), stopped: make([]bool, 3)}
	for i := range 3 {
		c.names = append(c.names, fmt.Sprint("n", i))
		c.dirs = append(c.dirs, t.TempDir())
	}
	t.Cleanup(func() {
		for i := range c.cmds {
			c.kill(i)
		}
	})
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { c.start(i) })
	}
	wg.Wait()
	return c
}

// URL lists every server, first server i, so a client that loses its
// server reconnects to another.
func (c *natsCluster) URL(i int) string {
	var us []string
	for k := range 3 {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", c.ports[(i+k)%3]))
	}
	return strings.Join(us, ",")
}

func (c *natsCluster) start(i int) {
	var routes []string
	for k, p := range c.cports {
		if k != i {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNATSChild$")
	cmd.Env = append(os.Environ(),
		"RELAY_NATS_CHILD_DIR="+c.dirs[i],
		"RELAY_NATS_CHILD_PORT="+strconv.Itoa(c.ports[i]),
		"RELAY_NATS_CHILD_NAME="+c.names[i],
		"RELAY_NATS_CHILD_CLUSTER_PORT="+strconv.Itoa(c.cports[i]),
		"RELAY_NATS_CHILD_ROUTES="+strings.Join(routes, ","))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Error(err)
		return
	}
	if err := cmd.Start(); err != nil {
		c.t.Error(err)
		return
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		c.t.Errorf("nats server %d: %q %v", i, line, err)
	}
	c.cmds[i], c.stopped[i] = cmd, false
}

// kill ends server i with SIGKILL (after SIGCONT, if it was stopped).
func (c *natsCluster) kill(i int) {
	if cmd := c.cmds[i]; cmd != nil {
		cmd.Process.Kill()
		cmd.Wait()
		c.cmds[i] = nil
	}
}

func (c *natsCluster) pause(i int)  { c.cmds[i].Process.Signal(syscall.SIGSTOP) }
func (c *natsCluster) resume(i int) { c.cmds[i].Process.Signal(syscall.SIGCONT) }

// streamInfo asks any live server about the stream.
func (c *natsCluster) streamInfo(stream string) (*jetstream.StreamInfo, error) {
	return c.streamInfoAt(0, stream)
}

// streamInfoAt asks server i about the stream.
func (c *natsCluster) streamInfoAt(i int, stream string) (*jetstream.StreamInfo, error) {
	nc, err := nats.Connect(c.URL(i), nats.Timeout(time.Second))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// healthy waits until the stream has a leader and both followers are
// current, and returns the index of the leader.
func (c *natsCluster) healthy(stream string) int {
	c.t.Helper()
	leader := -1
	waitfor.Nil(c.t, 60*time.Second, func() error {
		info, err := c.streamInfo(stream)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && len(info.Cluster.Replicas) == 2 {
			ok := true
			for _, r := range info.Cluster.Replicas {
				ok = ok && r.Current && !r.Offline
			}
			if ok {
				for i, n := range c.names {
					if n == info.Cluster.Leader {
						leader = i
						return nil
					}
				}
			}
		}
		return fmt.Errorf("stream %s never became healthy: %v %+v", stream, err, info)
	})
	return leader
}

// electionWatch measures NATS's own failover, apart from the relays': on
// a connection to a server other than the leader about to be lost, it
// waits for JetStream's advisory that the stream elected a new leader,
// and sends the time it took from the fault (the time fault returns), or
// -1 if none came within 20 s.
func (c *natsCluster) electionWatch(stream string, lost int, fault func()) <-chan time.Duration {
	c.t.Helper()
	done := make(chan time.Duration, 1)
	nc, err := nats.Connect(c.URL((lost+1)%3), nats.Timeout(time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	sub, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream)
	if err == nil {
		err = nc.Flush()
	}
	if err != nil {
		c.t.Fatal(err)
	}
	at := time.Now()
	fault()
	go func() {
		defer nc.Close()
		if _, err := sub.NextMsg(20 * time.Second); err != nil {
			done <- -1
			return
		}
		done <- time.Since(at)
	}()
	return done
}

// ledger is what publishers were told: every acknowledged seq and its
// payload.
type ledger struct {
	mu    sync.Mutex
	acked map[uint64]string
	errs  map[string]int // error codes answered
	times []time.Time    // when each acknowledgement came, in order
}

// firstAckAfter returns when the first acknowledgement after t came, or
// the zero time if none has yet.
func (l *ledger) firstAckAfter(t time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.times), func(i int) bool { return l.times[i].After(t) })
	if i == len(l.times) {
		return time.Time{}
	}
	return l.times[i]
}

func (l *ledger) count() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.acked) }

// waitFor waits until k publishes have been acknowledged, and reports how
// long that took.
func (l *ledger) waitFor(t *testing.T, k int, what string) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	for l.count() < k {
		if time.Now().After(deadline) {
			t.Fatalf("%s: only %d of %d publishes acknowledged", what, l.count(), k)
		}
		// A short fixed poll, not waitfor's growing one: the wait's
		// length is a figure the test logs (how long a failover took).
		time.Sleep(2 * time.Millisecond)
	}
	return time.Since(start)
}

// pipelinePublisher publishes unique payloads to ch on base, keeping up
// to window publishes in flight, until stop or until its socket dies;
// answers come in order, so each one is the answer to the oldest publish
// in flight.
func pipelinePublisher(l *ledger, base, ch, tok, prefix string, window int, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/"+ch, nil)
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(4 << 20)
	auth, _ := json.Marshal(map[string]string{"type": "auth", "token": tok})
	if c.Write(ctx, websocket.MessageText, auth) != nil {
		return
	}
	if _, _, err := c.Read(ctx); err != nil {
		return
	}
	var pending []string
	next := 0
	for {
		for len(pending) < window {
			p := fmt.Sprintf("%s-%d", prefix, next)
			next++
			frame, _ := json.Marshal(map[string]string{"type": "publish", "channel": ch, "payload": base64.StdEncoding.EncodeToString([]byte(p))})
			if c.Write(ctx, websocket.MessageText, frame) != nil {
				return
			}
			pending = append(pending, p)
		}
		var m pushFrame
		for m.Type = "message"; m.Type == "message"; {
			_, b, err := c.Read(ctx)
			if err != nil {
				return // what it was never told is not promised
			}
			m = pushFrame{}
			json.Unmarshal(b, &m)
		}
		p := pending[0]
		pending = pending[1:]
		l.mu.Lock()
		if m.Message == "published" {
			l.acked[m.Seq] = p
			l.times = append(l.times, time.Now())
		} else {
			l.errs[m.Code]++
		}
		l.mu.Unlock()
	}
}

// readStats counts the outcomes of reads made during the faults.
type readStats struct {
	mu                     sync.Mutex
	ok, unavailable, other int
	dropped                []string
}

// readLoop reads the channel's log from the live nodes, round after
// round, until stop: a read either is a whole 200 page, or a 503 with
// Retry-After; a dropped connection or a broken body is counted.
// Reads of a node that was killed (dead) are not counted.
func readLoop(rs *readStats, urls func() []string, dead func(string) bool, ch string, tok func() string, stop <-chan struct{}) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		us := urls()
		base := us[i%len(us)]
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/sync?channel=%s&since_seq=%d&limit=200", base, ch, uint64(i*37%2000)), nil)
		req.Header.Set("Authorization", "Bearer "+tok())
		resp, err := http.DefaultClient.Do(req)
		if dead(base) {
			if resp != nil {
				resp.Body.Close()
			}
			continue // the relay was killed: its reads die with it
		}
		if err != nil {
			rs.mu.Lock()
			rs.dropped = append(rs.dropped, err.Error())
			rs.mu.Unlock()
			continue
		}
		var page struct {
			Entries []json.RawMessage `json:"entries"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if dead(base) {
			continue
		}
		rs.mu.Lock()
		switch {
		case resp.StatusCode == 200 && err == nil:
			rs.ok++
		case resp.StatusCode == 200:
			rs.dropped = append(rs.dropped, "broken body: "+err.Error())
		case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
			rs.unavailable++
		default:
			rs.other++
			rs.dropped = append(rs.dropped, fmt.Sprintf("status %d", resp.StatusCode))
		}
		rs.mu.Unlock()
		time.Sleep(5 * time.Millisecond) // time passes: the reader's pace
	}
}

// readWhole reads a channel's whole log from base, retrying a page the
// node cannot serve yet.
func readWhole(t *testing.T, base, ch, tok string) map[uint64]string {
	t.Helper()
	got := map[uint64]string{}
	var since uint64
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/sync?channel=%s&since_seq=%d&limit=500", base, ch, since), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
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
		if resp.StatusCode != 200 || err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("read of %s: %d %v", base, resp.StatusCode, err)
			}
			time.Sleep(100 * time.Millisecond) // the node cannot serve the page yet: ask again (one deadline for the whole read)
			continue
		}
		for _, e := range page.Entries {
			p, _ := base64.StdEncoding.DecodeString(e.Payload)
			got[e.Seq] = string(p)
			since = e.Seq
		}
		if !page.HasMore {
			return got
		}
	}
}

// TestNATSClusterFaults runs three relays on a three-server NATS cluster
// (routes, JetStream, the stream at R3) with publishers on every relay
// and readers on every relay, through cycles of faults: kill -9 of the
// stream leader, kill -9 of a follower, SIGSTOP of one server, kill -9 of
// all three servers, and a relay killed mid-publish. At the end every
// relay's archive holds every acknowledged entry under its seq (0 lost),
// no payload twice (0 duplicated), and no read during the faults ended
// with a dropped connection or a broken body.
func TestNATSClusterFaults(t *testing.T) {
	cycles := *clusterCycles
	if cycles == 0 {
		cycles = 4
		if testing.Short() {
			cycles = 3
		}
	}
	const stream, ch = "FAULTS", "acme/cluster/faults"
	nc := startNATSCluster(t)
	cfg := Config{OpenChannels: true, JWTSecret: testSecret, ArchiveCap: 1 << 20}
	t.Cleanup(func() { checkNoRelayGoroutines(t) })
	var nmu sync.Mutex
	nodes := make([]*testRelay, 3)
	killed := map[string]bool{}
	dead := func(u string) bool { nmu.Lock(); defer nmu.Unlock(); return killed[u] }
	for i := range nodes {
		c := withJS(cfg, nc.URL(i), stream, 3)
		nodes[i] = startRelay(t, c)
		nodes[i].inCluster = true
	}
	urls := func() []string {
		nmu.Lock()
		defer nmu.Unlock()
		var us []string
		for _, n := range nodes {
			us = append(us, n.URL)
		}
		return us
	}
	// Tokens live a minute: every dial and read takes a fresh one, so
	// the long form (-cluster.cycles) outlives them.
	tok := func() string { return freshToken("reader") }
	l := &ledger{acked: map[uint64]string{}, errs: map[string]int{}}
	stopP := make(chan struct{})
	var pwg sync.WaitGroup
	startPub := func(i int, gen int) {
		base := urls()[i]
		sub := fmt.Sprint("pub-", i, "-", gen)
		pwg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stopP:
					return
				default:
				}
				// A publisher whose socket dropped starts again on the
				// same node, with new payloads.
				pipelinePublisher(l, base, ch, freshToken(sub), fmt.Sprintf("n%d.%d.%d", i, gen, k), 8, stopP)
				if urls()[i] != base {
					return // its relay was killed
				}
				time.Sleep(20 * time.Millisecond) // time passes: a pause before the publisher starts again
			}
		})
	}
	for i := range 3 {
		startPub(i, 0)
	}
	rs := &readStats{}
	stopR := make(chan struct{})
	var rwg sync.WaitGroup
	for range 2 {
		rwg.Go(func() { readLoop(rs, urls, dead, ch, tok, stopR) })
	}

	// The publishers and readers stop before the test returns, however
	// it ends: left running, they would publish into the next test.
	var stopOnce sync.Once
	stopAll := func() {
		stopOnce.Do(func() {
			close(stopP)
			pwg.Wait()
			close(stopR)
			rwg.Wait()
		})
	}
	t.Cleanup(stopAll)

	l.waitFor(t, 100, "start")
	kinds := []string{"leader", "follower", "pause", "all"}
	for cycle := range cycles {
		kind := kinds[cycle%len(kinds)]
		leader := nc.healthy(stream)
		base := l.count()
		switch kind {
		case "leader", "follower":
			victim := leader
			if kind == "follower" {
				victim = (leader + 1) % 3
			}
			at := time.Now()
			var elected <-chan time.Duration
			if kind == "leader" {
				elected = nc.electionWatch(stream, victim, func() { at = time.Now(); nc.kill(victim) })
			} else {
				nc.kill(victim)
			}
			d := l.waitFor(t, base+100, kind+" kill")
			t.Logf("cycle %d: kill -9 of the %s (%s): 100 more acks after %v%s", cycle, kind, nc.names[victim], d.Round(time.Millisecond), failoverFigures(l, elected, at))
			nc.start(victim)
		case "pause":
			victim := leader
			var at time.Time
			elected := nc.electionWatch(stream, victim, func() { at = time.Now(); nc.pause(victim) })
			d := l.waitFor(t, base+100, "pause")
			t.Logf("cycle %d: SIGSTOP of the leader (%s): 100 more acks after %v%s", cycle, nc.names[victim], d.Round(time.Millisecond), failoverFigures(l, elected, at))
			nc.resume(victim)
		case "all":
			for i := range 3 {
				nc.kill(i)
			}
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Go(func() { nc.start(i) })
			}
			wg.Wait()
			d := l.waitFor(t, base+100, "all killed")
			t.Logf("cycle %d: kill -9 of all three servers: 100 more acks after %v", cycle, d.Round(time.Millisecond))
		}
	}
	// A relay killed mid-publish: its publisher has publishes in flight;
	// a new relay takes its place.
	nc.healthy(stream)
	base := l.count()
	nmu.Lock()
	old := nodes[2]
	killed[old.URL] = true
	nmu.Unlock()
	old.kill(t)
	fresh := startRelay(t, withJS(cfg, nc.URL(2), stream, 3))
	fresh.inCluster = true
	nmu.Lock()
	nodes[2] = fresh
	nmu.Unlock()
	startPub(2, 1)
	l.waitFor(t, base+100, "relay killed")

	stopAll()
	nc.healthy(stream)

	l.mu.Lock()
	defer l.mu.Unlock()
	for i, base := range urls() {
		got := readWhole(t, base, ch, tok())
		lost, dup := 0, 0
		for seq, p := range l.acked {
			if got[seq] != p {
				lost++
			}
		}
		at := map[string]uint64{}
		for seq, p := range got {
			if _, ok := at[p]; ok {
				dup++
			}
			at[p] = seq
		}
		t.Logf("node %d: %d entries archived, %d acknowledged: %d lost, %d duplicated", i, len(got), len(l.acked), lost, dup)
		if lost != 0 || dup != 0 {
			t.Errorf("node %d: %d acknowledged entries lost, %d duplicated", i, lost, dup)
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	t.Logf("reads during the faults: %d whole, %d 503 with Retry-After, %d dropped; publish errors %v", rs.ok, rs.unavailable, len(rs.dropped), l.errs)
	if len(rs.dropped) > 0 {
		t.Errorf("%d reads dropped, e.g. %q", len(rs.dropped), rs.dropped[:min(5, len(rs.dropped))])
	}
}

// failoverFigures tells NATS's own failover (a new stream leader, as a
// server reports it) apart from the relays': the first acknowledgement
// after the new leader, counted from the fault and from the election.
func failoverFigures(l *ledger, elected <-chan time.Duration, at time.Time) string {
	if elected == nil {
		return ""
	}
	e := <-elected
	if e < 0 {
		return "; no advisory of a new leader came within 20 s"
	}
	first := l.firstAckAfter(at.Add(e))
	if first.IsZero() {
		return fmt.Sprintf("; NATS elected a new leader after %v", e.Round(time.Millisecond))
	}
	return fmt.Sprintf("; NATS elected a new leader after %v, first ack after it %v later",
		e.Round(time.Millisecond), first.Sub(at.Add(e)).Round(time.Millisecond))
}

// TestNATSClusterStreamSetup: three relays start at the same moment on a
// fresh three-server cluster and all come up, on one stream at R3 (one
// creates it, the others bind). A node configured with other replicas
// refuses to start, naming the command that changes them, and leaves the
// stream at R3; a node given none binds. UpdateStreamReplicas changes
// them, and then a node configured with the new count starts. Before,
// every node applied its own config: the concurrent starts timed out,
// and a node given one replica turned the stream into R1.
func TestNATSClusterStreamSetup(t *testing.T) {
	const stream = "SETUP"
	nc := startNATSCluster(t)
	t.Cleanup(func() { checkNoRelayGoroutines(t) })
	cfg := Config{OpenChannels: true, JWTSecret: testSecret}
	servers := make([]*Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		c := withJS(cfg, nc.URL(i), stream, 3)
		wg.Go(func() { servers[i], errs[i] = New(context.Background(), c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d of three starting together: %v", i, err)
		}
		t.Cleanup(func() { servers[i].Close(context.Background()) })
	}
	replicas := func() int {
		t.Helper()
		info, err := nc.streamInfo(stream)
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.Replicas
	}
	if r := replicas(); r != 3 {
		t.Fatalf("stream at R%d after three nodes started at R3", r)
	}
	one := withJS(cfg, nc.URL(0), stream, 1)
	if s, err := New(context.Background(), one); err == nil {
		s.Close(context.Background())
		t.Fatal("a node configured with 1 replica started on an R3 stream")
	} else if !strings.Contains(err.Error(), "update-stream --replicas 1") {
		t.Fatalf("refusal does not say how to change replicas: %v", err)
	}
	if r := replicas(); r != 3 {
		t.Fatalf("stream at R%d after a refused node", r)
	}
	none := withJS(cfg, nc.URL(1), stream, 0)
	s, err := New(context.Background(), none)
	if err != nil {
		t.Fatalf("a node given no replicas: %v", err)
	}
	s.Close(context.Background())
	if r := replicas(); r != 3 {
		t.Fatalf("stream at R%d after a node given none", r)
	}
	if err := jsarchive.UpdateStreamReplicas(context.Background(), nc.URL(2), stream, 7); err == nil {
		t.Fatal("7 replicas accepted")
	}
	if err := jsarchive.UpdateStreamReplicas(context.Background(), nc.URL(2), stream, 1); err != nil {
		t.Fatal(err)
	}
	if r := replicas(); r != 1 {
		t.Fatalf("stream at R%d after update-stream --replicas 1", r)
	}
	s, err = New(context.Background(), one)
	if err != nil {
		t.Fatalf("a node at the stream's new count: %v", err)
	}
	s.Close(context.Background())
}

// freshToken mints a relay token for sub, valid for a minute from now,
// for the goroutines of a test (which may not call t.Fatal).
func freshToken(sub string) string {
	now := time.Now()
	tok, err := jwt.Mint(testSecret, jwt.Claims{Subject: sub, Audience: jwt.AudienceRelay, IssuedAt: now, ExpiresAt: now.Add(time.Minute)})
	if err != nil {
		panic(err) // the test's own secret and claims: a broken invariant
	}
	return tok
}
