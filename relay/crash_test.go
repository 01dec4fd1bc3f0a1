package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	crashCycles = flag.Int("crash.cycles", 0, "kill -9 cycles of TestCrashCampaign (default 20, or 3 with -short)")
	crashSeed   = flag.Uint64("crash.seed", 0, "random seed of TestCrashCampaign (default: from the clock)")
)

// TestCrashChild is the relay process TestKillDurability and
// TestCrashCampaign kill. It only runs when started by them.
func TestCrashChild(t *testing.T) {
	path := os.Getenv("RELAY_CRASH_DB")
	if path == "" {
		t.Skip("run by TestKillDurability and TestCrashCampaign")
	}
	capN, _ := strconv.Atoi(os.Getenv("RELAY_CRASH_CAP"))
	cfg := Config{DBPath: path, JWTSecret: testSecret, ArchiveCap: capN, OpenChannels: true}
	if url := os.Getenv("RELAY_CRASH_NATS"); url != "" {
		cfg = withJS(cfg, url, os.Getenv("RELAY_CRASH_STREAM"), 0)
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		os.Exit(1)
	}
	fmt.Printf("listening http://%s\n", ln.Addr())
	http.Serve(ln, s) // until killed
}

// startCrashChild starts a relay on the archive at path in a child
// process and returns it and its base URL. capN 0 is the default cap. env
// adds to the child's environment (RELAY_CRASH_NATS and
// RELAY_CRASH_STREAM put its archive on JetStream).
func startCrashChild(t *testing.T, path string, capN int, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), "RELAY_CRASH_DB="+path, "RELAY_CRASH_CAP="+strconv.Itoa(capN))
	cmd.Env = append(cmd.Env, env...)
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
		t.Fatalf("child: %q %v", line, err)
	}
	return cmd, strings.TrimSpace(strings.TrimPrefix(line, "listening "))
}

// syncEntry is an entry as GET /v1/sync serves it.
type syncEntry struct {
	payload []byte
	et      int
}

// readChannel reads a channel's whole archive through GET /v1/sync.
func readChannel(t *testing.T, base, ch, tok string) map[uint64]syncEntry {
	t.Helper()
	return readPages(t, base, "sync", ch, tok)
}

// readPages reads a channel's log through GET /v1/sync (what "sync") or
// its application entries through GET /v1/messages (what "messages"),
// page after page, checking that seqs grow.
func readPages(t *testing.T, base, what, ch, tok string) map[uint64]syncEntry {
	t.Helper()
	key := map[string]string{"sync": "entries", "messages": "messages"}[what]
	got := make(map[uint64]syncEntry)
	since := uint64(0)
	for {
		code, m := httpGet(t, fmt.Sprintf("%s/v1/%s?channel=%s&since_seq=%d&limit=500", base, what, ch, since), tok)
		if code != 200 {
			t.Fatalf("%s %s: %d %v", what, ch, code, m)
		}
		for _, e := range m[key].([]any) {
			e := e.(map[string]any)
			seq := uint64(e["seq"].(float64))
			if seq <= since {
				t.Fatalf("%s %s: seq %d after %d", what, ch, seq, since)
			}
			since = seq
			p, err := base64.StdEncoding.DecodeString(e["payload"].(string))
			if err != nil {
				t.Fatal(err)
			}
			et, _ := e["entry_type"].(float64)
			got[seq] = syncEntry{p, int(et)}
		}
		if m["has_more"] != true {
			return got
		}
	}
}

// TestKillDurability publishes to a relay in a child process, kills it
// with SIGKILL while publishes are in flight, reopens the archive and
// checks that every acknowledged publish is there under the seq it was
// acknowledged with, and that no seq a subscriber saw is handed out again.
//
// On JetStream the child is a cluster node killed mid-stream, and the
// relay that reads the archive after it is another node.
func TestKillDurability(t *testing.T) { forBackends(t, testKillDurability) }

func testKillDurability(t *testing.T, be *testBackend) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	var env []string
	if be.nats != nil {
		jc, _ := jsConfig(be.config(Config{DBPath: path}))
		env = []string{"RELAY_CRASH_NATS=" + jc.URL, "RELAY_CRASH_STREAM=" + jc.Stream}
	}
	cmd, base := startCrashChild(t, path, 0, env...)

	pub := dialWS(t, base, "/ws/"+chA)
	pub.auth(mint(t, "pub", ""))
	sub := dialWS(t, base, "/ws/"+chA)
	sub.auth(mint(t, "sub", ""))

	payload := func(i int) []byte { return []byte(fmt.Sprintf("message %d", i)) }
	acked := make(map[uint64][]byte)
	var seen []uint64
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			m, err := sub.tryRecv(time.Minute)
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, uint64(m["seq"].(float64)))
			mu.Unlock()
		}
	})
	// Publish in a pipelined loop; kill the relay once 500 are acked.
	var pending []int
	next := 0
	for len(acked) < 500 {
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
	pub.c.CloseNow()
	sub.c.CloseNow()
	wg.Wait()

	tr := be.start(t, Config{DBPath: path, NoSync: true, OpenChannels: true})
	tok := mint(t, "reader", "")
	got := readChannel(t, tr.URL, chA, tok)
	for seq, p := range acked {
		if !bytes.Equal(got[seq].payload, p) {
			t.Fatalf("acknowledged seq %d: archive has %q, want %q", seq, got[seq].payload, p)
		}
	}
	maxSeen := uint64(0)
	for _, s := range seen {
		maxSeen = max(maxSeen, s)
	}
	for s := range got {
		maxSeen = max(maxSeen, s)
	}
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	if seq := c.publishAck(chA, []byte("after the crash")); seq <= maxSeen {
		t.Fatalf("seq %d after the crash reuses a number already seen (max %d)", seq, maxSeen)
	}
	c.c.CloseNow()
	t.Logf("%d acked, %d archived, %d seen live before the kill", len(acked), len(got), len(seen))
}

