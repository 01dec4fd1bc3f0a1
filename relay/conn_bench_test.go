package relay

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/waitfor"
)

// BenchmarkFanoutMembers is BenchmarkFanout with channel gating on: the
// publisher and the 100 subscribers are members in a MemberSet, so every
// subscribe and publish goes through the membership check.
func BenchmarkFanoutMembers(b *testing.B) {
	const subscribers = 100
	ms := NewMemberSet()
	ch := "bench/fanout/chan"
	ms.Add(ch, "publisher")
	for i := range subscribers {
		ms.Add(ch, fmt.Sprintf("sub-%d", i))
	}
	benchFanout(b, Config{Members: ms}, ch, subscribers)
}

// procRSS is the process's resident set size from /proc/self/status, or 0
// where there is none.
func procRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

type memSample struct{ heap, stack, rss int64 }

func sampleMem() memSample {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSample{int64(m.HeapInuse), int64(m.StackInuse), procRSS()}
}

// BenchmarkUnauthConnMemory: what 1000 unauthenticated sockets cost the
// relay when each declares a 1.4 MB first frame and sends the whole
// pre-auth limit's worth of it (4 KiB) without finishing it, the shape of
// an attack on the relay's memory before authentication. The sockets come
// from 32 loopback addresses so the default caps (1024 in total, 32 per
// address) admit them all; the clients are bare sockets holding no buffers,
// so the growth is the relay's. Reported: heap and goroutine stacks per
// socket, and the process's RSS growth in total (RSS includes the client
// side's kernel buffers only insofar as they are touched by this process:
// not at all).
func BenchmarkUnauthConnMemory(b *testing.B) {
	const n = 1000
	tr := benchRelay(b, Config{NoSync: true, AuthTimeout: time.Minute})
	addr := strings.TrimPrefix(tr.URL, "http://")
	hdr := []byte{0x81, 0x80 | 127, 0, 0, 0, 0, 0, 0x15, 0x5c, 0xc0, 0, 0, 0, 0} // 1,400,000 bytes, zero mask
	part := append(hdr, bytes.Repeat([]byte{'x'}, DefaultPreAuthReadLimit)...)
	for range b.N {
		before := sampleMem()
		conns := make([]net.Conn, 0, n)
		for i := range n {
			local := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%32))}
			c := rawUpgradeFrom(b, addr, "/ws", local)
			if _, err := c.Write(part); err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
		}
		// Wait until the relay has read what was sent: every socket's
		// bytes are in its buffers once the heap stops growing.
		time.Sleep(500 * time.Millisecond) // time passes: nothing counts the bytes a socket has read
		after := sampleMem()
		held := tr.adm.unauthCount()
		if held != n {
			b.Fatalf("%d unauthenticated sockets held, want %d", held, n)
		}
		b.ReportMetric(float64(after.heap-before.heap+after.stack-before.stack)/n, "B/conn")
		b.ReportMetric(float64(after.rss-before.rss)/(1<<20), "rss-MiB/1000conns")
		b.ReportMetric(float64(after.heap+after.stack)/(1<<20), "heap+stack-MiB")
		for _, c := range conns {
			c.Close()
		}
		waitfor.True(b, time.Minute, func() bool { return tr.adm.unauthCount() == 0 }, "unauthenticated sockets still held a minute after their close")
	}
}

// BenchmarkIdleAuthConnMemory: heap, stacks and RSS per idle,
// authenticated, subscribed socket, each of its own account on a gated
// channel (the relay's membership records included).
func BenchmarkIdleAuthConnMemory(b *testing.B) {
	const n = 1000
	ms := NewMemberSet()
	const ch = "bench/idle/chan"
	toks := make([]string, n)
	for i := range n {
		sub := fmt.Sprintf("idle-%d", i)
		ms.Add(ch, sub)
		toks[i] = mint(b, sub, "")
	}
	tr := benchRelay(b, Config{NoSync: true, Members: ms})
	addr := strings.TrimPrefix(tr.URL, "http://")
	for range b.N {
		before := sampleMem()
		conns := make([]net.Conn, n)
		for i := range n {
			conns[i] = rawSubscriber(b, addr, "/ws/"+ch, toks[i])
		}
		time.Sleep(100 * time.Millisecond) // time passes: the sockets settle before the heap is read
		after := sampleMem()
		b.ReportMetric(float64(after.heap-before.heap+after.stack-before.stack)/n, "B/conn")
		b.ReportMetric(float64(after.rss-before.rss)/n, "rss-B/conn")
		for _, c := range conns {
			c.Close()
		}
	}
}
