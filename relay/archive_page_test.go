package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// getRaw returns the status and body of an authenticated GET.
func getRaw(t testing.TB, url, tok string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

type pageEntry struct {
	Seq     uint64 `json:"seq"`
	Payload []byte `json:"payload"`
}

type page struct {
	Entries  []pageEntry `json:"entries"`
	Messages []pageEntry `json:"messages"`
	HasMore  bool        `json:"has_more"`
}

// TestPageBytesBounded: a page is cut when the next entry would take its
// body past MaxPageBytes, says has_more, and the next page continues with
// exactly that entry; an entry larger than the bound comes alone.
func TestPageBytesBounded(t *testing.T) { forBackends(t, testPageBytesBounded) }

func testPageBytesBounded(t *testing.T, be *testBackend) {
	const maxPage = 10000
	tr := be.start(t, Config{NoSync: true, OpenChannels: true, MaxPageBytes: maxPage})
	tok := mint(t, "alice", "")
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	var want [][]byte
	for i := range 40 {
		size := 1000 + 37*i
		if i == 17 || i == 18 {
			size = 3 * maxPage // larger than a page
		}
		p := bytes.Repeat([]byte{byte(i)}, size)
		c.publishAck(chA, p)
		want = append(want, p)
	}
	for _, path := range []string{"/v1/sync", "/v1/messages"} {
		var got [][]byte
		since, pages, alone := uint64(0), 0, 0
		for {
			code, body := getRaw(t, fmt.Sprintf("%s%s?channel=%s&since_seq=%d&limit=500", tr.URL, path, chA, since), tok)
			if code != 200 {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			var pg page
			if err := json.Unmarshal(body, &pg); err != nil {
				t.Fatal(err)
			}
			entries := append(pg.Entries, pg.Messages...)
			pages++
			if len(entries) == 0 {
				t.Fatalf("%s: empty page after seq %d", path, since)
			}
			if len(entries) == 1 && len(body) > maxPage {
				alone++
			} else if len(body) > maxPage {
				t.Fatalf("%s: page of %d entries is %d bytes, over %d", path, len(entries), len(body), maxPage)
			}
			for _, e := range entries {
				if e.Seq != since+1 {
					t.Fatalf("%s: seq %d follows %d", path, e.Seq, since)
				}
				since = e.Seq
				got = append(got, e.Payload)
			}
			if !pg.HasMore {
				break
			}
			// The page was cut by bytes: the next entry would not fit.
			if int(since) < len(want) {
				next := base64.StdEncoding.EncodedLen(len(want[since])) + 40
				if len(entries) < 500 && len(body)+next <= maxPage {
					t.Fatalf("%s: page cut at %d bytes though the next entry fits", path, len(body))
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries over %d pages, want %d", path, len(got), pages, len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%s: entry %d differs", path, i+1)
			}
		}
		if alone != 2 || pages < 6 {
			t.Fatalf("%s: %d pages, %d oversized entries alone, want 2", path, pages, alone)
		}
	}
}

// TestPageShape: a small page is byte for byte what it always was, with
// truncated and oldest_seq after has_more.
func TestPageShape(t *testing.T) { forBackends(t, testPageShape) }

func testPageShape(t *testing.T, be *testBackend) {
	at := time.UnixMilli(1700000000123) // kept to the second: ts 1700000000000
	tr := be.start(t, Config{NoSync: true, OpenChannels: true, Now: func() time.Time { return at }})
	tok := mintAt(t, "alice", "", at)
	c := dialWS(t, tr.URL, "/ws/"+chA)
	c.auth(tok)
	c.publishAck(chA, []byte("one"))
	c.publishAck(chA, welcome())
	_, body := getRaw(t, tr.URL+"/v1/sync?channel="+chA, tok)
	want := `{"entries":[{"seq":1,"entry_type":0,"payload":"b25l","ts":1700000000000},` +
		`{"seq":2,"entry_type":2,"payload":"` + base64.StdEncoding.EncodeToString(welcome()) + `","ts":1700000000000}],"has_more":false,"truncated":false,"oldest_seq":1}` + "\n"
	if string(body) != want {
		t.Fatalf("sync body\n%s\nwant\n%s", body, want)
	}
	_, body = getRaw(t, tr.URL+"/v1/messages?channel="+chA+"&limit=1", tok)
	if want := `{"messages":[{"seq":1,"payload":"b25l","ts":1700000000000}],"has_more":false,"truncated":false,"oldest_seq":1}` + "\n"; string(body) != want {
		t.Fatalf("messages body\n%s\nwant\n%s", body, want)
	}
	_, body = getRaw(t, tr.URL+"/v1/sync?channel=acme/empty/chan", tok)
	if want := `{"entries":[],"has_more":false,"truncated":false,"oldest_seq":0}` + "\n"; string(body) != want {
		t.Fatalf("empty body %q", body)
	}
	_, body = getRaw(t, tr.URL+"/v1/sync?channel="+chA+"&limit=1", tok)
	if !strings.HasSuffix(string(body), `],"has_more":true,"truncated":false,"oldest_seq":1}`+"\n") {
		t.Fatalf("limited body %q", body)
	}
}

// seqScanner collects the seqs of a page body written through it, holding
// only a short tail of the body.
type seqScanner struct {
	tail, buf []byte
	seqs      []uint64
}

func (s *seqScanner) Write(p []byte) (int, error) {
	key := []byte(`{"seq":`)
	s.buf = append(append(s.buf[:0], s.tail...), p...)
	buf := s.buf
	keep := len(buf) - 64 // a key and its number fit in the tail
	for {
		i := bytes.Index(buf, key)
		if i < 0 || i > keep && keep >= 0 {
			break
		}
		j := i + len(key)
		var v uint64
		for ; j < len(buf) && buf[j] >= '0' && buf[j] <= '9'; j++ {
			v = v*10 + uint64(buf[j]-'0')
		}
		if j == len(buf) {
			break // the number may go on in the next write
		}
		s.seqs = append(s.seqs, v)
		buf = buf[j:]
		keep = len(buf) - 64
	}
	if len(buf) > 64 {
		buf = buf[len(buf)-64:]
	}
	s.tail = append(s.tail[:0], buf...)
	return len(p), nil
}

// BenchmarkSyncPageMemory measures the heap while 6 clients each read a
// channel of 500 entries of 1 MiB through /v1/sync, in maximal pages
// (limit 500), in parallel. It reports the peak heap in use above the
// heap before the reads (sampled every millisecond), in MB.
func BenchmarkSyncPageMemory(b *testing.B) {
	tr := benchRelay(b, Config{NoSync: true, OpenChannels: true, AccountQuota: 1 << 30})
	ch := "bench/page/big"
	tok := mint(b, "reader", "")
	c := benchDial(b, tr.URL, "/ws/"+ch, "pub")
	payload := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a}, MaxPayload))
	frame := []byte(`{"type":"publish","channel":"` + ch + `","payload":"` + payload + `"}`)
	ctx := context.Background()
	const entries = 500
	for range entries {
		if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
			b.Fatal(err)
		}
		if _, m, err := c.Read(ctx); err != nil || !bytes.Contains(m, []byte(`"published"`)) {
			b.Fatalf("publish: %s %v", m, err)
		}
	}
	payload, frame = "", nil
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	readAll := func() (int, error) {
		n, since := 0, uint64(0)
		for {
			req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/sync?channel=%s&since_seq=%d&limit=500", tr.URL, ch, since), nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil {
				return n, err
			}
			// Scan as a stream, so the client's own memory stays small.
			var sc seqScanner
			_, err = io.Copy(&sc, resp.Body)
			resp.Body.Close()
			if err != nil {
				return n, err
			}
			n += len(sc.seqs)
			if len(sc.seqs) > 0 {
				since = sc.seqs[len(sc.seqs)-1]
			}
			pg := struct{ HasMore bool }{bytes.HasSuffix(sc.tail, []byte(`"has_more":true}`+"\n"))}
			if !pg.HasMore {
				return n, nil
			}
		}
	}
	var peak atomic.Uint64
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		done := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > base {
						for {
							old := peak.Load()
							if ms.HeapInuse-base <= old || peak.CompareAndSwap(old, ms.HeapInuse-base) {
								break
							}
						}
					}
				}
			}
		})
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Go(func() {
				n, err := readAll()
				if err == nil && n != entries {
					err = fmt.Errorf("read %d entries, want %d", n, entries)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(done)
		sampler.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(peak.Load())/1e6, "peak-heap-MB")
	b.ReportMetric(0, "ns/op")
}
