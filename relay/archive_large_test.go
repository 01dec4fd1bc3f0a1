package relay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"testing"
)

// storeDirect stores one entry through the archive's pipeline, as a
// socket's publish does, and returns its request once answered and
// readable.
func storeDirect(t testing.TB, a *archive, sub, channel string, payload []byte) *pubReq {
	t.Helper()
	done := make(chan error, 1)
	r := &pubReq{sub: sub, channel: channel, payload: payload, hdr: classify(payload), done: done}
	a.submit(r)
	if err := <-done; err != nil {
		t.Fatalf("store: %v", err)
	}
	if err := a.waitVisible(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPageCarriesLargeEntry: an entry larger than a page's byte bound (a
// 6 MiB commit against the default 4 MiB) is served alone in its page,
// whole, with has_more when more follow, so catch-up never stops at it;
// the account's stored bytes and the quota count it like any other entry.
func TestPageCarriesLargeEntry(t *testing.T) {
	for _, path := range []string{"", "relay.db"} {
		name := "memory"
		if path != "" {
			name = "file"
			path = filepath.Join(t.TempDir(), path)
		}
		t.Run(name, func(t *testing.T) {
			tr := startRelay(t, Config{DBPath: path, NoSync: true, AccountQuota: 10 << 20})
			a := tr.arch.(*archive)
			big := publicMessage([]byte("g"), 1, 3)
			big = append(big, bytes.Repeat([]byte{0xa5}, 6<<20)...)
			if r := storeDirect(t, a, "alice", chA, big); r.refused != nil || r.seq != 1 {
				t.Fatalf("big entry: seq %d refused %s", r.seq, r.refused)
			}
			small := []byte("after the big one")
			if r := storeDirect(t, a, "alice", chA, small); r.refused != nil || r.seq != 2 {
				t.Fatalf("small entry: seq %d refused %s", r.seq, r.refused)
			}
			if got, want := a.used("alice"), int64(len(big)+len(small)); got != want {
				t.Fatalf("alice uses %d bytes, want %d", got, want)
			}
			// The quota counts the big entry: another 6 MiB does not fit in 10.
			if r := storeDirect(t, a, "alice", chA, bytes.Repeat([]byte{1}, 6<<20)); r.refused == nil {
				t.Fatalf("an entry past the quota was stored as seq %d", r.seq)
			}

			page := func(since uint64) (entries []map[string]any, more bool) {
				var buf bytes.Buffer
				if _, err := a.writePage(context.Background(), &buf, func() {}, chA, since, 100, DefaultMaxPageBytes, false); err != nil {
					t.Fatal(err)
				}
				var m struct {
					Entries []map[string]any `json:"entries"`
					HasMore bool             `json:"has_more"`
				}
				if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
					t.Fatal(err)
				}
				return m.Entries, m.HasMore
			}
			es, more := page(0)
			if len(es) != 1 || !more {
				t.Fatalf("first page: %d entries, has_more %v; want the big entry alone, has_more", len(es), more)
			}
			if p, _ := base64.StdEncoding.DecodeString(es[0]["payload"].(string)); !bytes.Equal(p, big) || es[0]["seq"].(float64) != 1 {
				t.Fatalf("first page: seq %v, %d payload bytes; want seq 1, the big entry whole", es[0]["seq"], len(p))
			}
			es, more = page(1)
			if len(es) != 1 || more || es[0]["seq"].(float64) != 2 {
				t.Fatalf("second page: %v, has_more %v", es, more)
			}
		})
	}
}
