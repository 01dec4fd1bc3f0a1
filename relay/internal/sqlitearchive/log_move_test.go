package sqlitearchive

import (
	"bytes"
	"context"
	"database/sql"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

// TestMovePageBounded: a page of moves holds at most movePageBytes of
// payloads (up to the row that reaches it), not compactPage rows of
// whatever size: its rows are read before their moves go to the logger,
// and a page of the largest handshakes would be gigabytes. Every entry
// is still moved, page after page, and served whole.
func TestMovePageBounded(t *testing.T) {
	a := openTest(t, filepath.Join(t.TempDir(), "relay.db"), 0)
	const size = 512 << 10
	perPage := movePageBytes / size
	n := 2*perPage + 3 // three pages by bytes, one by rows
	stored := map[uint64][]byte{}
	for i := range n {
		p := bytes.Repeat([]byte{byte(i)}, size)
		stored[storeDirect(t, a, "alice", chLog, p, app).seq] = p
	}
	before := places(t, a)

	// The entries' rows, paged like moveSegment's, from whatever
	// segment each is in (the compactor leaves a log this small alone).
	after := int64(0)
	scan := func(rows *sql.Rows, r *pubReq) (bool, error) {
		var seg uint64
		var at int64
		if err := rows.Scan(&after, &r.channel, &r.seq, &r.hdr.entryType, &r.ts, &seg, &at, &r.size); err != nil {
			return false, err
		}
		f, err := a.seglog.File(seg)
		if err != nil {
			return false, err
		}
		r.from, r.payload = seglog.Pos{Seg: seg, Off: at}, make([]byte, r.size)
		_, err = f.ReadAt(r.payload, at)
		return err == nil, err
	}
	var pages []int
	for {
		read, moved, err := a.movePage(`SELECT id, channel, seq, entry_type, ts, seg, at, size FROM messages
			WHERE channel = ? AND id > ? ORDER BY id LIMIT ?`, []any{chLog, after}, scan)
		if err != nil {
			t.Fatal(err)
		}
		if read == 0 {
			break
		}
		if moved != read {
			t.Fatalf("a page moved %d of its %d rows", moved, read)
		}
		pages = append(pages, read)
		if len(pages) > n {
			t.Fatal("the pages do not end")
		}
	}
	if want := []int{perPage, perPage, 3}; !slices.Equal(pages, want) {
		t.Fatalf("pages of %v rows of %d KiB, want %v (%d MiB a page)", pages, size>>10, want, movePageBytes>>20)
	}
	if err := a.WaitVisible(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, a, chLog); !maps.EqualFunc(got, stored, bytes.Equal) {
		t.Fatalf("%d entries served after the moves, %d stored, or not the same", len(got), len(stored))
	}
	if now := places(t, a); len(now) != n || len(now) != len(before) {
		t.Fatalf("%d entries' rows after the moves, %d before, want %d", len(now), len(before), n)
	} else {
		for seq, at := range before {
			if now[seq] == at {
				t.Fatalf("entry %d still at %v", seq, at)
			}
		}
	}
}

// places returns where each chLog entry's payload is in the log, by seq.
func places(t *testing.T, a *Archive) map[int64]seglog.Pos {
	t.Helper()
	rows, err := a.db.Query(`SELECT seq, seg, at FROM messages WHERE channel = ?`, chLog)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := make(map[int64]seglog.Pos)
	for rows.Next() {
		var seq, seg, at int64
		if err := rows.Scan(&seq, &seg, &at); err != nil {
			t.Fatal(err)
		}
		m[seq] = seglog.Pos{Seg: uint64(seg), Off: at}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}
