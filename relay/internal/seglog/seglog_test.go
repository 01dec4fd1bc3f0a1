package seglog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skytale-oss/skytale/internal/filedamage"
)

// chanA is a channel's name as the relay's are.
const chanA = "acme/payments/agent-v1"

// sampleRecords are records as the archive writes them, and the edge
// cases of the layout: empty names and payloads, every flag, extreme
// values of the fixed fields.
func sampleRecords() []Record {
	return []Record{
		{Kind: KindEntry, EntryType: 0, Seq: 1, TS: 1700000000000, Channel: chanA, Sub: "alice", Payload: []byte("ciphertext")},
		{Kind: KindEntry, Flags: FlagDirty | FlagHasEpoch, EntryType: 1, Seq: 2, TS: 1700000000001, Reserved: 1026, Epoch: 4,
			Channel: chanA, Sub: "bob", Payload: []byte("a commit")},
		{Kind: KindEntry, Flags: FlagDirty, EntryType: 2, Seq: 3, Reserved: 1027, Channel: "c", Sub: "s", Payload: []byte("a welcome")},
		{Kind: KindChan, Flags: FlagDirty | FlagHasEpoch, Reserved: 1024, Epoch: 7, Channel: chanA},
		{Kind: KindEntry},
		{Kind: KindChan},
		{Kind: KindEntry, EntryType: 0xff, Seq: ^uint64(0), TS: -1, Reserved: ^uint64(0), Epoch: ^uint64(0), Channel: "x", Payload: []byte{0}},
		{Kind: KindEntry, Seq: 9, Channel: strings.Repeat("c", 0xffff), Sub: strings.Repeat("s", 0xffff), Payload: bytes.Repeat([]byte{0xa5}, 3000)},
	}
}

func encodeRecord(t testing.TB, seg uint64, r *Record) []byte {
	t.Helper()
	b, _, err := AppendRecord(nil, Seed(seg), r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sameRecord(a, b *Record) bool {
	return a.Kind == b.Kind && a.Flags == b.Flags && a.EntryType == b.EntryType && a.Seq == b.Seq && a.TS == b.TS &&
		a.Reserved == b.Reserved && a.Epoch == b.Epoch && a.Channel == b.Channel && a.Sub == b.Sub && bytes.Equal(a.Payload, b.Payload)
}

// FuzzDecodeLogRecord: whatever bytes a damaged log holds, decoding them
// never panics, and what decodes is exactly what appendRecord writes: the
// same bytes back, with the payload where appendRecord puts it.
func FuzzDecodeLogRecord(f *testing.F) {
	for i, r := range sampleRecords() {
		seg := uint64(i + 1)
		b, _, err := AppendRecord(nil, Seed(seg), &r)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 8192 {
			b = b[:8192] // a record cut short
		}
		f.Add(b, seg)
		f.Add(b, seg+1)
	}
	f.Add([]byte{}, uint64(0))
	f.Add(make([]byte, HeaderSize+recFixed), uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, seg uint64) {
		seed := Seed(seg)
		r, err := DecodeRecord(b, seed)
		if err != nil {
			return
		}
		if n, ok := recordLen(b); !ok || n != len(b) {
			t.Fatalf("decoded a record of %d bytes whose header says %d (%v)", len(b), n, ok)
		}
		out, at, err := AppendRecord(nil, seed, &r)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("decoded record encodes to\n%x\nnot\n%x", out, b)
		}
		if at != len(b)-len(r.Payload) || !bytes.Equal(b[at:], r.Payload) {
			t.Fatalf("payload at %d of %d bytes, %d long", at, len(b), len(r.Payload))
		}
		if RecordSize(&r) != len(b) {
			t.Fatalf("recordSize %d, encoding %d", RecordSize(&r), len(b))
		}
	})
}

