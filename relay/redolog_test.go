package relay

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// copyFile copies src to dst; a missing src is skipped.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// snapshotDB copies the SQLite files of the archive at path (the state a
// crash of the process leaves: everything written is in the files) to
// dst.
func snapshotDB(t testing.TB, path, dst string) {
	t.Helper()
	for _, suffix := range []string{"", "-wal"} {
		copyFile(t, path+suffix, dst+suffix)
	}
}

// snapshotLog copies the redo log of the archive at path to dst's.
func snapshotLog(t testing.TB, path, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst+"-log", 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(path + "-log")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		copyFile(t, filepath.Join(path+"-log", e.Name()), filepath.Join(dst+"-log", e.Name()))
	}
}

// logSegments returns the segment files of the log at path, oldest first.
func logSegments(t testing.TB, path string) []string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(path+"-log", "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs)
	return segs
}

// recordSpans returns the offsets of the valid records at the start of
// a segment file, each with its end.
func recordSpans(t testing.TB, seg string) [][2]int64 {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var spans [][2]int64
	for off := int64(0); off+recHeader <= int64(len(b)); {
		n := int64(binary.LittleEndian.Uint32(b[off:]))
		if n < 9 || off+recHeader+n > int64(len(b)) {
			break
		}
		body := b[off+recHeader : off+recHeader+n]
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[off+4:]) {
			break
		}
		spans = append(spans, [2]int64{off, off + recHeader + n})
		off += recHeader + n
	}
	return spans
}

