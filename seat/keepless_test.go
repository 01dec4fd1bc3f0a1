package seat_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/waitfor"
	"github.com/skytale-oss/skytale/padding"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// busyStack runs a stack whose planes log to one buffer (at the debug
// level, below the default) and takes three people through sign-in, a
// room, a watch (subscribe), messages (publish), a removal and a sync
// push. It returns the log and what names the people: account ids,
// identities and the room's channel.
func busyStack(t *testing.T, logClients bool) (log string, names []string) {
	t.Helper()
	ctx := context.Background()
	lb := &logBuffer{}
	lg := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{Logger: lg, LogClients: logClients},
		Directory: skytale.DirectoryConfig{Logger: lg, LogClients: logClients},
	})
	alice, bob, carol, room := roomOfThree(t, st, "ops")
	w := startWatch(t, bob.Seat, room)
	w.connected(t)
	sendTo(t, alice, room, "hello")
	w.expectMsgs(t, "hello")
	sendTo(t, carol, room, "bye")
	w.expectMsgs(t, "bye")
	if err := removeFrom(alice, ctx, room, carol.did); err != nil {
		t.Fatal(err)
	}
	w.stop()
	if _, err := alice.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Add(ctx, "a note"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Push(ctx); err != nil {
		t.Fatal(err)
	}
	ch, err := alice.Room(room).Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sync, err := alice.SyncChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names = []string{ch, sync, "127.0.0.1"}
	for _, m := range []*member{alice, bob, carol} {
		names = append(names, m.acct.AccountID, m.did)
	}
	return lb.String(), names
}

// TestLogsNameNoOne: at the default setting neither plane's log (not even
// at the debug level) holds a client address, an account id, an identity
// or a channel name, though both planes logged the requests and
// connections; with LogClients the addresses and accounts are there.
func TestLogsNameNoOne(t *testing.T) {
	log, names := busyStack(t, false)
	if !strings.Contains(log, "relay: authenticated") || !strings.Contains(log, "/v1/channels/join") {
		t.Fatalf("the planes did not log the traffic:\n%s", log)
	}
	for _, n := range names {
		if strings.Contains(log, n) {
			t.Errorf("the log names %q:\n%s", n, grepLines(log, n))
		}
	}

	log, names = busyStack(t, true)
	for _, n := range []string{"127.0.0.1", names[3], names[0]} { // an address, alice's account, the room's channel
		if !strings.Contains(log, n) {
			t.Errorf("with LogClients the log does not name %q", n)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	if len(out) > 5 {
		out = out[:5]
	}
	return strings.Join(out, "\n")
}

// TestDeviceOfferIsPadded: the device offers a second device publishes in
// its person's rooms are stored at a bucket length, like every other
// payload, not at the KeyPackage's own length.
func TestDeviceOfferIsPadded(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice, _, room := roomOfTwo(t, st, "ops")
	ch, err := alice.Room(room).Channel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, res := secondDevice(t, st, alice); len(res.Offered) != 1 {
		t.Fatalf("offered %+v", res)
	}
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return st.Token(t, alice.acct.APIKey), nil }}
	offers := 0
	if _, err := rc.SyncAll(ctx, ch, 0, func(e seat.RelayEntry) error {
		p := e.Payload
		switch {
		case bytes.HasPrefix(p, []byte("SKD1")):
			t.Errorf("an offer of %d bytes is stored unpadded", len(p))
		case len(p) > 8 && string(p[4:8]) == "SKD1":
			offers++
			if !padding.Valid(len(p)) {
				t.Errorf("an offer is stored at %d bytes, not a bucket length", len(p))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if offers == 0 {
		t.Error("no device offer in the room's channel")
	}
}

// countIn counts the occurrences of each needle in the files under dir,
// once every SQLite WAL there has been checkpointed away (the planes
// checkpoint every few milliseconds here), and in log.
func countIn(t *testing.T, dir, log string, needles []string) []int {
	t.Helper()
	waitfor.True(t, 15*time.Second, func() bool {
		wal := false
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, "-wal") {
				if fi, err := d.Info(); err == nil && fi.Size() > 0 {
					wal = true
				}
			}
			return nil
		})
		return !wal
	}, "the WAL files were not checkpointed")
	counts := make([]int, len(needles))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, n := range needles {
			counts[i] += bytes.Count(b, []byte(n))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range needles {
		counts[i] += strings.Count(log, n)
	}
	return counts
}

// TestNoSenderPerEntry: what the servers keep (every file of both planes,
// the archive's log segments included, and their logs) names a member the
// same number of times after the member sent 2 messages and after 12:
// nothing is stored per entry that says who sent it. That holds for the
// room's owner, whose channel pays for the entries, and for a member.
func TestNoSenderPerEntry(t *testing.T) {
	dir := t.TempDir()
	lb := &logBuffer{}
	lg := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{DBPath: filepath.Join(dir, "relay.db"), Logger: lg, CheckpointInterval: 10 * time.Millisecond},
		Directory: skytale.DirectoryConfig{DBPath: filepath.Join(dir, "directory.db"), Logger: lg, CheckpointInterval: 10 * time.Millisecond},
	})
	alice, bob, room := roomOfTwo(t, st, "ops")
	for _, m := range []*member{alice, bob} {
		needles := []string{m.acct.AccountID, m.did}
		send := func(n int) {
			for i := range n {
				sendTo(t, m, room, fmt.Sprintf("message %d", i))
			}
		}
		send(2)
		after2 := countIn(t, dir, lb.String(), needles)
		send(10)
		after12 := countIn(t, dir, lb.String(), needles)
		if !slices.Equal(after2, after12) {
			t.Errorf("%s's account id and identity are in the servers' files %v times after 2 messages, %v after 12", m.did, after2, after12)
		}
	}
}

