package seat_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/skytale-oss/skytale"
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
	if err := alice.RoomRemove(ctx, room, carol.did); err != nil {
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
	ch, err := alice.RoomChannel(ctx, room)
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
	ch, err := alice.RoomChannel(ctx, room)
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