// FuzzSegLogScan: a segment file of any bytes (records of this segment
// and of others, cut and damaged anywhere) scans without a panic to the
// records up to its first bad one: each one decodes where the scan found
// it, they follow one another from the start, and the scan ends where
// the last one ends.
func FuzzSegLogScan(f *testing.F) {
	var run []byte
	for i, r := range sampleRecords()[:7] {
		seg := uint64(7)
		if i == 5 {
			seg = 6 // a record of another segment, as a recycled file holds
		}
		b, _, _ := AppendRecord(nil, Seed(seg), &r)
		run = append(run, b...)
		f.Add(slices.Clone(run))
	}
	f.Add(append(slices.Clone(run[:100]), make([]byte, 64)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, file []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, Name(7)), file, 0o600); err != nil {
			t.Fatal(err)
		}
		l, _, err := Open(dir, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		off := int64(0)
		end, err := l.Scan(7, 0, func(r *Record, at int64) error {
			n, ok := recordLen(file[off:])
			if !ok || at != off+int64(n-len(r.Payload)) {
				t.Fatalf("record at %d: payload at %d, length %d (%v)", off, at, n, ok)
			}
			got, err := DecodeRecord(file[off:off+int64(n)], Seed(7))
			if err != nil || !sameRecord(&got, r) {
				t.Fatalf("record at %d does not decode as the scan returned it: %v", off, err)
			}
			off += int64(n)
			return nil
		})
		if err != nil || end != off {
			t.Fatalf("scan ended at %d (%v), its records at %d", end, err, off)
		}
		// Nothing after the end decodes as the next record.
		if n, ok := recordLen(slices.Concat(file[end:min(int64(len(file)), end+HeaderSize)], make([]byte, HeaderSize))); ok && end+int64(n) <= int64(len(file)) {
			if _, err := DecodeRecord(file[end:end+int64(n)], Seed(7)); err == nil {
				t.Fatalf("the scan stopped at %d before a good record", end)
			}
		}
	})
}

// TestLogRecordRoundTrip: every sample decodes back to itself for its
// segment, the payload offset points at the payload, records append one
// after the other, and a name too long for the layout is refused.
func TestLogRecordRoundTrip(t *testing.T) {
	var all []byte
	var starts []int
	for i, r := range sampleRecords() {
		b := encodeRecord(t, 5, &r)
		if len(b) != RecordSize(&r) {
			t.Fatalf("record %d: %d bytes, recordSize says %d", i, len(b), RecordSize(&r))
		}
		got, err := DecodeRecord(b, Seed(5))
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !sameRecord(&got, &r) {
			t.Fatalf("record %d decodes as %+v", i, got)
		}
		// Appended after other bytes, the offset is still relative to
		// the record.
		prefix := []byte("some earlier records")
		out, at, err := AppendRecord(slices.Clone(prefix), Seed(5), &r)
		if err != nil || !bytes.Equal(out[:len(prefix)], prefix) || !bytes.Equal(out[len(prefix):], b) {
			t.Fatalf("record %d appended after a prefix: %v", i, err)
		}
		if !bytes.Equal(b[at:], r.Payload) || at != len(b)-len(r.Payload) {
			t.Fatalf("record %d: payload offset %d", i, at)
		}
		starts = append(starts, len(all))
		all = append(all, b...)
	}
	// Records decode one after the other from their lengths.
	for i, off := range starts {
		n, ok := recordLen(all[off:])
		if !ok {
			t.Fatalf("record %d: bad length", i)
		}
		if _, err := DecodeRecord(all[off:off+n], Seed(5)); err != nil {
			t.Fatalf("record %d in a run: %v", i, err)
		}
	}

	// The longest names fit; one byte more is refused and appends nothing.
	long := strings.Repeat("n", 0xffff+1)
	for _, r := range []Record{{Kind: KindEntry, Channel: long}, {Kind: KindEntry, Sub: long}} {
		out, _, err := AppendRecord([]byte("keep"), Seed(1), &r)
		if err == nil {
			t.Fatalf("a name of %d bytes was encoded", len(long))
		}
		if string(out) != "keep" {
			t.Fatalf("a refused record changed the buffer: %d bytes", len(out))
		}
	}

	// The largest record the archive can write, a handshake payload of
	// MaxPayload with the longest names, reads back.
	if !testing.Short() {
		r := Record{Kind: KindEntry, EntryType: 1, Channel: strings.Repeat("c", 0xffff), Sub: strings.Repeat("s", 0xffff),
			Payload: bytes.Repeat([]byte{7}, MaxPayload)}
		b := encodeRecord(t, 2, &r)
		if got, err := DecodeRecord(b, Seed(2)); err != nil || !sameRecord(&got, &r) {
			t.Fatalf("largest record: %v", err)
		}
	}

	// Too short, or a length that disagrees with the bytes.
	b := encodeRecord(t, 5, &Record{Kind: KindEntry, Payload: []byte("p")})
	for _, cut := range [][]byte{nil, b[:HeaderSize], b[:HeaderSize+recFixed], b[:len(b)-1], append(slices.Clone(b), 0)} {
		if _, err := DecodeRecord(cut, Seed(5)); err == nil {
			t.Fatalf("%d bytes of a %d-byte record decode", len(cut), len(b))
		}
	}
}