// crashEntry is one publish of the campaign.
type crashEntry struct {
	ch      *crashChan
	payload []byte
	commit  bool
	epoch   uint64
}

// crashChan is what the campaign knows of one channel.
type crashChan struct {
	name      string
	acked     map[uint64]*crashEntry // every acknowledged publish, by seq
	known     map[uint64][]byte      // every seq ever acked, seen live or served, and its payload
	maxKnown  uint64
	ackedNext uint64 // the epoch after the last acknowledged commit
	hasCommit bool   // a commit was acknowledged
	nextEpoch uint64 // the epoch the next commit is sent at
}

// TestCrashCampaign is the archive's crash campaign: a relay in a child
// process with a small cap takes random publishes on several channels
// (application messages and commits at the right epochs) and is killed
// with SIGKILL at random moments, cycle after cycle. After every restart:
// every acknowledged entry within the cap is served by /v1/sync under its
// seq with its payload, no seq is ever handed to a second payload, the
// fence expects the epoch after the newest durable commit (never less than
// the one after the newest acknowledged one), and publishing more hides
// nothing older within the cap. -crash.cycles sets the number of cycles.
func TestCrashCampaign(t *testing.T) {
	cycles := 20
	if testing.Short() {
		cycles = 3
	}
	if *crashCycles > 0 {
		cycles = *crashCycles
	}
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-crash.seed), %d cycles", seed, cycles)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	const capN = 48 // chunks of 3; a cycle publishes several caps' worth
	path := filepath.Join(t.TempDir(), "relay.db")
	tok := mint(t, "reader", "")
	gid := []byte("crash-group")
	var chans []*crashChan
	for _, name := range []string{"acme/crash/one", "acme/crash/two", "acme/crash/three"} {
		chans = append(chans, &crashChan{name: name, acked: map[uint64]*crashEntry{}, known: map[uint64][]byte{}})
	}
	var checked, lost, liveTotal, ahead, gaps int
	n := 0

	learn := func(ch *crashChan, seq uint64, p []byte, how string) {
		t.Helper()
		if old, ok := ch.known[seq]; ok && !bytes.Equal(old, p) {
			t.Fatalf("%s seq %d (%s) carries a second payload", ch.name, seq, how)
		}
		ch.known[seq] = p
		ch.maxKnown = max(ch.maxKnown, seq)
	}
	// check reads every channel and holds the archive to the model. It
	// returns the epoch each channel's fence expects.
	check := func(base, when string) {
		t.Helper()
		probe := dialWS(t, base, "/ws")
		probe.auth(tok)
		defer probe.c.CloseNow()
		for _, ch := range chans {
			served := readChannel(t, base, ch.name, tok)
			var app, hs []uint64
			newest := -1 // the epoch of the newest commit served
			for seq, e := range served {
				learn(ch, seq, e.payload, "served")
				if e.et == EntryApp {
					app = append(app, seq)
				} else {
					hs = append(hs, seq)
					if c := classify(e.payload); c.commit {
						newest = max(newest, int(c.epoch))
					}
				}
			}
			slices.Sort(app)
			slices.Sort(hs)
			for seq, e := range ch.acked {
				list := app
				if e.commit {
					list = hs
				}
				i, _ := slices.BinarySearch(list, seq+1)
				if newer := len(list) - i; newer >= capN {
					continue // pushed out by the cap
				}
				checked++
				if got, ok := served[seq]; !ok || !bytes.Equal(got.payload, e.payload) {
					lost++
					t.Errorf("%s: %s acknowledged seq %d is not served (served %d app, %d handshake)", when, ch.name, seq, len(app), len(hs))
				}
			}
			if len(app) > capN || len(hs) > capN {
				t.Errorf("%s: %s serves %d app and %d handshake entries, cap %d", when, ch.name, len(app), len(hs), capN)
			}
			// The fence: the epoch after the newest durable commit, and
			// never behind an acknowledged one.
			if newest < 0 {
				if ch.hasCommit {
					t.Fatalf("%s: %s acknowledged commits but serves none", when, ch.name)
				}
				continue
			}
			want := uint64(newest) + 1
			if ch.hasCommit && want < ch.ackedNext {
				t.Fatalf("%s: %s newest commit served is epoch %d, but epoch %d was acknowledged", when, ch.name, newest, ch.ackedNext-1)
			}
			if ch.hasCommit && want > ch.ackedNext {
				ahead++ // an unacknowledged commit was durable
			}
			probe.subscribe(ch.name)
			probe.publish(ch.name, append(publicMessage(gid, want+1000, 3), "probe"...))
			m := probe.expectError("stale_epoch")
			if got := uint64(m["epoch"].(float64)); got != want {
				t.Fatalf("%s: %s fence expects epoch %d, want %d", when, ch.name, got, want)
			}
			ch.nextEpoch = want
		}
	}

	for cycle := 0; cycle <= cycles; cycle++ {
		cmd, base := startCrashChild(t, path, capN)
		if cycle > 0 {
			check(base, fmt.Sprintf("cycle %d after restart", cycle))
		}
		if cycle == cycles {
			cmd.Process.Kill()
			cmd.Wait()
			break
		}
		pub := dialWS(t, base, "/ws")
		pub.auth(mint(t, "pub", ""))
		sub := dialWS(t, base, "/ws")
		sub.auth(mint(t, "sub", ""))
		for _, ch := range chans {
			pub.subscribe(ch.name)
			sub.subscribe(ch.name)
		}
		byName := map[string]*crashChan{}
		for _, ch := range chans {
			byName[ch.name] = ch
		}
		var mu sync.Mutex
		type live struct {
			ch      *crashChan
			seq     uint64
			payload []byte
		}
		var seen []live
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				m, err := sub.tryRecv(time.Minute)
				if err != nil {
					return
				}
				p, _ := base64.StdEncoding.DecodeString(m["payload"].(string))
				mu.Lock()
				seen = append(seen, live{byName[m["channel"].(string)], uint64(m["seq"].(float64)), p})
				mu.Unlock()
			}
		})
		newEntry := func() *crashEntry {
			ch := chans[rng.IntN(len(chans))]
			n++
			tag := fmt.Sprintf(" c%d n%d ", cycle, n)
			if rng.IntN(8) == 0 {
				e := &crashEntry{ch: ch, commit: true, epoch: ch.nextEpoch}
				e.payload = append(publicMessage(gid, e.epoch, 3), tag...)
				ch.nextEpoch++
				return e
			}
			return &crashEntry{ch: ch, payload: append([]byte(tag), bytes.Repeat([]byte{byte(n)}, rng.IntN(3000))...)}
		}
		var pending []*crashEntry
		ack := func() {
			t.Helper()
			m := pub.recv()
			if m["type"] != "ok" || m["message"] != "published" {
				t.Fatalf("cycle %d: publish of %q refused: %v", cycle, pending[0].payload[:min(40, len(pending[0].payload))], m)
			}
			e := pending[0]
			pending = pending[1:]
			seq := uint64(m["seq"].(float64))
			if seq > e.ch.maxKnown+1 {
				gaps++
			}
			if seq <= e.ch.maxKnown && e.ch.known[seq] == nil {
				t.Fatalf("cycle %d: %s seq %d acknowledged below seq %d already handed out", cycle, e.ch.name, seq, e.ch.maxKnown)
			}
			learn(e.ch, seq, e.payload, "acked")
			e.ch.acked[seq] = e
			if e.commit {
				e.ch.ackedNext, e.ch.hasCommit = max(e.ch.ackedNext, e.epoch+1), true
			}
		}
		// A few acknowledged publishes first, then a re-read: publishing
		// after a restart must hide nothing older.
		for range 6 {
			e := newEntry()
			pub.publish(e.ch.name, e.payload)
			pending = append(pending, e)
			ack()
		}
		if cycle > 0 {
			check(base, fmt.Sprintf("cycle %d after new publishes", cycle))
		}
		// Then a pipelined burst, killed after a random number of acks.
		window := 1 + rng.IntN(64)
		killAt := rng.IntN(6 * capN)
		for acks := 0; acks < killAt; acks++ {
			for len(pending) < window {
				e := newEntry()
				pub.publish(e.ch.name, e.payload)
				pending = append(pending, e)
			}
			ack()
		}
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // time passes: the kill lands at a random point of the work in flight
		}
		cmd.Process.Kill()
		cmd.Wait()
		pub.c.CloseNow()
		sub.c.CloseNow()
		wg.Wait()
		for _, l := range seen {
			learn(l.ch, l.seq, l.payload, "seen live")
		}
		liveTotal += len(seen)
		// Commits sent but not acknowledged may or may not be durable;
		// the check after the restart asks the fence which.
	}
	acked := 0
	for _, ch := range chans {
		acked += len(ch.acked)
	}
	t.Logf("crash campaign: %d cycles, %d publishes acked, %d deliveries seen live, %d acked entries checked after restarts, lost: %d; "+
		"%d seq gaps, %d fences ahead of the acknowledged commits", cycles, acked, liveTotal, checked, lost, gaps, ahead)
}