// countRows counts a channel's rows in the archive file at path.
func countRows(t testing.TB, path, channel string) int {
	t.Helper()
	db, err := sqlitedb.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM messages WHERE channel = ?`, channel).Scan(&n); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return n
}

// TestRedoLogTornTail is a power loss: SQLite lost its commits after a
// point (synchronous=NORMAL allows it), and the log's last record, one
// never acknowledged, is torn at every byte offset or has a byte flipped.
// Reopened, the archive holds every acknowledged entry under its seq (the
// log gives back what SQLite lost, the commit fence among them) and the
// unacknowledged one only when it is whole; it opens, and numbers go on
// above every seq handed out.
func TestRedoLogTornTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true})
	a := tr.arch.(*archive)
	gid := []byte("g")
	want := make(map[uint64][]byte)
	store := func(p []byte) {
		r := storeDirect(t, a, "alice", chA, p)
		if r.refused != nil {
			t.Fatalf("refused: %s", r.refused)
		}
		want[r.seq] = p
	}
	for i := range 5 {
		store(fmt.Appendf(nil, "before the snapshot %d", i))
	}
	base := filepath.Join(dir, "base.db")
	snapshotDB(t, path, base) // SQLite as the power loss leaves it
	if n := countRows(t, base, chA); n != 5 {
		t.Fatalf("the snapshot holds %d rows, want 5", n)
	}
	store(publicMessage(gid, 7, 3)) // sets the fence: epoch 8 next
	for i := range 5 {
		store(fmt.Appendf(nil, "after the snapshot %d", i))
	}
	unacked := []byte("the last record, never acknowledged")
	last := storeDirect(t, a, "alice", chA, unacked).seq
	delete(want, last)
	logCopy := filepath.Join(dir, "log.db")
	snapshotLog(t, path, logCopy)
	tr.stop(t)

	segs := logSegments(t, logCopy)
	seg := segs[len(segs)-1]
	spans := recordSpans(t, seg)
	rec := spans[len(spans)-1] // the unacknowledged entry's record
	orig, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, name string, mangle func(b []byte) []byte, whole bool) {
		t.Helper()
		d := filepath.Join(t.TempDir(), "relay.db")
		snapshotDB(t, base, d)
		snapshotLog(t, logCopy, d)
		if err := os.WriteFile(filepath.Join(d+"-log", filepath.Base(seg)), mangle(bytes.Clone(orig)), 0o600); err != nil {
			t.Fatal(err)
		}
		r := startRelay(t, Config{DBPath: d, NoSync: true})
		got := readChannel(t, r.URL, chA, mint(t, "reader", ""))
		for seq, p := range want {
			if !bytes.Equal(got[seq].payload, p) {
				t.Fatalf("%s: acknowledged seq %d is %q, want %q", name, seq, got[seq].payload, p)
			}
		}
		if _, ok := got[last]; ok != whole {
			t.Fatalf("%s: unacknowledged seq %d present %v, want %v", name, last, ok, whole)
		}
		if len(got) != len(want)+map[bool]int{true: 1}[whole] {
			t.Fatalf("%s: %d entries, want %d", name, len(got), len(want))
		}
		// The fence came back with the log: epoch 7 is stale now.
		ra := r.arch.(*archive)
		if q := storeDirect(t, ra, "alice", chA, publicMessage(gid, 7, 3)); q.refused == nil {
			t.Fatalf("%s: a commit for the fenced epoch was stored as seq %d", name, q.seq)
		}
		if q := storeDirect(t, ra, "alice", chA, []byte("after the restart")); q.seq <= last {
			t.Fatalf("%s: seq %d after the restart, not above %d", name, q.seq, last)
		}
		r.stop(t)
	}
	// Every offset takes a while; -short tries every fifth.
	step := int64(1)
	if testing.Short() {
		step = 5
	}
	for cut := rec[0]; cut < rec[1]; cut += step {
		// Torn in place: the segment's preallocated zeros after the cut.
		check(t, fmt.Sprintf("zeroed from %d", cut-rec[0]), func(b []byte) []byte {
			clear(b[cut:rec[1]])
			return b
		}, false)
		if cut%7 == 0 {
			// Cut short: the file ends there.
			check(t, fmt.Sprintf("truncated at %d", cut-rec[0]), func(b []byte) []byte { return b[:cut] }, false)
		}
	}
	for i := rec[0]; i < rec[1]; i += step {
		check(t, fmt.Sprintf("byte %d flipped", i-rec[0]), func(b []byte) []byte {
			b[i] ^= 0x40
			return b
		}, false)
	}
	check(t, "whole", func(b []byte) []byte { return b }, true)
}

// TestRedoLogNoResurrection: entries the cap evicted or the TTL swept are
// gone for good; the log still holding their records does not bring them
// back after a crash.
func TestRedoLogNoResurrection(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true, ArchiveCap: 4, ArchiveTTL: 300 * time.Millisecond})
	a := tr.arch.(*archive)
	for i := range 20 {
		storeDirect(t, a, "alice", chA, fmt.Appendf(nil, "entry %d", i))
	}
	// The sweep runs every TTL; it takes every row once they expire.
	deadline := time.Now().Add(10 * time.Second)
	for a.used("alice") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the TTL sweep left %d bytes", a.used("alice"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	crash := filepath.Join(dir, "crash.db")
	snapshotDB(t, path, crash)
	snapshotLog(t, path, crash)
	if n := len(recordSpans(t, logSegments(t, crash)[0])); n < 20 {
		t.Fatalf("the log holds %d records; the test needs the evicted entries' records", n)
	}
	tr.stop(t)

	r := startRelay(t, Config{DBPath: crash, NoSync: true, ArchiveCap: 4, ArchiveTTL: time.Hour})
	if got := readChannel(t, r.URL, chA, mint(t, "reader", "")); len(got) != 0 {
		t.Fatalf("swept entries came back: %d", len(got))
	}
	r.stop(t)
	if n := countRows(t, crash, chA); n != 0 {
		t.Fatalf("%d rows of swept entries are back in the archive", n)
	}

	// The cap alone: 20 entries, 4 kept, then a crash.
	path2 := filepath.Join(dir, "cap.db")
	tr2 := startRelay(t, Config{DBPath: path2, NoSync: true, ArchiveCap: 4})
	for i := range 20 {
		storeDirect(t, tr2.arch.(*archive), "alice", chA+"-cap", fmt.Appendf(nil, "entry %d", i))
	}
	crash2 := filepath.Join(dir, "crash2.db")
	snapshotDB(t, path2, crash2)
	snapshotLog(t, path2, crash2)
	tr2.stop(t)
	if n := countRows(t, crash2, chA+"-cap"); n > 4+1 {
		t.Fatalf("the crashed archive holds %d rows before reopening", n)
	}
	before := countRows(t, crash2, chA+"-cap")
	r2 := startRelay(t, Config{DBPath: crash2, NoSync: true, ArchiveCap: 4})
	got := readChannel(t, r2.URL, chA+"-cap", mint(t, "reader", ""))
	r2.stop(t)
	if len(got) != 4 {
		t.Fatalf("after the crash the channel serves %d entries, want the 4 newest", len(got))
	}
	for seq := range got {
		if seq <= 16 {
			t.Fatalf("evicted seq %d came back", seq)
		}
	}
	if n := countRows(t, crash2, chA+"-cap"); n > before {
		t.Fatalf("reopening brought rows back: %d, was %d", n, before)
	}
}

// TestRedoLogBounded: many MB of publishes through small segments leave
// at most two live segments and two spares, and a crash after them loses
// nothing.
func TestRedoLogBounded(t *testing.T) {
	testOnlySegmentSize = 256 << 10
	t.Cleanup(func() { testOnlySegmentSize = 0 })
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true, ArchiveCap: 100000})
	a := tr.arch.(*archive)
	payload := bytes.Repeat([]byte{7}, 4<<10)
	const n = 3000 // about 12 MB
	maxFiles := 0
	for i := range n {
		storeDirect(t, a, fmt.Sprintf("acct-%d", i%7), fmt.Sprintf("%s-%d", chA, i%3), payload)
		if i%100 == 0 {
			ents, err := os.ReadDir(path + "-log")
			if err != nil {
				t.Fatal(err)
			}
			maxFiles = max(maxFiles, len(ents))
		}
	}
	if maxFiles > 2+logSpares {
		t.Fatalf("the log reached %d files", maxFiles)
	}
	var size int64
	ents, _ := os.ReadDir(path + "-log")
	for _, e := range ents {
		info, _ := e.Info()
		size += info.Size()
	}
	if size > (2+logSpares)*testOnlySegmentSize {
		t.Fatalf("the log takes %d bytes after %d MB of publishes", size, n*len(payload)>>20)
	}
	crash := filepath.Join(dir, "crash.db")
	snapshotDB(t, path, crash)
	snapshotLog(t, path, crash)
	tr.stop(t)
	r := startRelay(t, Config{DBPath: crash, NoSync: true, ArchiveCap: 100000})
	total := 0
	for c := range 3 {
		total += len(readChannel(t, r.URL, fmt.Sprintf("%s-%d", chA, c), mint(t, "reader", "")))
	}
	if total != n {
		t.Fatalf("after the crash %d entries, want %d", total, n)
	}
}

// TestRedoLogExistingArchive: an archive from before the log (no log
// folder) opens, keeps its entries and gains a log that carries the next
// ones through a crash; a clean close leaves nothing to replay.
func TestRedoLogExistingArchive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	tr := startRelay(t, Config{DBPath: path, NoSync: true})
	storeDirect(t, tr.arch.(*archive), "alice", chA, []byte("old"))
	tr.stop(t)
	if err := os.RemoveAll(path + "-log"); err != nil {
		t.Fatal(err)
	}
	tr = startRelay(t, Config{DBPath: path, NoSync: true})
	if r := storeDirect(t, tr.arch.(*archive), "alice", chA, []byte("new")); r.seq != 2 {
		t.Fatalf("seq %d after reopening", r.seq)
	}
	base := filepath.Join(dir, "base.db")
	snapshotDB(t, path, base)
	storeDirect(t, tr.arch.(*archive), "alice", chA, []byte("logged"))
	snapshotLog(t, path, base)
	tr.stop(t)
	r := startRelay(t, Config{DBPath: base, NoSync: true})
	got := readChannel(t, r.URL, chA, mint(t, "reader", ""))
	if len(got) != 3 || string(got[3].payload) != "logged" {
		t.Fatalf("after the crash: %v", got)
	}
	r.stop(t)
	if !strings.HasSuffix(logSegments(t, base)[0], ".seg") {
		t.Fatal("no log segment")
	}
}

// TestRedoLogReplayKeepsCaps: entries the log gives back after a power
// loss are held to the caps as if their commits had not been lost (the
// handshake cap, which reads do not apply, and the application cap), and
// the account's usage counts only what is kept.
func TestRedoLogReplayKeepsCaps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "relay.db")
	cfg := Config{DBPath: path, NoSync: true, ArchiveCap: 4}
	tr := startRelay(t, cfg)
	a := tr.arch.(*archive)
	storeDirect(t, a, "alice", chA, []byte("first"))
	base := filepath.Join(dir, "base.db")
	snapshotDB(t, path, base)
	for range 10 {
		storeDirect(t, a, "alice", chA, welcome())
		storeDirect(t, a, "alice", chA, []byte("app entry"))
	}
	snapshotLog(t, path, base)
	tr.stop(t)

	cfg.DBPath = base
	r := startRelay(t, cfg)
	got := readChannel(t, r.URL, chA, mint(t, "reader", ""))
	var app, hs int
	for _, e := range got {
		if e.et == 0 {
			app++
		} else {
			hs++
		}
	}
	if app != 4 || hs != 4 {
		t.Fatalf("after the replay the channel serves %d app and %d handshake entries, cap 4", app, hs)
	}
	// Stored bytes count what the reads serve once the committer has
	// trimmed the channel (its next publish).
	storeDirect(t, r.arch.(*archive), "alice", chA, []byte("app entry"))
	if got, want := r.arch.used("alice"), int64(4*len(welcome())+4*len("app entry")); got != want {
		t.Fatalf("alice uses %d bytes after the replay, want %d", got, want)
	}
}

// TestRedoLogLargeRecord: a record larger than a segment (a 6 MiB entry
// against 1 MiB segments) gets a segment of its own, grown to fit, and the
// log reads back whole across it, records before and after included; a
// reopened log goes on after the last record.
func TestRedoLogLargeRecord(t *testing.T) {
	testOnlySegmentSize = 1 << 20
	t.Cleanup(func() { testOnlySegmentSize = 0 })
	dir := filepath.Join(t.TempDir(), "relay.db-log")
	none := func(*logRecord) error { t.Fatal("nothing to replay"); return nil }
	l, _, err := openRedoLog(dir, 0, true, none)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.start(); err != nil {
		t.Fatal(err)
	}
	st := &chanState{name: chA}
	big := bytes.Repeat([]byte{0x5a}, 6<<20)
	payloads := [][]byte{[]byte("before"), big, []byte("after"), big, []byte("last")}
	for i, p := range payloads {
		r := &pubReq{st: st, channel: chA, sub: "alice", payload: p, seq: uint64(i + 1), ts: int64(i)}
		if _, err := l.append([]*pubReq{r}, nil); err != nil {
			t.Fatal(err)
		}
		if err := l.wait(); err != nil {
			t.Fatal(err)
		}
	}
	l.close()
	var got [][]byte
	l, replayed, err := openRedoLog(dir, 0, true, func(r *logRecord) error {
		if r.kind != recEntry || r.seq != uint64(len(got)+1) || r.sub != "alice" || r.channel != chA {
			t.Fatalf("record %+v", r)
		}
		got = append(got, bytes.Clone(r.payload))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if replayed != uint64(len(payloads)) || len(got) != len(payloads) {
		t.Fatalf("replayed up to %d, %d records; want %d", replayed, len(got), len(payloads))
	}
	for i := range payloads {
		if !bytes.Equal(got[i], payloads[i]) {
			t.Fatalf("record %d: %d bytes back, want %d", i, len(got[i]), len(payloads[i]))
		}
	}
	if l.next != uint64(len(payloads))+1 {
		t.Fatalf("the reopened log goes on at %d", l.next)
	}
}