// TestLogRecordBitFlips: no single flipped bit of a record, anywhere in
// it, decodes; and no record decodes as one of another segment.
func TestLogRecordBitFlips(t *testing.T) {
	for i, r := range sampleRecords()[:7] {
		b := encodeRecord(t, 3, &r)
		for bit := range 8 * len(b) {
			d := slices.Clone(b)
			d[bit/8] ^= 1 << (bit % 8)
			if got, err := DecodeRecord(d, Seed(3)); err == nil {
				t.Fatalf("record %d with bit %d flipped decodes as %+v", i, bit, got)
			}
		}
		for _, seg := range []uint64{0, 1, 2, 4, 1 << 32, 3 | 1<<63, ^uint64(0)} {
			if _, err := DecodeRecord(b, Seed(seg)); err == nil {
				t.Fatalf("record %d of segment 3 decodes as one of segment %d", i, seg)
			}
		}
	}
	// The bytes the checksum does not fix are checked too: a kind, flags
	// or reserved byte the layout does not know, and names longer than the
	// body, with a checksum that matches.
	base := encodeRecord(t, 3, &Record{Kind: KindEntry, Channel: "ch", Sub: "s", Payload: []byte("p")})
	reseal := func(b []byte) []byte {
		binary.LittleEndian.PutUint32(b, crcOf(Seed(3), b[4:]))
		return b
	}
	for name, edit := range map[string]func(b []byte){
		"kind 0":       func(b []byte) { b[HeaderSize] = 0 },
		"kind 3":       func(b []byte) { b[HeaderSize] = 3 },
		"unknown flag": func(b []byte) { b[HeaderSize+1] = 0x80 },
		"nonzero pad":  func(b []byte) { b[HeaderSize+3] = 1 },
		"channel too long": func(b []byte) {
			binary.LittleEndian.PutUint16(b[HeaderSize+36:], 5)
		},
		"sub too long": func(b []byte) { binary.LittleEndian.PutUint16(b[HeaderSize+38:], 0xffff) },
	} {
		d := slices.Clone(base)
		edit(d)
		if _, err := DecodeRecord(reseal(d), Seed(3)); err == nil {
			t.Fatalf("%s: decodes", name)
		}
	}
	// The lengths that bound the body: below the fixed part, above the
	// largest record.
	for _, n := range []uint32{0, recFixed - 1, maxRecordBody + 1, ^uint32(0)} {
		h := make([]byte, HeaderSize)
		binary.LittleEndian.PutUint32(h[4:], n)
		if _, ok := recordLen(h); ok {
			t.Fatalf("body length %d accepted", n)
		}
	}
}

func crcOf(seed uint32, b []byte) uint32 { return crc32.Update(seed, castagnoli, b) }

// testLog is a segment log in a test's directory.
type testLog struct {
	*Log
	t   *testing.T
	dir string
}

