package seat_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// ackDropper stands in front of a real relay and loses the answer to the
// first publish it stored: the relay's acknowledgement never leaves, and
// the socket closes instead, as when a network path or a relay node dies
// between storing an entry and answering.
type ackDropper struct {
	h       http.Handler
	dropped atomic.Int32
	// refuse, when set, answers the first stored publish with an
	// "internal" error frame instead of closing the socket: the relay
	// stored the entry but said it could not (a JetStream timeout after
	// the store, say).
	refuse bool
}

func (d *ackDropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.h.ServeHTTP(&dropWriter{ResponseWriter: w, d: d}, r)
}

type dropWriter struct {
	http.ResponseWriter
	d *ackDropper
}

func (w *dropWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		c.Close()
		return nil, nil, err
	}
	dc := &dropConn{Conn: c, d: w.d}
	return dc, bufio.NewReadWriter(brw.Reader, bufio.NewWriter(dc)), nil
}

type dropConn struct {
	net.Conn
	d *ackDropper
}

func (c *dropConn) Write(b []byte) (int, error) {
	// Server frames are not masked, and the seat asks for no
	// compression: the acknowledgement's JSON is in the bytes.
	if bytes.Contains(b, []byte(`"message":"published"`)) && c.d.dropped.CompareAndSwap(0, 1) {
		if c.d.refuse {
			if _, err := c.Conn.Write(textFrame(`{"type":"error","code":"internal","message":"could not store"}`)); err != nil {
				return 0, err
			}
			return len(b), nil
		}
		c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

// textFrame is one unmasked WebSocket text frame (a server's) of s, which
// is shorter than 126 bytes.
func textFrame(s string) []byte { return append([]byte{0x81, byte(len(s))}, s...) }

// TestPublishRetryAfterLostAnswer: a publish whose acknowledgement is lost
// (the relay stored the entry, then the socket closed) is sent again with
// the same id on a new connection, and the relay acknowledges it with the
// first seq: the caller gets its seq, and the channel holds the entry once.
func TestPublishRetryAfterLostAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := skytaletest.NewStack(t)
	a := st.NewAccount(t, "acme")
	const ch = "acme/ops/lost-ack"
	if err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey}).RegisterChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}
	d := &ackDropper{h: st.Relay}
	front := httptest.NewServer(d)
	defer front.Close()
	tok := func(context.Context) (string, error) { return st.Token(t, a.APIKey), nil }
	rc := &seat.RelayClient{BaseURL: front.URL, Token: tok}

	pub, err := rc.DialPublisher(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	seq, err := pub.Publish(ctx, ch, []byte("exactly once"))
	if err != nil {
		t.Fatalf("publish whose first answer was lost: %v", err)
	}
	if d.dropped.Load() != 1 {
		t.Fatal("the first answer was not dropped: the test proves nothing")
	}
	// The connection still publishes after its reconnect.
	seq2, err := pub.Publish(ctx, ch, []byte("next"))
	if err != nil || seq2 <= seq {
		t.Fatalf("publish after the reconnect: seq %d (first %d), %v", seq2, seq, err)
	}
	checkOnce(ctx, t, &seat.RelayClient{BaseURL: st.RelayURL, Token: tok}, ch, seq, seq2)
}

// checkOnce checks that ch holds the retried entry once, at seq, then the
// next one at seq2.
func checkOnce(ctx context.Context, t *testing.T, rc *seat.RelayClient, ch string, seq, seq2 uint64) {
	t.Helper()
	entries, _, err := rc.Sync(ctx, ch, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Seq != seq || string(entries[0].Payload) != "exactly once" || entries[1].Seq != seq2 {
		t.Fatalf("channel holds %d entries, want the retried one once at seq %d then seq %d: %+v", len(entries), seq, seq2, entries)
	}
}

// TestPublishRetryAfterInternal: a publish the relay stored but answered
// "internal" (it could not tell it had stored it) is sent again with the
// same id, on the same connection, and acknowledged with the first seq:
// the caller gets that seq and the channel holds the entry once. Both a
// [seat.Publisher] and a bare connection's Publish retry.
func TestPublishRetryAfterInternal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := skytaletest.NewStack(t)
	a := st.NewAccount(t, "acme")
	tok := func(context.Context) (string, error) { return st.Token(t, a.APIKey), nil }
	for _, via := range []string{"publisher", "conn"} {
		t.Run(via, func(t *testing.T) {
			ch := "acme/ops/refused-" + via
			if err := (&seat.DirectoryClient{BaseURL: st.APIURL, Credential: a.APIKey}).RegisterChannel(ctx, ch); err != nil {
				t.Fatal(err)
			}
			d := &ackDropper{h: st.Relay, refuse: true}
			front := httptest.NewServer(d)
			defer front.Close()
			rc := &seat.RelayClient{BaseURL: front.URL, Token: tok}
			var publish func(ctx context.Context, ch string, p []byte) (uint64, error)
			if via == "publisher" {
				pub, err := rc.DialPublisher(ctx, ch)
				if err != nil {
					t.Fatal(err)
				}
				defer pub.Close()
				publish = pub.Publish
			} else {
				conn, err := rc.Dial(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if err := conn.Subscribe(ctx, ch); err != nil {
					t.Fatal(err)
				}
				publish = conn.Publish
			}
			seq, err := publish(ctx, ch, []byte("exactly once"))
			if err != nil {
				t.Fatalf("publish answered internal once: %v", err)
			}
			if d.dropped.Load() != 1 {
				t.Fatal("no answer was turned into internal: the test proves nothing")
			}
			seq2, err := publish(ctx, ch, []byte("next"))
			if err != nil || seq2 <= seq {
				t.Fatalf("publish after the retry: seq %d (first %d), %v", seq2, seq, err)
			}
			checkOnce(ctx, t, &seat.RelayClient{BaseURL: st.RelayURL, Token: tok}, ch, seq, seq2)
		})
	}
}
