package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkSoak publishes b.N messages from one publisher to 50
// subscribers (SOAK_SUBSCRIBERS) that disconnect and reconnect at random
// (connected for an exponentially distributed time of mean 2 s, SOAK_STAY,
// then away for up to 50 ms). A subscriber that comes back subscribes first, then catches up
// with GET /v1/sync from the highest seq it has; when the publisher is
// done, every subscriber catches up once more. The benchmark fails unless
// every acknowledged message reached every subscriber, live or through
// /v1/sync. It reports the process's RSS before and after, and the heap
// in use after (clients and relay share the process; the archive's SQLite
// page cache, up to 64 MiB, is part of the RSS). Run it on purpose, for example:
//
//	go test ./relay -run '^$' -bench Soak -benchtime 1000000x -timeout 30m
func BenchmarkSoak(b *testing.B) {
	subscribers := soakSubscribers()
	// The archive must hold what a subscriber misses while away and
	// while it catches up; 200,000 entries also keep eviction running.
	tr := benchRelay(b, Config{ArchiveCap: 200_000, OpenChannels: true})
	ch := "bench/soak/chan"
	n := b.N

	subs := make([]*soakSub, subscribers)
	for i := range subs {
		subs[i] = &soakSub{id: i, base: tr.URL, ch: ch, got: make([]uint64, n/64+16), tok: func() string { return mint(b, fmt.Sprintf("soak-%d", i), "") }}
	}
	var done atomic.Bool
	var wg sync.WaitGroup
	runtime.GC()
	rssBefore := rssBytes()
	for _, s := range subs {
		if err := s.connect(); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { s.run(&done) })
	}

	pub := benchDial(b, tr.URL, "/ws/"+ch, "soak-publisher")
	acked := make([]uint64, 0, n)
	var lastAck uint64
	ackc := make(chan uint64, benchWindow)
	var readers sync.WaitGroup
	readers.Go(func() {
		drain(pub, func(f []byte) {
			switch {
			case bytes.Contains(f, []byte(`"published"`)):
				ackc <- frameSeq(f)
			case bytes.Contains(f, []byte(`"reauthenticated"`)):
			default:
				panic(fmt.Sprintf("publisher got %s", f))
			}
		})
		close(ackc)
	})
	frame := publishFrame(ch)
	ctx := context.Background()
	// The publisher keeps at most benchWindow messages ahead of the
	// slowest connected subscriber, and at most benchWindow unacked.
	slowest := func() uint64 {
		low, any := uint64(0), false
		for _, s := range subs {
			if s.connected.Load() {
				if h := s.hi.Load(); !any || h < low {
					low, any = h, true
				}
			}
		}
		if !any {
			return lastAck
		}
		return low
	}
	b.SetBytes(benchPayload)
	b.ResetTimer()
	start := time.Now()
	out := 0
	renewed := time.Now()
	for i := range n {
		for out == benchWindow || lastAck-min(slowest(), lastAck) > 4*benchWindow {
			select {
			case seq := <-ackc:
				acked = append(acked, seq)
				lastAck = max(lastAck, seq)
				out--
			case <-time.After(time.Millisecond):
			}
		}
		if err := pub.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatalf("publish %d: %v", i, err)
		}
		out++
		// Tokens live a minute in these tests: renew the publisher's
		// socket well before its token expires.
		if time.Since(renewed) > 20*time.Second {
			renewed = time.Now()
			if err := pub.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","token":"`+mint(b, "soak-publisher", "")+`"}`)); err != nil {
				b.Fatalf("renew: %v", err)
			}
		}
	}
	for ; out > 0; out-- {
		acked = append(acked, <-ackc)
	}
	publishing := time.Since(start)
	done.Store(true)
	for _, s := range subs {
		s.stop()
	}
	wg.Wait()
	for _, s := range subs {
		if err := s.catchUp(); err != nil {
			b.Fatalf("subscriber %d: final catch-up: %v", s.id, err)
		}
	}
	b.StopTimer()
	runtime.GC()
	rssAfter := rssBytes()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	lost, reconnects := 0, 0
	for _, s := range subs {
		reconnects += s.reconnects
		var miss []uint64
		for _, seq := range acked {
			if !s.has(seq) {
				lost++
				miss = append(miss, seq)
			}
		}
		if len(miss) > 0 {
			b.Logf("subscriber %d missed %d, first %v", s.id, len(miss), miss[:min(20, len(miss))])
		}
	}
	if lost > 0 {
		b.Fatalf("%d acknowledged deliveries lost (of %d x %d)", lost, len(acked), subscribers)
	}
	b.ReportMetric(float64(n*subscribers)/publishing.Seconds(), "delivered/s")
	b.ReportMetric(float64(reconnects), "reconnects")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(rssBefore)/(1<<20), "rss-before-MB")
	b.ReportMetric(float64(rssAfter)/(1<<20), "rss-after-MB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-after-MB")
	pub.CloseNow()
	readers.Wait()
}