// openTestLog opens a log whose segments grow to maxSeg bytes (0 for the
// default).
func openTestLog(t *testing.T, dir string, sync bool, maxSeg int64) *testLog {
	t.Helper()
	l, _, err := Open(dir, sync, maxSeg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return &testLog{l, t, dir}
}

// loggedRec is a record written to the log and where it went.
type loggedRec struct {
	rec  Record
	off  int64 // the record's start
	at   int64 // its payload's
	size int
}

// write appends one batch of records, through room and append as the
// logger does, and returns them with their places.
func (l *testLog) write(recs ...Record) []loggedRec {
	l.t.Helper()
	n := 0
	for i := range recs {
		n += RecordSize(&recs[i])
	}
	seed, err := l.Room(n)
	if err != nil {
		l.t.Fatal(err)
	}
	var buf []byte
	var out []loggedRec
	for _, r := range recs {
		start := len(buf)
		var rel int
		if buf, rel, err = AppendRecord(buf, seed, &r); err != nil {
			l.t.Fatal(err)
		}
		out = append(out, loggedRec{rec: r, off: int64(start), at: int64(start + rel), size: len(buf) - start})
	}
	at := l.End()
	if err := l.Append(buf); err != nil {
		l.t.Fatal(err)
	}
	for i := range out {
		out[i].off += at.Off
		out[i].at += at.Off
	}
	return out
}

func (l *testLog) path(seg uint64) string { return filepath.Join(l.dir, Name(seg)) }

// entries returns n records of a channel, seqs from first, payloads of
// size bytes each distinct.
func entries(first uint64, n, size int) []Record {
	var out []Record
	for i := range n {
		seq := first + uint64(i)
		p := bytes.Repeat([]byte{byte(seq)}, size)
		copy(p, fmt.Sprintf("entry %d|", seq))
		out = append(out, Record{Kind: KindEntry, Seq: seq, TS: int64(seq), Channel: chanA, Sub: "alice", Payload: p})
	}
	return out
}

// scanAll reads a segment from off as a restart would: through a new log
// of the directory.
func scanAll(t *testing.T, dir string, seg uint64, off int64) ([]loggedRec, int64) {
	t.Helper()
	l, _, err := Open(dir, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.File(seg)
	if err != nil {
		t.Fatal(err)
	}
	var got []loggedRec
	end, err := l.Scan(seg, off, func(r *Record, at int64) error {
		// The payload aliases the scan's buffer: keep a copy, and check
		// that at is where the file holds it.
		c := *r
		c.Payload = slices.Clone(r.Payload)
		onDisk := make([]byte, len(c.Payload))
		if _, err := f.ReadAt(onDisk, at); err != nil || !bytes.Equal(onDisk, c.Payload) {
			t.Fatalf("seq %d: the file at %d does not hold its payload (%v)", r.Seq, at, err)
		}
		got = append(got, loggedRec{rec: c, at: at})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, end
}

// checkScan checks that a scan returned exactly want, in order, and ended
// at end.
func checkScan(t *testing.T, got []loggedRec, gotEnd int64, want []loggedRec, end int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("scan returned %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameRecord(&got[i].rec, &want[i].rec) || got[i].at != want[i].at {
			t.Fatalf("record %d: got seq %d at %d, want seq %d at %d", i, got[i].rec.Seq, got[i].at, want[i].rec.Seq, want[i].at)
		}
	}
	if gotEnd != end {
		t.Fatalf("scan ends at %d, want %d", gotEnd, end)
	}
}

// TestSegLogTornTail writes batches to a segment, damages the file the
// ways a crash or a bad disk can, and checks that a scan returns exactly
// the records before the damage and ends where they end.
func TestSegLogTornTail(t *testing.T) {
	const seg = 1
	// write fills a new log: three batches, the last of varied records.
	write := func(t *testing.T) (string, []loggedRec) {
		dir := t.TempDir()
		l := openTestLog(t, dir, true, 0)
		if err := l.StartSegment(seg); err != nil {
			t.Fatal(err)
		}
		var recs []loggedRec
		recs = append(recs, l.write(entries(1, 5, 300)...)...)
		recs = append(recs, l.write(entries(6, 1, 0)...)...)
		recs = append(recs, l.write(sampleRecords()[:4]...)...)
		recs = append(recs, l.write(entries(100, 3, 2000)...)...)
		if end := l.End(); end != (Pos{seg, recs[len(recs)-1].off + int64(recs[len(recs)-1].size)}) {
			t.Fatalf("log end %v after the records", end)
		}
		l.Close()
		return dir, recs
	}
	endOf := func(r loggedRec) int64 { return r.off + int64(r.size) }
	type damage struct {
		name string
		// hit damages the file; it returns how many records are left
		// intact before the damage.
		hit func(t *testing.T, path string, recs []loggedRec) int
	}
	cases := []damage{
		{"intact", func(t *testing.T, path string, recs []loggedRec) int { return len(recs) }},
		{"truncated in a payload", func(t *testing.T, path string, recs []loggedRec) int {
			k := len(recs) - 1
			filedamage.Truncate(t, path, recs[k].at+10)
			return k
		}},
		{"truncated in a header", func(t *testing.T, path string, recs []loggedRec) int {
			k := len(recs) - 2
			filedamage.Truncate(t, path, recs[k].off+5)
			return k
		}},
		{"truncated at a record's end", func(t *testing.T, path string, recs []loggedRec) int {
			filedamage.Truncate(t, path, endOf(recs[3]))
			return 4
		}},
		{"truncated to nothing", func(t *testing.T, path string, recs []loggedRec) int {
			filedamage.Truncate(t, path, 0)
			return 0
		}},
		{"last byte cut", func(t *testing.T, path string, recs []loggedRec) int {
			filedamage.Truncate(t, path, endOf(recs[len(recs)-1])-1)
			return len(recs) - 1
		}},
		{"part of a record zeroed", func(t *testing.T, path string, recs []loggedRec) int {
			k := len(recs) - 3
			filedamage.WriteAt(t, path, make([]byte, 40), recs[k].off+20)
			return k
		}},
		{"whole record zeroed, later ones intact", func(t *testing.T, path string, recs []loggedRec) int {
			filedamage.WriteAt(t, path, make([]byte, recs[2].size), recs[2].off)
			return 2
		}},
		{"payload byte flipped", func(t *testing.T, path string, recs []loggedRec) int {
			k := len(recs) - 1
			filedamage.FlipAt(t, path, recs[k].at+int64(len(recs[k].rec.Payload))-1)
			return k
		}},
		{"first record's checksum flipped", func(t *testing.T, path string, recs []loggedRec) int {
			filedamage.FlipAt(t, path, 0)
			return 0
		}},
		{"length made huge", func(t *testing.T, path string, recs []loggedRec) int {
			b := binary.LittleEndian.AppendUint32(nil, maxRecordBody+1)
			filedamage.WriteAt(t, path, b, recs[1].off+4)
			return 1
		}},
		{"length pointing past the file", func(t *testing.T, path string, recs []loggedRec) int {
			k := len(recs) - 1
			b := binary.LittleEndian.AppendUint32(nil, uint32(firstSegment))
			filedamage.WriteAt(t, path, b, recs[k].off+4)
			return k
		}},
		{"length pointing into the next record", func(t *testing.T, path string, recs []loggedRec) int {
			b := binary.LittleEndian.AppendUint32(nil, uint32(recs[0].size+recs[1].size-HeaderSize))
			filedamage.WriteAt(t, path, b, recs[0].off+4)
			return 0
		}},
		{"garbage after the end", func(t *testing.T, path string, recs []loggedRec) int {
			g := make([]byte, 4096)
			for i := range g {
				g[i] = byte(i*7 + 3)
			}
			filedamage.WriteAt(t, path, g, endOf(recs[len(recs)-1]))
			return len(recs)
		}},
		{"a plausible header after the end", func(t *testing.T, path string, recs []loggedRec) int {
			// A record of this segment, but its checksum over other bytes.
			r := recs[0]
			b := encodeRecord(t, seg, &r.rec)
			b[len(b)-1] ^= 0x40
			filedamage.WriteAt(t, path, b, endOf(recs[len(recs)-1]))
			return len(recs)
		}},
		{"past the end of the file", func(t *testing.T, path string, recs []loggedRec) int {
			// A record that ends at the file's end, with nothing after.
			filedamage.Truncate(t, path, endOf(recs[len(recs)-1]))
			return len(recs)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, recs := write(t)
			k := c.hit(t, filepath.Join(dir, Name(seg)), recs)
			got, end := scanAll(t, dir, seg, 0)
			want := recs[:k]
			wantEnd := int64(0)
			if k > 0 {
				wantEnd = endOf(recs[k-1])
			}
			checkScan(t, got, end, want, wantEnd)
			// A scan from a record's start, as an open from the applied
			// position, returns the same records from there.
			if k >= 2 {
				got, end := scanAll(t, dir, seg, recs[1].off)
				checkScan(t, got, end, want[1:], wantEnd)
			}
			// From the end nothing more is read.
			got, end = scanAll(t, dir, seg, wantEnd)
			checkScan(t, got, end, nil, wantEnd)
		})
	}
}

// TestSegLogScanStops: an error from the callback stops the scan and is
// returned, with the offset of the record it refused.
func TestSegLogScanStops(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, false, 0)
	if err := l.StartSegment(1); err != nil {
		t.Fatal(err)
	}
	recs := l.write(entries(1, 4, 10)...)
	stop := fmt.Errorf("stop")
	n := 0
	end, err := l.Scan(1, 0, func(r *Record, at int64) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || end != recs[2].off {
		t.Fatalf("scan stopped at %d with %v, want %d and the callback's error", end, err, recs[2].off)
	}
	if _, err := l.Scan(99, 0, func(*Record, int64) error { return nil }); err == nil {
		t.Fatal("a scan of a segment that does not exist succeeded")
	}
}

// TestSegLogRotation: a batch that does not fit moves the log to the next
// segment, prepared at twice the size; a batch never spans two segments;
// a batch larger than a whole segment goes into one by itself.
func TestSegLogRotation(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, false, 0)
	if err := l.StartSegment(1); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(l.path(1)); err != nil || fi.Size() != firstSegment {
		t.Fatalf("first segment: %v, %v bytes", err, fi)
	}
	var bySeg = map[uint64][]loggedRec{}
	for i := range 20 {
		before := l.End()
		recs := l.write(entries(uint64(1+100*i), 100, 2000)...) // ~200 KiB a batch
		seg := l.End().Seg
		if seg != before.Seg && recs[0].off != 0 {
			t.Fatalf("batch %d began at %d of segment %d after a rotation", i, recs[0].off, seg)
		}
		bySeg[seg] = append(bySeg[seg], recs...)
	}
	segs := l.List()
	if len(segs) < 3 {
		t.Fatalf("segments %v after 4 MB", segs)
	}
	for i, seg := range segs {
		fi, err := os.Stat(l.path(seg))
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(firstSegment) << i; fi.Size() != want {
			t.Fatalf("segment %d: %d bytes, want %d", seg, fi.Size(), want)
		}
	}
	// A batch larger than the current segment's room, then one larger
	// than a whole segment: each starts a segment, and the second runs
	// past the prepared size.
	big := entries(5000, 1, firstSegment*4)
	recs := l.write(big...)
	if recs[0].off != 0 {
		t.Fatalf("a batch larger than the segment's room began at %d", recs[0].off)
	}
	bySeg[l.End().Seg] = append(bySeg[l.End().Seg], recs...)
	for seg, want := range bySeg {
		got, end := scanAll(t, dir, seg, 0)
		last := want[len(want)-1]
		checkScan(t, got, end, want, last.off+int64(last.size))
	}
}

// TestSegLogRecycledFile reuses the file of a removed segment for a new
// segment that holds fewer records: the new segment's scan returns its
// own records only, though the file still holds the old ones after them,
// aligned to the same offsets.
func TestSegLogRecycledFile(t *testing.T) {
	for _, aligned := range []bool{true, false} {
		t.Run(fmt.Sprintf("aligned=%v", aligned), func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, false, 0)
			if err := l.StartSegment(1); err != nil {
				t.Fatal(err)
			}
			old := l.write(entries(1, 40, 500)...)
			oldEnd := l.End().Off
			moveTo := func(want uint64, sp spareSeg) {
				t.Helper()
				if sp.err != nil {
					t.Fatal(sp.err)
				}
				if sp.seg != want {
					t.Fatalf("prepared segment %d, want %d", sp.seg, want)
				}
				l.use(sp)
			}
			// Segment 2 takes over; the spare prepared with it is not
			// used, so that the next segment is the recycled file.
			moveTo(2, takeSpare(l))
			l.write(entries(41, 2, 10)...)
			if sp := takeSpare(l); sp.err == nil {
				sp.f.Close()
				os.Remove(sp.f.Name())
			}
			l.spare = nil
			l.Drop(1)
			if _, err := os.Stat(l.path(1)); err != nil || len(l.free) != 1 {
				t.Fatalf("segment 1 dropped: %v, free list %v", err, l.free)
			}
			sp := l.prepare(3, firstSegment*8)
			if sp.err != nil {
				t.Fatal(sp.err)
			}
			if sp.size != firstSegment {
				t.Fatalf("recycled file prepared at %d bytes, want its own %d", sp.size, firstSegment)
			}
			if _, err := os.Stat(l.path(1)); !os.IsNotExist(err) {
				t.Fatalf("segment 1's file still under its name after reuse: %v", err)
			}
			moveTo(3, sp)
			// Fewer records than the old segment held: the same sizes
			// put each new record where an old one began.
			size := 500
			if !aligned {
				size = 333
			}
			mine := l.write(entries(1000, 10, size)...)
			mine = append(mine, l.write(entries(1010, 5, size)...)...)
			end := l.End().Off
			if end >= oldEnd {
				t.Fatal("the new segment is not shorter than the old")
			}
			if aligned && end != old[15].off {
				t.Fatalf("new records end at %d, not at old record 15's start %d", end, old[15].off)
			}
			// The old records are still in the file, and valid for their
			// own segment.
			raw, err := os.ReadFile(l.path(3))
			if err != nil {
				t.Fatal(err)
			}
			o := old[len(old)-1]
			if _, err := DecodeRecord(raw[o.off:o.off+int64(o.size)], Seed(1)); err != nil {
				t.Fatalf("the recycled file no longer holds segment 1's records (%v): the test proves nothing", err)
			}
			got, gotEnd := scanAll(t, dir, 3, 0)
			checkScan(t, got, gotEnd, mine, end)
			for _, r := range got {
				if r.rec.Seq < 1000 {
					t.Fatalf("segment 3 returned segment 1's seq %d", r.rec.Seq)
				}
			}
			// Scanning the recycled file under its old number finds
			// nothing either: its first records are segment 3's.
			if aligned {
				l.Close()
				if err := os.Rename(l.path(3), l.path(1)); err != nil {
					t.Fatal(err)
				}
				got, gotEnd := scanAll(t, dir, 1, 0)
				checkScan(t, got, gotEnd, nil, 0)
			}
		})
	}
}

