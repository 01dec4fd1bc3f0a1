package seat_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/relay"
	"github.com/skytale-oss/skytale/seat"
)

// TestConnLargeHandshakePush: a 12 MiB Commit, as a 10,000-member
// post-quantum room with a sparse tree sends, pushed live over a seat's
// socket arrives whole, and the socket goes on carrying small messages.
// With the seat's old 4 MiB read limit the push ended the socket.
func TestConnLargeHandshakePush(t *testing.T) {
	if seat.MaxFrame != relay.MaxFrame {
		t.Fatalf("the seat reads frames of up to %d bytes, the relay sends up to %d", seat.MaxFrame, relay.MaxFrame)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const ch = "acme/ops/large"
	reader, pub := readerAndPublisher(t, ctx, ch)

	// A PrivateMessage (RFC 9420 §6.3) of content type commit for epoch 1:
	// version mls10, wire format 2, group_id, epoch, content_type 3.
	commit := []byte{0, 1, 0, 2, 5, 'g', 'r', 'o', 'u', 'p'}
	commit = binary.BigEndian.AppendUint64(commit, 1)
	commit = append(commit, 3)
	body := make([]byte, 12<<20-len(commit))
	rand.Read(body)
	commit = append(commit, body...)
	if _, err := pub.Publish(ctx, ch, commit); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(ctx, ch, []byte("after the commit")); err != nil {
		t.Fatal(err)
	}
	for _, want := range [][]byte{commit, []byte("after the commit")} {
		select {
		case p := <-reader.Pushes():
			if !bytes.Equal(p.Payload, want) {
				t.Fatalf("push of %d bytes, want %d", len(p.Payload), len(want))
			}
		case <-ctx.Done():
			t.Fatalf("no push of %d bytes: %v", len(want), reader.Err())
		}
	}
}
