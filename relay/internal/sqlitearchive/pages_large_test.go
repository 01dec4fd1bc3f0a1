package sqlitearchive

import (
	"bytes"
	"encoding/base64"
	"path/filepath"
	"testing"
)

// TestPageCarriesLargeEntry: an entry larger than a page's byte bound (a
// 6 MiB commit against a relay's default 4 MiB) is served alone in its page,
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
			a := openTest(t, path, 10<<20)
			big := bytes.Repeat([]byte{0xa5}, 6<<20)
			if r := storeDirect(t, a, "alice", chA, big, commit(1)); r.refused != nil || r.seq != 1 {
				t.Fatalf("big entry: seq %d refused %s", r.seq, r.refused)
			}
			small := []byte("after the big one")
			if r := storeDirect(t, a, "alice", chA, small, app); r.refused != nil || r.seq != 2 {
				t.Fatalf("small entry: seq %d refused %s", r.seq, r.refused)
			}
			if got, want := a.Used("alice"), int64(len(big)+len(small)); got != want {
				t.Fatalf("alice uses %d bytes, want %d", got, want)
			}
			// The quota counts the big entry: another 6 MiB does not fit in 10.
			if r := storeDirect(t, a, "alice", chA, bytes.Repeat([]byte{1}, 6<<20), app); r.refused == nil {
				t.Fatalf("an entry past the quota was stored as seq %d", r.seq)
			}

			es, more := page(t, a, chA, 0, 4<<20)
			if len(es) != 1 || !more {
				t.Fatalf("first page: %d entries, has_more %v; want the big entry alone, has_more", len(es), more)
			}
			if p, _ := base64.StdEncoding.DecodeString(es[0].Payload); !bytes.Equal(p, big) || es[0].Seq != 1 {
				t.Fatalf("first page: seq %d, %d payload bytes; want seq 1, the big entry whole", es[0].Seq, len(p))
			}
			es, more = page(t, a, chA, 1, 4<<20)
			if len(es) != 1 || more || es[0].Seq != 2 {
				t.Fatalf("second page: %v, has_more %v", es, more)
			}
		})
	}
}
