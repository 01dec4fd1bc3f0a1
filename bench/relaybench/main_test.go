package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skytale-oss/skytale/skytaletest"
)

// TestHistQuantiles: the histogram's percentiles are within its 3 % steps.
func TestHistQuantiles(t *testing.T) {
	var h hist
	for v := int64(1); v <= 100000; v++ {
		h.add(v * 1000)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := q * 1e8
		got := float64(h.quantile(q))
		if got < want*0.96 || got > want*1.01 {
			t.Errorf("p%v = %v, want about %v", q*100, got, want)
		}
	}
	for v := range int64(5000) {
		if lowOf(bucketOf(v)) > v || bucketOf(lowOf(bucketOf(v))) != bucketOf(v) {
			t.Fatalf("bucket of %d starts at %d", v, lowOf(bucketOf(v)))
		}
	}
}

// TestRunAgainstStack: every scenario runs against a real directory and
// relay over loopback sockets, with accounts from open signup.
func TestRunAgainstStack(t *testing.T) {
	st := skytaletest.NewStack(t)
	o := options{api: st.APIURL, relay: st.RelayURL, subs: []int{1, 3}, outstanding: 8, size: 1024,
		rounds: 1, round: 200 * time.Millisecond, batch: true, durable: []durableCase{{2, 4}, {1, 1}}, latency: true}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
}

// startNATS starts an in-process nats-server with JetStream on files in
// the test's folder.
func startNATS(t *testing.T) string {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	return ns.ClientURL()
}

// TestRunAgainstNATS: every scenario runs against a nats-server, fan-out
// and latency on core NATS, the durable cases (async with several in
// flight, synchronous with one) on JetStream file streams, which are
// deleted after the run.
func TestRunAgainstNATS(t *testing.T) {
	url := startNATS(t)
	o := options{targets: []string{"nats"}, nats: url, subs: []int{1, 3}, outstanding: 8, size: 1024,
		rounds: 1, round: 200 * time.Millisecond, durable: []durableCase{{2, 4}, {1, 1}}, latency: true}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	nc, err := natsConnect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for name := range js.StreamNames(t.Context()).Name() {
		t.Errorf("stream %s left behind", name)
	}
}

