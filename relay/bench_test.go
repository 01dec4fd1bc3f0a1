package relay

// Benchmarks of the relay over real WebSockets on loopback. Clients and the
// relay run in one process and share the machine's cores. The workload is
// fixed so figures stay comparable: 1 KiB payloads, a file-backed archive
// with fsync on (the default durability), and closed-loop publishers that
// keep at most 256 messages outstanding.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const (
	benchPayload = 1024
	benchWindow  = 256
)

// benchConn buffers a client socket's reads, so a client draining many
// small frames does not pay one syscall per frame.
type benchConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *benchConn) Read(p []byte) (int, error) { return c.r.Read(p) }

var benchClient = &http.Client{Transport: &http.Transport{
	DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &benchConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
	},
}}

func benchRelay(b *testing.B, cfg Config) *testRelay {
	b.Helper()
	if cfg.DBPath == "" {
		cfg.DBPath = filepath.Join(b.TempDir(), "relay.db")
	}
	if os.Getenv("RELAY_BENCH_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return startRelay(b, cfg)
}

func benchDial(b *testing.B, base, path, sub string) *websocket.Conn {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+path, &websocket.DialOptions{
		HTTPClient:      benchClient,
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(4 << 20)
	b.Cleanup(func() { c.CloseNow() })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := c.Write(ctx2, websocket.MessageText, []byte(`{"type":"auth","token":"`+mint(b, sub, "")+`"}`)); err != nil {
		b.Fatal(err)
	}
	if _, m, err := c.Read(ctx2); err != nil || !bytes.Contains(m, []byte("authenticated")) {
		b.Fatalf("auth: %s %v", m, err)
	}
	return c
}

func publishFrame(ch string) []byte {
	payload := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA5}, benchPayload))
	return []byte(`{"type":"publish","channel":"` + ch + `","payload":"` + payload + `"}`)
}

// drain reads frames until the connection ends, calling f for each.
func drain(c *websocket.Conn, f func([]byte)) {
	ctx := context.Background()
	buf := make([]byte, 0, 4096)
	for {
		_, r, err := c.Reader(ctx)
		if err != nil {
			return
		}
		buf, err = readAll(r, buf[:0])
		if err != nil {
			return
		}
		f(buf)
	}
}

var pushPrefixBytes = []byte(`{"type":"message"`)

// cpuTime is the process's user+system CPU time so far. Clients and relay
// share the process, so per-op CPU covers both sides.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawReader counts the text frames of a bare-socket WebSocket client,
// reading 64 KiB at a time; it returns when the connection ends or a close
// frame arrives.
func rawReader(c net.Conn, f func(payload []byte)) {
	r := bufio.NewReaderSize(c, 64<<10)
	var hdr [8]byte
	payload := make([]byte, 0, 4096)
	for {
		if _, err := io.ReadFull(r, hdr[:2]); err != nil {
			return
		}
		n := int(hdr[1] & 0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(r, hdr[:2]); err != nil {
				return
			}
			n = int(hdr[0])<<8 | int(hdr[1])
		case 127:
			if _, err := io.ReadFull(r, hdr[:8]); err != nil {
				return
			}
			n = int(binary.BigEndian.Uint64(hdr[:]))
		}
		payload = slices.Grow(payload[:0], n)[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return
		}
		f(payload)
	}
}

// BenchmarkFanout: one publisher, 100 subscribers on one channel, archive
// on. The publisher keeps at most 256 messages outstanding for the slowest
// subscriber. One op is one published message; delivered/s counts frames
// received by all subscribers.
func BenchmarkFanout(b *testing.B) { benchFanout(b, Config{}, "bench/fanout/chan", 100) }

// benchFanout runs the fan-out benchmark on a relay with cfg: one
// publisher, account "publisher", and the given number of subscribers,
// accounts "sub-0", "sub-1", ..., all on channel ch.
func benchFanout(b *testing.B, cfg Config, ch string, subscribers int) {
	tr := benchRelay(b, cfg)
	counts := make([]atomic.Int64, subscribers)
	progress := make(chan struct{}, 1)
	var wg sync.WaitGroup
	conns := make([]net.Conn, subscribers)
	addr := strings.TrimPrefix(tr.URL, "http://")
	for i := range subscribers {
		conns[i] = rawSubscriber(b, addr, "/ws/"+ch, mint(b, fmt.Sprintf("sub-%d", i), ""))
	}
	for i, c := range conns {
		wg.Go(func() {
			rawReader(c, func(f []byte) {
				if bytes.HasPrefix(f, pushPrefixBytes) {
					if n := counts[i].Add(1); n%16 == 0 {
						select {
						case progress <- struct{}{}:
						default:
						}
					}
				}
			})
		})
	}
	pub := benchDial(b, tr.URL, "/ws/"+ch, "publisher")
	var acks atomic.Int64
	wg.Go(func() { drain(pub, func([]byte) { acks.Add(1) }) })
	frame := publishFrame(ch)
	minCount := func() int64 {
		m := counts[0].Load()
		for i := 1; i < subscribers; i++ {
			m = min(m, counts[i].Load())
		}
		return m
	}
	ctx := context.Background()

	b.SetBytes(benchPayload)
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	low := int64(0)
	for i := int64(0); i < int64(b.N); i++ {
		for i-low >= benchWindow {
			if low = minCount(); i-low >= benchWindow {
				select {
				case <-progress:
				case <-time.After(10 * time.Second):
					b.Fatalf("no progress: published %d, slowest subscriber at %d", i, low)
				}
			}
		}
		if err := pub.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
	}
	for minCount() < int64(b.N) {
		select {
		case <-progress:
		case <-time.After(10 * time.Millisecond):
		}
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)*float64(subscribers)/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*subscribers), "cpu-ns/delivered")
	pub.CloseNow()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}

