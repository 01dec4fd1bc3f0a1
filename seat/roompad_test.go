package seat_test

import (
	"context"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/padding"
	"github.com/skytale-oss/skytale/seat"
	"github.com/skytale-oss/skytale/skytaletest"
)

// TestRoomMessagesPadded checks the relay's view of room messages: texts
// of different lengths within one padding bucket are the same number of
// bytes on the relay, and each bucket's messages are that bucket's size
// plus one fixed overhead.
func TestRoomMessagesPadded(t *testing.T) {
	ctx := context.Background()
	st := skytaletest.NewStack(t)
	alice := newMember(t, st, "acme")
	room, err := alice.Room("pad").Create(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two texts per bucket: one short, one near the top.
	buckets := padding.Buckets()[:5]
	var lens []int
	for i, b := range buckets {
		lo := 1
		if i > 0 {
			lo = buckets[i-1]
		}
		lens = append(lens, lo, b-110)
	}
	seqLen := map[uint64]int{}
	for _, n := range lens {
		seq, err := alice.Room(room).Send(ctx, strings.Repeat("x", n))
		if err != nil {
			t.Fatal(err)
		}
		seqLen[seq] = n
	}
	tok := st.Token(t, alice.acct.APIKey)
	rc := &seat.RelayClient{BaseURL: st.RelayURL, Token: func(context.Context) (string, error) { return tok, nil }}
	onRelay := map[int]int{} // text length → payload length
	if _, err := rc.SyncAll(ctx, room, 0, func(e seat.RelayEntry) error {
		if n, ok := seqLen[e.Seq]; ok {
			if e.EntryType != seat.EntryApp {
				t.Errorf("message of %d bytes filed as entry type %v", n, e.EntryType)
			}
			onRelay[n] = len(e.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(onRelay) != len(lens) {
		t.Fatalf("found %d of %d messages on the relay", len(onRelay), len(lens))
	}
	overhead := onRelay[lens[0]] - buckets[0]
	for i, b := range buckets {
		short, long := onRelay[lens[2*i]], onRelay[lens[2*i+1]]
		if short != long {
			t.Errorf("bucket %d: texts of %d and %d bytes are %d and %d bytes on the relay", b, lens[2*i], lens[2*i+1], short, long)
		}
		if short-b != overhead {
			t.Errorf("bucket %d: %d bytes on the relay, want %d", b, short, b+overhead)
		}
	}
	t.Logf("PrivateMessage overhead over the padded block: %d bytes", overhead)
}