// TestNATSDurableAcksAreStored: an ack counted is a message the stream
// stored: the acks counted are at most the streams' last sequences.
func TestNATSDurableAcksAreStored(t *testing.T) {
	url := startNATS(t)
	o := options{nats: url, size: 64, round: 200 * time.Millisecond}
	for _, d := range []durableCase{{2, 4}, {1, 1}} {
		n, err := newNATS(t.Context(), o, d.conns)
		if err != nil {
			t.Fatal(err)
		}
		r, err := durable(t.Context(), bench{name: "nats", t: n}, o, d)
		if err != nil {
			n.close()
			t.Fatal(err)
		}
		js, _ := jetstream.New(n.ctl)
		var stored uint64
		for _, name := range n.streams {
			s, err := js.Stream(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			stored += s.CachedInfo().State.LastSeq
		}
		n.close()
		// The rate is over a little more than the round.
		if counted := r.rate * o.round.Seconds(); stored == 0 || counted > float64(stored) {
			t.Errorf("%dx%d: %d stored, about %.0f acks counted", d.conns, d.inflight, stored, counted)
		}
	}
}

// TestNATSWithoutJetStream: durable cases against a nats-server without
// JetStream fail at once with an error that says so; without them the run
// goes on.
func TestNATSWithoutJetStream(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	o := options{targets: []string{"nats"}, nats: ns.ClientURL(), subs: []int{2}, outstanding: 4, size: 64,
		rounds: 1, round: 100 * time.Millisecond, durable: []durableCase{{1, 1}}}
	if err := run(o); err == nil || !strings.Contains(err.Error(), "JetStream") {
		t.Fatalf("run = %v, want a JetStream error", err)
	}
	o.durable = nil
	if err := run(o); err != nil {
		t.Fatal(err)
	}
}

// TestNATSServerGone: a server that goes away in the middle of a fan-out
// ends the scenario with an error instead of leaving it waiting.
func TestNATSServerGone(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	o := options{nats: ns.ClientURL(), size: 64, round: time.Hour}
	n, err := newNATS(t.Context(), o, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer n.close()
	done := make(chan error, 1)
	go func() {
		_, err := fanout(t.Context(), n, o, 3, 8, 0)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // time passes: into the warm-up
	ns.Shutdown()
	if err := <-done; err == nil {
		t.Fatal("fan-out went on without its server")
	}
}

// TestCentrifugoSecret: the HMAC key comes from the configuration's
// client.token section; a configuration without one is refused.
func TestCentrifugoSecret(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"client":{"token":{"hmac_secret_key":"k3y"}}}`), 0o600)
	if s, err := centrifugoSecret(good); err != nil || string(s) != "k3y" {
		t.Errorf("secret = %q, %v", s, err)
	}
	for _, body := range []string{`{"client":{}}`, `{"token":{"hmac_secret_key":"k"}}`, `not json`} {
		bad := filepath.Join(dir, "bad.json")
		os.WriteFile(bad, []byte(body), 0o600)
		if _, err := centrifugoSecret(bad); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
	if _, err := centrifugoSecret(filepath.Join(dir, "absent.json")); err == nil {
		t.Error("an absent file: accepted")
	}
}

// startCentrifugo starts the centrifugo binary named by
// RELAYBENCH_CENTRIFUGO (or found on PATH) with a memory engine on a free
// loopback port, and returns its URL and configuration file; it skips the
// test without a binary.
func startCentrifugo(t *testing.T, publish bool) (url, config string) {
	t.Helper()
	bin := os.Getenv("RELAYBENCH_CENTRIFUGO")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("centrifugo"); err != nil {
			t.Skip("no centrifugo binary (set RELAYBENCH_CENTRIFUGO)")
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	config = filepath.Join(t.TempDir(), "centrifugo.json")
	body := fmt.Sprintf(`{"log":{"level":"error"},"http_server":{"address":"127.0.0.1","port":%d},"engine":{"type":"memory"},`+
		`"client":{"token":{"hmac_secret_key":"%x"}},`+
		`"channel":{"without_namespace":{"allow_subscribe_for_client":true,"allow_publish_for_client":%v}}}`, port, time.Now().UnixNano(), publish)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", config)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i == 200 {
			t.Fatalf("centrifugo does not listen on %s", addr)
		}
		time.Sleep(50 * time.Millisecond) // centrifugo is still starting: dial again (this module keeps off the library's internal helpers)
	}
	return "http://" + addr, config
}

// TestRunAgainstCentrifugo: fan-out and latency run against Centrifugo
// over its JSON protocol; the durable cases are left out, saying why. A
// token signed with another key is refused with Centrifugo's own error.
func TestRunAgainstCentrifugo(t *testing.T) {
	url, config := startCentrifugo(t, true)
	secret, err := centrifugoSecret(config)
	if err != nil {
		t.Fatal(err)
	}
	o := options{targets: []string{"centrifugo"}, centrifugo: url, centrifugoSecret: secret, subs: []int{1, 3}, outstanding: 8, size: 1024,
		rounds: 1, round: 200 * time.Millisecond, durable: []durableCase{{2, 4}}, latency: true}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	c, err := newCentrifugo(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.durables(t.Context(), 1, 1); !errors.Is(err, errNoDurable) {
		t.Errorf("durables = %v, want errNoDurable", err)
	}
	o.centrifugoSecret = []byte("another key")
	if err := run(o); err == nil || !strings.Contains(err.Error(), "centrifugo refused") {
		t.Errorf("run with a token of another key = %v", err)
	}
}

// TestRunTwoRelays: two skytale relays, named apart, run interleaved in
// one run, each with its own accounts.
func TestRunTwoRelays(t *testing.T) {
	a, b := skytaletest.NewStack(t), skytaletest.NewStack(t)
	o := options{api: a.APIURL, relay: a.RelayURL, targets: []string{"skytale", "before"},
		others: map[string]skytaleRelay{"before": {api: b.APIURL, relay: b.RelayURL}},
		subs:   []int{2}, outstanding: 8, size: 256, rounds: 2, round: 100 * time.Millisecond, batch: true,
		durable: []durableCase{{1, 2}}}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
}

// TestOthersFlag: -skytale takes NAME,API,RELAY[,DATA] and refuses
// anything else, a target's own name and a name given twice.
func TestOthersFlag(t *testing.T) {
	f := othersFlag{}
	if err := f.Set("before,http://a,http://r,/d"); err != nil {
		t.Fatal(err)
	}
	if got := f["before"]; got != (skytaleRelay{"http://a", "http://r", "/d"}) {
		t.Errorf("before = %+v", got)
	}
	for _, v := range []string{"", "x", "x,http://a", ",http://a,http://r", "x,,http://r", "x,a,r,d,e", "nats,http://a,http://r", "before,http://a,http://r"} {
		if err := f.Set(v); err == nil {
			t.Errorf("%q: accepted", v)
		}
	}
}

// TestCentrifugoPublishRefused: a server that refuses client publishes
// ends the fan-out with its refusal, not with a stall.
func TestCentrifugoPublishRefused(t *testing.T) {
	url, config := startCentrifugo(t, false)
	secret, err := centrifugoSecret(config)
	if err != nil {
		t.Fatal(err)
	}
	o := options{centrifugo: url, centrifugoSecret: secret, size: 64, round: time.Hour}
	c, err := newCentrifugo(o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fanout(t.Context(), c, o, 2, 4, 0); err == nil || !strings.Contains(err.Error(), "refused a publish") {
		t.Fatalf("fan-out = %v, want the refusal", err)
	}
}

type countedConn struct{ closed *atomic.Int64 }

func (c countedConn) close() { c.closed.Add(1) }

// TestOpenAllClosesOnError: when one connection of many cannot be opened,
// openAll returns its error and closes every one it did open.
func TestOpenAllClosesOnError(t *testing.T) {
	var opened, closed atomic.Int64
	_, err := openAll(40, func(i int) (countedConn, error) {
		if i == 17 {
			return countedConn{}, errors.New("refused")
		}
		opened.Add(1)
		return countedConn{&closed}, nil
	})
	if err == nil || err.Error() != "refused" {
		t.Fatalf("openAll: %v", err)
	}
	if opened.Load() != 39 || closed.Load() != 39 {
		t.Fatalf("%d opened, %d closed", opened.Load(), closed.Load())
	}
	conns, err := openAll(5, func(int) (countedConn, error) { return countedConn{&closed}, nil })
	if err != nil || len(conns) != 5 {
		t.Fatalf("openAll of 5: %d, %v", len(conns), err)
	}
}

// TestCountPushes: pushes packed in one message are counted, other lines
// are handed on.
func TestCountPushes(t *testing.T) {
	var other []string
	n := countPushes([]byte("P1\nx\nP2\n\nP3"), []byte("P"), []byte("none"), nil, func(l []byte) { other = append(other, string(l)) })
	if n != 3 || len(other) != 2 || other[0] != "x" || other[1] != "" {
		t.Fatalf("%d pushes, other lines %q", n, other)
	}
}

// TestStampedPayload checks that re-encoding only the stamped head gives
// the base64 of the whole payload, at sizes around the groups of three
// bytes base64 works in, and that the stamp reads back.
func TestStampedPayload(t *testing.T) {
	for _, size := range []int{16, 17, 18, 1024, 1025} {
		p := newStamped(size)
		for range 3 {
			b64 := p.stamp()
			if want := base64.StdEncoding.EncodeToString(p.payload); string(b64) != want {
				t.Fatalf("size %d: stamped base64 %q, want %q", size, b64, want)
			}
			dec, err := base64.StdEncoding.DecodeString(string(b64))
			if err != nil || !bytes.Equal(dec, p.payload) {
				t.Fatalf("size %d: decoded %x (%v)", size, dec, err)
			}
			if int64(binary.BigEndian.Uint64(dec)) == 0 {
				t.Fatalf("size %d: no stamp", size)
			}
		}
	}
}
