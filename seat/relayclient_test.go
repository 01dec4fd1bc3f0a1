package seat_test

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	for name, c := range map[string]*seat.Conn{"publisher": publisher, "reader": reader, "busy": busy} {
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
