package relay

// Benchmarks of the JetStream archive: one relay node, and three nodes
// sharing one stream, on a nats-server in the same process (JetStream on
// file storage with every write synced, as the SQLite archive fsyncs).
// Clients, relays and nats-server all share the machine's cores, so the
// three-node figures measure the cost of the cluster's extra hops, not
// its capacity on separate machines.
//
//	go test -run '^$' -bench 'Cluster' -benchtime 3s ./relay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/relay/jsarchive"
)

func benchCluster(b *testing.B, nodes int) []string {
	b.Helper()
	n := startNATS(b)
	trs := startCluster(b, n, nodes, Config{OpenChannels: true, MaxConnsPerAccount: 1 << 20})
	urls := make([]string, nodes)
	for i, tr := range trs {
		urls[i] = tr.URL
	}
	return urls
}

func forNodes(b *testing.B, f func(b *testing.B, urls []string)) {
	for _, nodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { f(b, benchCluster(b, nodes)) })
	}
}

// BenchmarkClusterFanout: one publisher on node 1, 100 subscribers spread
// over the nodes; as BenchmarkFanout otherwise.
func BenchmarkClusterFanout(b *testing.B) {
	forNodes(b, func(b *testing.B, urls []string) {
		const subscribers = 100
		ch := "bench/cluster/fanout"
		counts := make([]atomic.Int64, subscribers)
		progress := make(chan struct{}, 1)
		var wg sync.WaitGroup
		conns := make([]net.Conn, subscribers)
		for i := range subscribers {
			addr := strings.TrimPrefix(urls[i%len(urls)], "http://")
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
		pub := benchDial(b, urls[0], "/ws/"+ch, "publisher")
		wg.Go(func() { drain(pub, func([]byte) {}) })
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
	})
}

// BenchmarkClusterDurable16: 16 closed-loop publishers on 16 channels,
// spread over the nodes, each with at most 256 publishes unacknowledged;
// an ack means JetStream stored (and synced) the entry.
func BenchmarkClusterDurable16(b *testing.B) {
	forNodes(b, func(b *testing.B, urls []string) {
		const publishers, window = 16, benchWindow
		type pubState struct {
			c     *websocket.Conn
			frame []byte
			acked chan struct{}
		}
		ps := make([]*pubState, publishers)
		var wg sync.WaitGroup
		for i := range publishers {
			ch := fmt.Sprintf("bench/cluster/durable%d", i)
			p := &pubState{c: benchDial(b, urls[i%len(urls)], "/ws/"+ch, fmt.Sprintf("pub-%d", i)), frame: publishFrame(ch), acked: make(chan struct{}, window)}
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
	})
}

// BenchmarkClusterLatency: publish on node 1 → delivery on the last node
// (the same node with one), one message in flight; p50 and p99.
func BenchmarkClusterLatency(b *testing.B) {
	forNodes(b, func(b *testing.B, urls []string) {
		ch := "bench/cluster/latency"
		sub := benchDial(b, urls[len(urls)-1], "/ws/"+ch, "sub")
		pub := benchDial(b, urls[0], "/ws/"+ch, "pub")
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
	})
}

// BenchmarkClusterMessagesPage: GET /v1/messages returning 100 entries of
// 1 KiB from the JetStream archive (a short-lived consumer per read), as
// BenchmarkMessagesPage does from SQLite.
func BenchmarkClusterMessagesPage(b *testing.B) {
	urls := benchCluster(b, 1)
	ch := "bench/cluster/page"
	c := benchDial(b, urls[0], "/ws/"+ch, "pub")
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
	url := urls[0] + "/v1/messages?channel=" + ch + "&limit=100"
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

// BenchmarkClusterNodeStart: starting a node on a stream of 100,000
// entries of 1 KiB on 1,000 channels, which it replays (headers only) to
// learn quotas and fences. One op is one New and Close.
func BenchmarkClusterNodeStart(b *testing.B) {
	const entries, channels = 100000, 1000
	n := startNATS(b)
	cfg := withJS(Config{JWTSecret: testSecret, OpenChannels: true}, n.URL, "START", 0)
	s, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	s.Close(context.Background()) // the stream exists
	// The entries as a relay stores them (its time header, an id), put
	// into the stream directly.
	js := jsClient(b, n.URL)
	// Each channel's payer record, as its first publish writes it: the
	// entries of channel c come from account c mod 50.
	kv, err := js.KeyValue(context.Background(), jsarchive.PayerBucket("START"))
	if err != nil {
		b.Fatal(err)
	}
	for c := range channels {
		if _, err := kv.Create(context.Background(), jsarchive.PayerKey(fmt.Sprintf("acme/start/c%d", c)), []byte(fmt.Sprint("account-", c%50))); err != nil {
			b.Fatal(err)
		}
	}
	payload := bytes.Repeat([]byte{0xA5}, benchPayload)
	ts := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i := range entries {
		m := nats.NewMsg(jsarchive.AppSubject("START", fmt.Sprintf("acme/start/c%d", i%channels)))
		m.Data = payload
		m.Header.Set("Skytale-Ts", ts)
		m.Header.Set(jetstream.MsgIDHeader, "bench."+strconv.Itoa(i))
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
		if i%2048 == 2047 { // within the client's bound on acks outstanding
			<-js.PublishAsyncComplete()
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		b.Fatal("publishes not acknowledged")
	}
	b.ResetTimer()
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/entries, "heap-B/entry")
		if got := s.arch.Used("account-0"); got != entries/50*benchPayload {
			b.Fatalf("account-0 uses %d bytes after the replay", got)
		}
		s.Close(context.Background())
	}
}
