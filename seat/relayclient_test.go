package seat_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/skytale-oss/skytale"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestConnUnreadPushes: a busy channel must not stall a connection whose
// pushes nobody reads. A publisher's requests are still answered, and
// Close returns.
func TestConnUnreadPushes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := skytaletest.NewStack(t)
	a := st.NewAccount(t, "acme")
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return st.Token(t, a.APIKey), nil }}
	const ch = "acme/ops/busy"
	// The relay carries a channel for its members: the owner is one.
	if err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey}).RegisterChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}

	publisher, err := rc.DialPublisher(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := rc.Dial(ctx) // subscribed, never reads its pushes
	if err != nil {
		t.Fatal(err)
	}
	if err := reader.Subscribe(ctx, ch); err != nil {
		t.Fatal(err)
	}
	busy, err := rc.DialPublisher(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	const n = 600 // well past the 256-push queue
	for i := 0; i < n; i++ {
		if _, err := busy.Publish(ctx, ch, []byte(fmt.Sprint("chatter ", i))); err != nil {
			t.Fatal(err)
		}
	}
	if seq, err := publisher.Publish(ctx, ch, []byte("mine")); err != nil || seq != n+1 {
		t.Fatalf("publish on a busy channel: seq %d, %v", seq, err)
	}
	for name, c := range map[string]interface{ Close() error }{"publisher": publisher, "reader": reader, "busy": busy} {
		done := make(chan struct{})
		go func() { c.Close(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("%s: Close hung with unread pushes", name)
		}
	}
}

// TestSyncPageTruncated: SyncPage says when the relay's cap has pushed out
// entries after since, and which seq the channel's log starts at.
func TestSyncPageTruncated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := skytaletest.NewStackWith(t, skytaletest.Options{Relay: skytale.RelayConfig{ArchiveCap: 3}})
	a := st.NewAccount(t, "acme")
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return st.Token(t, a.APIKey), nil }}
	const ch = "acme/ops/capped"
	if err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey}).RegisterChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}
	// Nothing yet: not truncated, nothing held.
	pg, err := rc.SyncPage(ctx, ch, 0, 0)
	if err != nil || pg.Truncated || pg.OldestSeq != 0 || len(pg.Entries) != 0 || pg.HasMore {
		t.Fatalf("empty channel: %+v, %v", pg, err)
	}
	pub, err := rc.DialPublisher(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	var seqs []uint64
	for i := range 6 {
		seq, err := pub.Publish(ctx, ch, []byte(fmt.Sprint("m", i)))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	pg, err = rc.SyncPage(ctx, ch, 0, 2)
	if err != nil || !pg.Truncated || pg.OldestSeq != seqs[3] || !pg.HasMore || len(pg.Entries) != 2 || pg.Entries[0].Seq != seqs[3] {
		t.Fatalf("from 0 after the cap: %+v, %v", pg, err)
	}
	pg, err = rc.SyncPage(ctx, ch, seqs[2], 0)
	if err != nil || pg.Truncated || pg.OldestSeq != seqs[3] || len(pg.Entries) != 3 {
		t.Fatalf("from the last entry dropped: %+v, %v", pg, err)
	}
	// Sync keeps its answer.
	entries, more, err := rc.Sync(ctx, ch, seqs[2], 0)
	if err != nil || more || len(entries) != 3 {
		t.Fatalf("Sync: %d entries, more %v, %v", len(entries), more, err)
	}
}

// readerAndPublisher registers ch for a new account on a new stack and
// opens two of its connections: one subscribed to ch, one publishing on
// it. Both close when the test ends.
func readerAndPublisher(t *testing.T, ctx context.Context, ch string) (reader *seat.Conn, pub *seat.Publisher) {
	t.Helper()
	st := skytaletest.NewStack(t)
	a := st.NewAccount(t, "acme")
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return st.Token(t, a.APIKey), nil }}
	if err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey}).RegisterChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}
	reader, err := rc.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reader.Close() })
	if err := reader.Subscribe(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if pub, err = rc.DialPublisher(ctx, ch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	return reader, pub
}

// TestConnBatchedPushesInOrder: a connection (which asks the relay for
// batched pushes) gets every message of a busy channel once, in seq
// order, whether the relay packed them or not.
func TestConnBatchedPushesInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ch = "acme/ops/batched"
	reader, pub := readerAndPublisher(t, ctx, ch)
	const workers, each = 8, 150
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				if _, err := pub.Publish(ctx, ch, []byte(fmt.Sprint(w, "/", i))); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var last uint64
	for n := 0; n < workers*each; n++ {
		select {
		case p, ok := <-reader.Pushes():
			if !ok {
				t.Fatalf("pushes ended after %d: %v", n, reader.Err())
			}
			if p.Seq <= last || p.Channel != ch {
				t.Fatalf("push %d: seq %d after %d on %q", n, p.Seq, last, p.Channel)
			}
			last = p.Seq
		case <-ctx.Done():
			t.Fatalf("%d of %d pushes", n, workers*each)
		}
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// hostileRelay is a WebSocket peer that answers the auth frame and then
// sends whatever message the test gives it, then closes.
type hostileRelay struct {
	mu  sync.Mutex
	msg []byte
	srv *httptest.Server
}

func newHostileRelay(t testing.TB) *hostileRelay {
	h := &hostileRelay{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		if _, _, err := ws.Read(ctx); err != nil {
			return
		}
		h.mu.Lock()
		msg := h.msg
		h.mu.Unlock()
		ws.Write(ctx, websocket.MessageText, []byte(`{"type":"ok","message":"authenticated"}`))
		ws.Write(ctx, websocket.MessageText, msg)
		ws.Close(websocket.StatusNormalClosure, "")
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// refPushes is what a reader of the relay's documented framing makes of a
// message: its parts split at "\n", each a JSON object; it stops at the
// first part that is not (or that ends the connection). A part is read
// with every field a relay frame has, each of its type: a frame whose
// "message" is a number, say, is unreadable, whatever its type says.
func refPushes(b []byte) []seat.Push {
	var out []seat.Push
	for _, part := range bytes.Split(b, []byte("\n")) {
		var f struct {
			Type      string `json:"type"`
			Token     string `json:"token"`
			Channel   string `json:"channel"`
			Payload   string `json:"payload"`
			Message   string `json:"message"`
			Code      string `json:"code"`
			Seq       uint64 `json:"seq"`
			EntryType int    `json:"entry_type"`
			TS        int64  `json:"ts"`
			Epoch     uint64 `json:"epoch"`
			Batch     bool   `json:"batch"`
		}
		if len(part) == 0 || json.Unmarshal(part, &f) != nil {
			return out
		}
		switch f.Type {
		case "message":
			p, err := base64.StdEncoding.DecodeString(f.Payload)
			if err != nil {
				return out
			}
			out = append(out, seat.Push{Channel: f.Channel, RelayEntry: seat.RelayEntry{Seq: f.Seq, EntryType: f.EntryType, Payload: p, TS: f.TS}})
		case "error":
			return out // nobody waits for an answer: the connection ends
		}
	}
	return out
}

// FuzzConnBatchSplit feeds a connection arbitrary relay messages over a
// real socket: it never panics, and the pushes it delivers are exactly
// those of the documented framing (frames split at "\n").
func FuzzConnBatchSplit(f *testing.F) {
	push := func(seq int) string {
		return fmt.Sprintf(`{"type":"message","channel":"a/b/c","payload":"AAE=","seq":%d,"entry_type":0,"ts":5}`, seq)
	}
	for _, s := range []string{
		push(1), push(1) + "\n" + push(2), push(1) + "\n\n" + push(2), push(1) + "\n", "\n" + push(1),
		push(1) + "\n" + `{"type":"ok","message":"published","seq":3}` + "\n" + push(4),
		push(1) + "\n" + `{"type":"error","code":"x","message":"y"}` + "\n" + push(2),
		push(1) + "\n{", `{"type":"message","payload":"!!"}`, "", "\r\n", push(1) + "\r\n" + push(2),
	} {
		f.Add([]byte(s))
	}
	h := newHostileRelay(f)
	rc := &seat.RelayClient{BaseURL: h.srv.URL, Token: func(context.Context) (string, error) { return "not.a.jwt", nil }}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) > 1<<16 {
			return
		}
		h.mu.Lock()
		h.msg = msg
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := rc.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []seat.Push
		for p := range c.Pushes() {
			got = append(got, p)
		}
		c.Close()
		want := refPushes(msg)
		if len(got) != len(want) {
			t.Fatalf("%q: %d pushes, want %d", msg, len(got), len(want))
		}
		for i := range want {
			if got[i].Seq != want[i].Seq || got[i].Channel != want[i].Channel || !bytes.Equal(got[i].Payload, want[i].Payload) ||
				got[i].TS != want[i].TS || got[i].EntryType != want[i].EntryType {
				t.Fatalf("%q: push %d is %+v, want %+v", msg, i, got[i], want[i])
			}
		}
	})
}

// TestConnEvictedTryAgainLater: a relay that is full closes the socket
// idle longest with 1013; the connection's error (and the error frame
// before it, when a request is in flight) is ErrTryAgainLater, which a
// watch backs off on and reconnects after.
func TestConnEvictedTryAgainLater(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := skytaletest.NewStackWith(t, skytaletest.Options{Relay: skytale.RelayConfig{MaxConns: 4, MaxUnauthConns: 1}})
	a := st.NewAccount(t, "acme")
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return st.Token(t, a.APIKey), nil }}
	var conns []*seat.Conn
	for range 4 { // three seats for authenticated sockets
		c, err := rc.Dial(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for range conns[0].Pushes() {
	}
	if err := conns[0].Err(); !errors.Is(err, seat.ErrTryAgainLater) {
		t.Fatalf("the idle socket's end: %v, want ErrTryAgainLater", err)
	}
	if !errors.Is(&seat.FrameError{Code: "evicted"}, seat.ErrTryAgainLater) || errors.Is(&seat.FrameError{Code: "forbidden"}, seat.ErrTryAgainLater) {
		t.Fatal("error frames match ErrTryAgainLater wrongly")
	}
}
