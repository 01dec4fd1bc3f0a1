package relay

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrashChild is the relay process TestKillDurability kills. It only
// runs when started by that test.
func TestCrashChild(t *testing.T) {
	path := os.Getenv("RELAY_CRASH_DB")
	if path == "" {
		t.Skip("run by TestKillDurability")
	}
	s, err := New(Config{DBPath: path, JWTSecret: testSecret})
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

// TestKillDurability publishes to a relay in a child process, kills it
// with SIGKILL while publishes are in flight, reopens the archive and
// checks that every acknowledged publish is there under the seq it was
// acknowledged with, and that no seq a subscriber saw is handed out again.
func TestKillDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "relay.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), "RELAY_CRASH_DB="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		t.Fatalf("child: %q %v", line, err)
	}
	base := strings.TrimSpace(strings.TrimPrefix(line, "listening "))

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

	tr := startRelay(t, Config{DBPath: path, NoSync: true})
	tok := mint(t, "reader", "")
	got := make(map[uint64][]byte)
	since := uint64(0)
	for {
		_, m := httpGet(t, fmt.Sprintf("%s/v1/sync?channel=%s&since_seq=%d&limit=500", tr.URL, chA, since), tok)
		for _, e := range m["entries"].([]any) {
			e := e.(map[string]any)
			since = uint64(e["seq"].(float64))
			p, _ := base64.StdEncoding.DecodeString(e["payload"].(string))
			got[since] = p
		}
		if m["has_more"] != true {
			break
		}
	}
	for seq, p := range acked {
		if !bytes.Equal(got[seq], p) {
			t.Fatalf("acknowledged seq %d: archive has %q, want %q", seq, got[seq], p)
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