// BenchmarkLatency: publish → deliver with one message in flight, archive
// on. Reports the median and 99th percentile.
func BenchmarkLatency(b *testing.B) {
	tr := benchRelay(b, Config{})
	ch := "bench/latency/chan"
	sub := benchDial(b, tr.URL, "/ws/"+ch, "sub")
	pub := benchDial(b, tr.URL, "/ws/"+ch, "pub")
	var wg sync.WaitGroup
	wg.Go(func() { drain(pub, func([]byte) {}) })
	frame := publishFrame(ch)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	buf := make([]byte, 0, 4096)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := pub.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		_, r, err := sub.Reader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if buf, err = readAll(r, buf[:0]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	pub.CloseNow()
	wg.Wait()
}

// benchDurable runs publishers closed-loop on their own channels, each
// keeping at most window publishes unacknowledged, and reports acks/s.
func benchDurable(b *testing.B, publishers, window int) {
	tr := benchRelay(b, Config{})
	type pubState struct {
		c     *websocket.Conn
		frame []byte
		acked chan struct{}
	}
	ps := make([]*pubState, publishers)
	var wg sync.WaitGroup
	for i := range publishers {
		ch := fmt.Sprintf("bench/durable/chan%d", i)
		p := &pubState{c: benchDial(b, tr.URL, "/ws/"+ch, fmt.Sprintf("pub-%d", i)), frame: publishFrame(ch), acked: make(chan struct{}, window)}
		ps[i] = p
		wg.Go(func() {
			drain(p.c, func(f []byte) {
				if bytes.Contains(f, []byte(`"published"`)) {
					p.acked <- struct{}{}
				} else {
					panic(fmt.Sprintf("unexpected frame %s", f))
				}
			})
		})
	}
	ctx := context.Background()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	var run sync.WaitGroup
	for i, p := range ps {
		n := b.N / publishers
		if i < b.N%publishers {
			n++
		}
		run.Go(func() {
			out := 0
			for range n {
				if out == window {
					<-p.acked
					out--
				}
				if err := p.c.Write(ctx, websocket.MessageText, p.frame); err != nil {
					panic(err)
				}
				out++
			}
			for ; out > 0; out-- {
				<-p.acked
			}
		})
	}
	run.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acks/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/ack")
	for _, p := range ps {
		p.c.CloseNow()
	}
	wg.Wait()
}

// BenchmarkDurable16: 16 publishers on 16 channels, fsync'd archive.
func BenchmarkDurable16(b *testing.B) { benchDurable(b, 16, benchWindow) }

// BenchmarkDurableSingle: one publisher, one publish in flight.
func BenchmarkDurableSingle(b *testing.B) { benchDurable(b, 1, 1) }

// BenchmarkMessagesPage: GET /v1/messages returning 100 entries of 1 KiB.
func BenchmarkMessagesPage(b *testing.B) {
	tr := benchRelay(b, Config{})
	ch := "bench/page/chan"
	c := benchDial(b, tr.URL, "/ws/"+ch, "pub")
	frame := publishFrame(ch)
	ctx := context.Background()
	for range 100 {
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		if _, m, err := c.Read(ctx); err != nil || !bytes.Contains(m, []byte("published")) {
			b.Fatalf("publish: %s %v", m, err)
		}
	}
	url := tr.URL + "/v1/messages?channel=" + ch + "&limit=100"
	tok := "Bearer " + mint(b, "reader", "")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("Authorization", tok)
			resp, err := client.Do(req)
			if err != nil {
				panic(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n < 100*benchPayload {
				panic(fmt.Sprintf("status %d, %d bytes", resp.StatusCode, n))
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pages/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/page")
}

// rawSubscriber opens a WebSocket by hand on a bare TCP socket,
// authenticates and stays idle. It holds no goroutine and no buffers, so
// the process's memory growth per connection is the relay's.
func rawSubscriber(b *testing.B, addr, path, tok string) net.Conn {
	c := rawUpgradeFrom(b, addr, path, nil)
	auth := []byte(`{"type":"auth","token":"` + tok + `"}`)
	// A masked text frame; the all-zero mask leaves the payload as is.
	frame := []byte{0x81, 0x80 | 126, byte(len(auth) >> 8), byte(len(auth)), 0, 0, 0, 0}
	if _, err := c.Write(append(frame, auth...)); err != nil {
		b.Fatal(err)
	}
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(c, hdr); err != nil {
		b.Fatal(err)
	}
	reply := make([]byte, hdr[1]&0x7f)
	if _, err := io.ReadFull(c, reply); err != nil || !bytes.Contains(reply, []byte("authenticated")) {
		b.Fatalf("auth reply %s: %v", reply, err)
	}
	return c
}

// BenchmarkIdleConnMemory: heap and goroutine stacks held per idle,
// authenticated, subscribed connection. The clients are bare sockets, so
// the growth is the relay's (plus the kernel-side socket, not counted).
func BenchmarkIdleConnMemory(b *testing.B) {
	const n = 1000
	tr := benchRelay(b, Config{NoSync: true})
	addr := strings.TrimPrefix(tr.URL, "http://")
	tok := mint(b, "idle", "")
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		conns := make([]net.Conn, n)
		for i := range n {
			conns[i] = rawSubscriber(b, addr, "/ws/bench/idle/chan", tok)
		}
		time.Sleep(100 * time.Millisecond) // time passes: the sockets settle before the heap is read
		runtime.GC()
		runtime.ReadMemStats(&after)
		used := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)
		b.ReportMetric(float64(used)/n, "B/conn")
		for _, c := range conns {
			c.Close()
		}
	}
}