// soakSub is one reconnecting subscriber of BenchmarkSoak. got is a bitmap
// of the seqs it received; hi is the highest.
type soakSub struct {
	id         int
	base, ch   string
	tok        func() string
	got        []uint64
	hi         atomic.Uint64
	connected  atomic.Bool
	reconnects int
	cmu        sync.Mutex // guards c
	c          *websocket.Conn
	mu         sync.Mutex // guards got
}

// stop ends the current socket, so a read waiting for the end of its
// stay returns at once.
func (s *soakSub) stop() {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if s.c != nil {
		s.c.CloseNow()
	}
}

func (s *soakSub) mark(seq uint64) {
	s.mu.Lock()
	if w := seq / 64; w < uint64(len(s.got)) {
		s.got[w] |= 1 << (seq % 64)
	}
	s.mu.Unlock()
	for {
		h := s.hi.Load()
		if seq <= h || s.hi.CompareAndSwap(h, seq) {
			return
		}
	}
}

func (s *soakSub) has(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seq/64 < uint64(len(s.got)) && s.got[seq/64]&(1<<(seq%64)) != 0
}

// connect opens a socket subscribed to the channel (through the path) and
// then catches up, so nothing between the last socket and this one is
// missed.
func (s *soakSub) connect() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.base, "http")+"/ws/"+s.ch, &websocket.DialOptions{
		HTTPClient: benchClient, CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return err
	}
	c.SetReadLimit(4 << 20)
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"auth","token":"`+s.tok()+`"}`)); err != nil {
		c.CloseNow()
		return err
	}
	if _, m, err := c.Read(ctx); err != nil || !bytes.Contains(m, []byte("authenticated")) {
		c.CloseNow()
		return fmt.Errorf("auth: %s %v", m, err)
	}
	s.cmu.Lock()
	s.c = c
	s.cmu.Unlock()
	if err := s.catchUp(); err != nil {
		c.CloseNow()
		return err
	}
	// Only now does the publisher wait for this subscriber.
	s.connected.Store(true)
	return nil
}

// catchUp pages through GET /v1/sync from the highest seq received.
func (s *soakSub) catchUp() error {
	since := s.hi.Load()
	for {
		req, _ := http.NewRequest("GET", s.base+"/v1/sync?channel="+s.ch+"&limit=500&since_seq="+strconv.FormatUint(since, 10), nil)
		req.Header.Set("Authorization", "Bearer "+s.tok())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var page struct {
			Entries []struct {
				Seq uint64 `json:"seq"`
			} `json:"entries"`
			HasMore bool `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("sync: status %d: %v", resp.StatusCode, err)
		}
		for _, e := range page.Entries {
			s.mark(e.Seq)
			since = max(since, e.Seq)
		}
		if !page.HasMore {
			return nil
		}
	}
}

// run reads pushes, dropping and reopening the socket at random, until
// done.
func (s *soakSub) run(done *atomic.Bool) {
	buf := make([]byte, 0, 4096)
	for !done.Load() {
		stay := time.Duration(rand.ExpFloat64() * float64(soakStay()))
		deadline := time.Now().Add(stay)
		s.cmu.Lock()
		c := s.c
		s.cmu.Unlock()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		for !done.Load() {
			_, r, err := c.Reader(ctx)
			if err == nil {
				buf, err = readAll(r, buf[:0])
			}
			if err != nil {
				break // the stay is over, or the relay dropped a slow consumer
			}
			if bytes.HasPrefix(buf, pushPrefixBytes) {
				s.mark(frameSeq(buf))
			}
		}
		cancel()
		s.connected.Store(false)
		c.CloseNow()
		if done.Load() {
			return
		}
		time.Sleep(time.Duration(rand.Int64N(int64(50 * time.Millisecond)))) // time passes: a random stay away
		s.reconnects++
		for s.connect() != nil && !done.Load() {
			time.Sleep(10 * time.Millisecond) // a retry's pace, until the soak ends
		}
	}
	s.connected.Store(false)
	s.stop()
}

// frameSeq is the "seq" of a push or ack frame.
func frameSeq(f []byte) uint64 {
	i := bytes.LastIndex(f, []byte(`"seq":`))
	if i < 0 {
		return 0
	}
	var v uint64
	for _, c := range f[i+6:] {
		if c < '0' || c > '9' {
			break
		}
		v = v*10 + uint64(c-'0')
	}
	return v
}

// rssBytes is the process's resident set size, from /proc (0 elsewhere).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func soakStay() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SOAK_STAY")); err == nil {
		return d
	}
	return 2 * time.Second
}

func soakSubscribers() int {
	if n, err := strconv.Atoi(os.Getenv("SOAK_SUBSCRIBERS")); err == nil && n > 0 {
		return n
	}
	return 50
}