// TestOneShotSendLooksLikeCover plays the classifier that told one-shot
// sends from cover: it matches each archived entry to the connection that
// carried it, by that connection's lifetime and the requests before it (a
// token, a read of the log). While a watch of the home runs, sends from
// another handle of the home (another process, as tally msg is) open no
// connection and make no request: they leave on the watch's connection,
// among its cover frames, so the classifier has nothing to tell them
// apart by. The other member reads them.
func TestOneShotSendLooksLikeCover(t *testing.T) {
	ctx := context.Background()
	lb := &logBuffer{}
	lg := slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := skytaletest.NewStackWith(t, skytaletest.Options{
		Relay:     skytale.RelayConfig{Logger: lg},
		Directory: skytale.DirectoryConfig{Logger: lg},
	})
	alice, bob, room := roomOfTwo(t, st, "ops")
	watcher, err := seat.Open(ctx, seat.Config{Home: alice.home, APIURL: st.APIURL, RelayURL: st.RelayURL, Cover: cover.Config{MeanInterval: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close(context.Background()) })
	w := startWatch(t, watcher, room)
	w.connected(t)
	time.Sleep(100 * time.Millisecond) // time passes: a few cover frames go out at the 20 ms mean interval
	counts := func() map[string]int {
		l := lb.String()
		return map[string]int{
			"relay connections": strings.Count(l, "relay: connection opened"),
			"relay requests":    strings.Count(l, "relay: request"),
			"tokens":            strings.Count(l, "path=/v1/tokens"),
		}
	}
	before := counts()
	for i := range 3 {
		sendTo(t, alice, room, fmt.Sprintf("one-shot %d", i)) // alice's own handle: another process of the home
	}
	if after := counts(); !maps.Equal(before, after) {
		t.Fatalf("the one-shot sends were seen apart from the watch: before %v, after %v", before, after)
	}
	expect(t, "bob", received(t, bob, room), "one-shot 0", "one-shot 1", "one-shot 2")
	w.stop()
	// With no watch, a send goes out on its own again.
	sendTo(t, alice, room, "alone")
	expect(t, "bob", received(t, bob, room), "alone")
}