// TestSegLogPinDrop: a read pinned before a segment is dropped can still
// read it; once the last such read unpins, the segment is gone from the
// log (its file kept for reuse, up to maxFree, or removed); a read pinned
// after the drop does not keep it.
func TestSegLogPinDrop(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, false, firstSegment)
	if err := l.StartSegment(1); err != nil {
		t.Fatal(err)
	}
	written := map[uint64][]loggedRec{}
	written[1] = l.write(entries(1, 20, 700)...)
	for seg := uint64(2); seg <= 6; seg++ {
		l.use(takeSpare(l))
		written[seg] = l.write(entries(seg*100, 5, 700)...)
	}
	// readAll reads a segment's records through the log's files, as a page
	// does.
	read := func(seg uint64) error {
		f, err := l.File(seg)
		if err != nil {
			return err
		}
		for _, r := range written[seg] {
			b := make([]byte, len(r.rec.Payload))
			if _, err := f.ReadAt(b, r.at); err != nil {
				return err
			}
			if !bytes.Equal(b, r.rec.Payload) {
				return fmt.Errorf("seq %d reads back as other bytes", r.rec.Seq)
			}
		}
		return nil
	}
	// The spare segment prepared with segment 6 is made before the
	// drops, so that it does not take a dropped file while this test
	// counts them.
	sp := takeSpare(l)
	l.spare = make(chan spareSeg, 1)
	l.spare <- sp
	gone := func(seg uint64) bool {
		t.Helper()
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, open := l.files[seg]; open || slices.Contains(l.segs, seg) {
			return false
		}
		_, err := os.Stat(l.path(seg))
		if os.IsNotExist(err) || err == nil && slices.Contains(l.free, l.path(seg)) {
			return true
		}
		t.Fatalf("segment %d: not in the log, but its file is there and not kept for reuse (%v)", seg, err)
		return false
	}

	// Segment 1 was opened by a read before the drop, segment 2 is first
	// opened after it: both stay readable while the read is pinned.
	if err := read(1); err != nil {
		t.Fatal(err)
	}
	g := l.Pin()
	l.Drop(1)
	l.Drop(2)
	if gone(1) || gone(2) {
		t.Fatal("a dropped segment went while a read that began before was pinned")
	}
	if err := read(1); err != nil {
		t.Fatalf("segment 1 after the drop: %v", err)
	}
	if err := read(2); err != nil {
		t.Fatalf("segment 2 after the drop: %v", err)
	}
	// A read pinned after the drop does not hold it.
	late := l.Pin()
	l.Unpin(g)
	if !gone(1) || !gone(2) {
		t.Fatal("the dropped segments outlived the reads that began before the drop")
	}
	// A drop while only the later read runs waits for it: it began
	// before this drop.
	l.Drop(3)
	if gone(3) {
		t.Fatal("segment 3 went while a read that began before its drop was pinned")
	}
	if err := read(3); err != nil {
		t.Fatal(err)
	}
	l.Unpin(late)
	if !gone(3) {
		t.Fatal("segment 3 outlived the reads")
	}
	// With nothing pinned a drop is immediate. The free list holds at
	// most maxFree files; the rest are removed.
	l.Drop(4)
	if !gone(4) {
		t.Fatal("segment 4 kept with no read pinned")
	}
	if len(l.free) != MaxFree {
		t.Fatalf("free list %v, want %d files", l.free, MaxFree)
	}
	removed := 0
	for seg := uint64(1); seg <= 4; seg++ {
		if _, err := os.Stat(l.path(seg)); os.IsNotExist(err) {
			removed++
		}
	}
	if removed != 4-MaxFree {
		t.Fatalf("%d of 4 dropped files removed, want %d", removed, 4-MaxFree)
	}
	// Nested pins of one generation: the segment waits for both.
	g1, g2 := l.Pin(), l.Pin()
	l.Drop(5)
	l.Unpin(g1)
	if gone(5) {
		t.Fatal("segment 5 went while a second read of the same generation ran")
	}
	l.Unpin(g2)
	if !gone(5) {
		t.Fatal("segment 5 outlived both reads")
	}
	// The current segment, 6, is untouched by all this.
	recs := l.write(entries(9000, 3, 100)...)
	got, end := scanAll(t, dir, l.End().Seg, recs[0].off)
	checkScan(t, got, end, recs, l.End().Off)
}

// takeSpare returns the segment prepared after the current one, starting
// its preparation if the log has not yet.
func takeSpare(l *testLog) spareSeg {
	if l.spare == nil {
		l.prepareNext()
	}
	return <-l.spare
}
