package relay

import (
	"context"
	"testing"
	"time"
)

// TestEntryTimesAreCoarse: the archive keeps each entry's time rounded
// down to TimeGranularity (one second by default, at most a second), in
// what it serves and pushes; entries published within one second keep
// their order by seq. A coarser grain is refused.
func TestEntryTimesAreCoarse(t *testing.T) { forBackends(t, testEntryTimesAreCoarse) }

func testEntryTimesAreCoarse(t *testing.T, be *testBackend) {
	at := time.UnixMilli(1_800_000_047_123)
	for _, c := range []struct {
		granularity time.Duration
		want        int64
	}{
		{0, 1_800_000_047_000},
		{100 * time.Millisecond, 1_800_000_047_100},
		{time.Millisecond, 1_800_000_047_123},
	} {
		tr := be.start(t, Config{NoSync: true, OpenChannels: true, TimeGranularity: c.granularity, Now: func() time.Time { return at }})
		pub := dialWS(t, tr.URL, "/ws/"+chA)
		pub.auth(mintAt(t, "alice", "", at))
		sub := dialWS(t, tr.URL, "/ws/"+chA)
		sub.auth(mintAt(t, "bob", "", at))
		sub.subscribe(chA)
		s1 := pub.publishAck(chA, []byte("one"))
		s2 := pub.publishAck(chA, []byte("two"))
		if s2 <= s1 {
			t.Fatalf("seqs %d then %d", s1, s2)
		}
		for _, s := range []uint64{s1, s2} {
			m := sub.expect(map[string]any{"type": "message", "seq": s})
			if ts := int64(m["ts"].(float64)); ts != c.want {
				t.Fatalf("granularity %v: pushed ts %d, want %d", c.granularity, ts, c.want)
			}
		}
		_, m := httpGet(t, tr.URL+"/v1/sync?channel="+chA, mintAt(t, "alice", "", at))
		for _, e := range m["entries"].([]any) {
			if ts := int64(e.(map[string]any)["ts"].(float64)); ts != c.want {
				t.Fatalf("granularity %v: stored ts %d, want %d", c.granularity, ts, c.want)
			}
		}
		pub.c.CloseNow()
		sub.c.CloseNow()
		tr.stop(t)
	}
	if _, err := New(context.Background(), Config{NoSync: true, TimeGranularity: time.Minute}); err == nil {
		t.Fatal("a minute's TimeGranularity was taken")
	}
}
