package relay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The redo log is what makes an acknowledged publish durable in the SQLite
// archive. The committer appends each transaction's entries and channel
// rows to it with one write and one fdatasync per segment touched, while
// the same batch is applied to SQLite, which runs with synchronous=NORMAL:
// its commits do not wait for the disk, and a power loss can roll the
// database back to an earlier commit but never corrupt it. Each SQLite
// transaction records the position (LSN) of the last record it applied, so
// on open the records past that position are applied again, in order.
//
// The log is a folder of segments beside the database file (<db>-log/),
// each named by the LSN of its first record and preallocated to
// logSegmentSize bytes. A record is
//
//	u32 body length | u32 CRC-32C of the body | body
//	body: u64 LSN | u8 kind | kind's fields (little-endian)
//	  recEntry:   u64 seq | u8 entry type | i64 ts | u16 len, channel | u16 len, owner | payload (the rest)
//	  recChannel: u64 reserved | u8 has epoch | u64 epoch | u16 len, channel
//
// A segment's records end at the first record that is short, fails its
// checksum, or does not carry the next LSN (a reused segment holds older
// records past what was written since). The log ends there: the writes
// are synced in order and a publish is acknowledged only after its write
// is synced, so nothing past a torn or bad record was ever acknowledged.
//
// The log stays bounded: when a segment fills, the committer makes SQLite
// durable up to where it has applied (one commit with synchronous=FULL)
// and the segments wholly below that position are kept as spares for the
// next segments (at most logSpares of them) or deleted.

const (
	logSegmentSize = 32 << 20
	logSpares      = 2
	recHeader      = 8
	// maxRecord bounds a record's body: the largest payload (a 16 MiB
	// handshake entry) with its fields, with room to spare.
	maxRecord = 64 << 20
)

// testOnlySegmentSize, when set, replaces logSegmentSize.
var testOnlySegmentSize int64

const (
	recEntry   = 1
	recChannel = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logRecord is one decoded record.
type logRecord struct {
	lsn      uint64
	kind     uint8
	channel  string
	seq      uint64
	et       uint8
	ts       int64
	sub      string
	payload  []byte // valid until the next record is read
	reserved uint64
	hasEpoch bool
	epoch    uint64
}

type logSegment struct {
	first uint64 // LSN of its first record
	path  string
	f     *os.File
	off   int64 // bytes written so far
	last  uint64
}

// redoLog is owned by the committer.
type redoLog struct {
	dir     string
	segSize int64
	noSync  bool

	segs   []*logSegment // live segments, oldest first; the last one is written
	spares []string      // segment files wholly applied and durable, for reuse
	next   uint64        // LSN of the next record
	rolled bool          // a segment filled since the last release

	buf     []byte
	writes  []logWrite
	pending bool // a flush is running; wait collects it
	done    chan error
}

type logWrite struct {
	seg    *logSegment
	lo, hi int // l.buf[lo:hi]
	off    int64
}

func segmentName(first uint64) string { return fmt.Sprintf("%016x.seg", first) }

// openRedoLog opens the log in dir, creating it, and calls apply for every
// valid record after applied, in order. It returns the log ready to
// append after the last valid record (or after applied, whichever is
// later) and the LSN of the last record it passed to apply (0 for none).
// Once the caller has made what apply did durable, it calls start.
func openRedoLog(dir string, applied uint64, noSync bool, apply func(*logRecord) error) (l *redoLog, replayed uint64, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, err
	}
	l = &redoLog{dir: dir, segSize: logSegmentSize, noSync: noSync, done: make(chan error, 1)}
	if testOnlySegmentSize > 0 {
		l.segSize = testOnlySegmentSize
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var segs []*logSegment
	for _, e := range ents {
		name := e.Name()
		hex, ok := strings.CutSuffix(name, ".seg")
		if !ok || len(hex) != 16 || !e.Type().IsRegular() {
			continue
		}
		first, err := strconv.ParseUint(hex, 16, 64)
		if err != nil || first == 0 {
			continue
		}
		segs = append(segs, &logSegment{first: first, path: filepath.Join(dir, name)})
	}
	slices.SortFunc(segs, func(a, b *logSegment) int { return cmpUint(a.first, b.first) })
	// Records after applied begin in the last segment that starts at or
	// before applied+1; the segments before it are wholly applied.
	start := 0
	for i, s := range segs {
		if s.first <= applied+1 {
			start = i
		}
	}
	last := applied // the last valid LSN seen, at least applied
	var rec logRecord
	for i := start; i < len(segs); i++ {
		s := segs[i]
		// A segment continues the log only if it starts right after the
		// last valid record: a segment is begun when a record does not
		// fit in the one before, or after a restart that found the log's
		// end there. Any other is from before, or past the end.
		if i == start && s.first > applied+1 || i > start && s.first != last+1 {
			break
		}
		end, err := scanSegment(s, &rec, func(r *logRecord) error {
			if r.lsn <= applied {
				return nil
			}
			replayed = r.lsn
			return apply(r)
		})
		if err != nil {
			return nil, 0, err
		}
		last = max(last, end)
	}
	// Every segment is wholly applied once the caller has synced, or past
	// the log's end (never acknowledged): all become spares.
	for _, s := range segs {
		l.spares = append(l.spares, s.path)
	}
	l.next = last + 1
	return l, replayed, nil
}

// scanSegment reads a segment's valid records, calling fn for each, and
// returns the LSN of the last valid one (s.first-1 for none).
func scanSegment(s *logSegment, rec *logRecord, fn func(*logRecord) error) (uint64, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	r := bufio.NewReaderSize(f, 1<<20)
	want := s.first
	var off int64
	var hdr [recHeader]byte
	var body []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := int64(binary.LittleEndian.Uint32(hdr[0:4]))
		if n < 9 || n > maxRecord || off+recHeader+n > size {
			break
		}
		if int64(cap(body)) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			break
		}
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(hdr[4:8]) {
			break
		}
		if !decodeRecord(body, rec) || rec.lsn != want {
			break
		}
		if err := fn(rec); err != nil {
			return 0, err
		}
		want++
		off += recHeader + n
	}
	return want - 1, nil
}

func decodeRecord(b []byte, r *logRecord) bool {
	r.lsn = binary.LittleEndian.Uint64(b[0:8])
	r.kind = b[8]
	b = b[9:]
	str := func() (string, bool) {
		if len(b) < 2 {
			return "", false
		}
		n := int(binary.LittleEndian.Uint16(b))
		if len(b) < 2+n {
			return "", false
		}
		s := string(b[2 : 2+n])
		b = b[2+n:]
		return s, true
	}
	var ok bool
	switch r.kind {
	case recEntry:
		if len(b) < 17 {
			return false
		}
		r.seq = binary.LittleEndian.Uint64(b[0:8])
		r.et = b[8]
		r.ts = int64(binary.LittleEndian.Uint64(b[9:17]))
		b = b[17:]
		if r.channel, ok = str(); !ok {
			return false
		}
		if r.sub, ok = str(); !ok {
			return false
		}
		r.payload = b
		return r.seq > 0
	case recChannel:
		if len(b) < 17 {
			return false
		}
		r.reserved = binary.LittleEndian.Uint64(b[0:8])
		r.hasEpoch = b[8] == 1
		r.epoch = binary.LittleEndian.Uint64(b[9:17])
		b = b[17:]
		if r.channel, ok = str(); !ok {
			return false
		}
		return len(b) == 0
	}
	return false
}

// start opens the segment new records go to; after openRedoLog's replay
// is durable.
func (l *redoLog) start() error { return l.roll() }

// release makes the segments wholly at or below durable (an LSN SQLite has
// made durable) spares, keeping the one being written.
func (l *redoLog) release(durable uint64) {
	l.rolled = false
	k := 0
	for k < len(l.segs)-1 && l.segs[k].last <= durable {
		s := l.segs[k]
		s.f.Close()
		s.f = nil
		l.spares = append(l.spares, s.path)
		k++
	}
	l.segs = slices.Delete(l.segs, 0, k)
	l.trimSpares()
}

// trimSpares deletes the spares past logSpares, and any grown past the
// segment size by one large record.
func (l *redoLog) trimSpares() {
	keep := l.spares[:0]
	for _, p := range l.spares {
		st, err := os.Stat(p)
		if err == nil && st.Size() == l.segSize && len(keep) < logSpares {
			keep = append(keep, p)
			continue
		}
		os.Remove(p)
	}
	l.spares = keep
}

// roll starts a new segment whose first record is l.next: a spare renamed,
// or a new file preallocated with zeros (a file whose blocks are written
// already syncs fastest: no allocation in the fdatasync).
func (l *redoLog) roll() error {
	if len(l.segs) > 0 {
		l.rolled = true
	}
	l.trimSpares()
	path := filepath.Join(l.dir, segmentName(l.next))
	var f *os.File
	var err error
	// A spare may carry the very name (a segment begun before a restart
	// that found nothing written in it): that one is taken.
	if k := slices.Index(l.spares, path); k >= 0 {
		l.spares = append(slices.Delete(l.spares, k, k+1), path)
	}
	if n := len(l.spares); n > 0 {
		spare := l.spares[n-1]
		l.spares = l.spares[:n-1]
		if err = os.Rename(spare, path); err == nil {
			f, err = os.OpenFile(path, os.O_RDWR, 0)
		}
	} else {
		f, err = l.create(path)
	}
	if err != nil {
		return fmt.Errorf("log segment: %w", err)
	}
	if err := l.syncDir(); err != nil {
		f.Close()
		return fmt.Errorf("log segment: %w", err)
	}
	l.segs = append(l.segs, &logSegment{first: l.next, path: path, f: f, last: l.next - 1})
	return nil
}

func (l *redoLog) create(path string) (*os.File, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	if l.noSync {
		err = f.Truncate(l.segSize)
	} else {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < l.segSize && err == nil; off += int64(len(zeros)) {
			_, err = f.WriteAt(zeros[:min(int64(len(zeros)), l.segSize-off)], off)
		}
		if err == nil {
			err = f.Sync()
		}
	}
	if err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return f, nil
}

func (l *redoLog) syncDir() error {
	if l.noSync {
		return nil
	}
	d, err := os.Open(l.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// append encodes the records of a batch (its entries, then the channel
// rows that change) and starts writing and syncing them; wait returns the
// result. It returns the LSN of the batch's last record, 0 when the batch
// has nothing to log. Segments fill in whole records: one that does not
// fit goes to the next segment (alone in it when larger than a segment).
func (l *redoLog) append(batch []*pubReq, rows []*pubReq) (uint64, error) {
	l.buf, l.writes = l.buf[:0], l.writes[:0]
	if len(l.segs) == 0 {
		return 0, errors.New("log is not started")
	}
	seg := l.segs[len(l.segs)-1]
	lo, off := 0, seg.off
	add := func(body func(b []byte) []byte) error {
		at := len(l.buf)
		l.buf = append(l.buf, make([]byte, recHeader)...)
		l.buf = binary.LittleEndian.AppendUint64(l.buf, l.next)
		l.buf = body(l.buf)
		n := len(l.buf) - at
		if off > 0 && off+int64(n) > l.segSize {
			if at > lo {
				l.writes = append(l.writes, logWrite{seg, lo, at, seg.off})
				seg.off = off
			}
			if err := l.roll(); err != nil {
				return err
			}
			seg, lo, off = l.segs[len(l.segs)-1], at, 0
		}
		b := l.buf[at:]
		binary.LittleEndian.PutUint32(b[0:4], uint32(n-recHeader))
		binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(b[recHeader:], castagnoli))
		seg.last = l.next
		l.next++
		off += int64(n)
		return nil
	}
	str := func(b []byte, s string) []byte {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
		return append(b, s...)
	}
	for _, r := range batch {
		if r.reply != nil || r.refused != nil || r.st == nil || r.fence {
			continue
		}
		if len(r.channel) > math16 || len(r.sub) > math16 || len(r.payload) > maxRecord-64-len(r.channel)-len(r.sub) {
			return 0, errors.New("log record too large")
		}
		err := add(func(b []byte) []byte {
			b = append(b, recEntry)
			b = binary.LittleEndian.AppendUint64(b, r.seq)
			b = append(b, r.hdr.entryType)
			b = binary.LittleEndian.AppendUint64(b, uint64(r.ts))
			b = str(b, r.channel)
			b = str(b, r.sub)
			return append(b, r.payload...)
		})
		if err != nil {
			return 0, err
		}
	}
	for _, r := range rows {
		if len(r.channel) > math16 {
			return 0, errors.New("log record too large")
		}
		err := add(func(b []byte) []byte {
			b = append(b, recChannel)
			b = binary.LittleEndian.AppendUint64(b, r.reserved)
			if r.hasEpoch {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
			b = binary.LittleEndian.AppendUint64(b, r.epoch)
			return str(b, r.channel)
		})
		if err != nil {
			return 0, err
		}
	}
	if len(l.buf) > lo {
		l.writes = append(l.writes, logWrite{seg, lo, len(l.buf), seg.off})
		seg.off = off
	}
	if len(l.writes) == 0 {
		return 0, nil
	}
	l.pending = true
	if len(l.buf) <= logInline {
		l.done <- l.flush()
	} else {
		go func() { l.done <- l.flush() }()
	}
	return l.next - 1, nil
}

const math16 = 1<<16 - 1

// logInline is the largest batch the log writes and syncs on the
// committer itself, before the SQLite transaction; a larger one is written
// beside it, on a goroutine of its own. Handing a small write to another
// thread costs more than the overlap saves: a publish or two, whose
// transaction takes far less than the fdatasync.
const logInline = 64 << 10

// flush writes and syncs what append encoded; it runs beside the
// committer's SQLite transaction.
func (l *redoLog) flush() error {
	for _, w := range l.writes {
		if _, err := w.seg.f.WriteAt(l.buf[w.lo:w.hi], w.off); err != nil {
			return err
		}
	}
	if l.noSync {
		return nil
	}
	for i, w := range l.writes {
		if i > 0 && l.writes[i-1].seg == w.seg {
			continue
		}
		if err := fdatasync(w.seg.f); err != nil {
			return err
		}
	}
	return nil
}

// wait returns the result of the write append started, if it started one.
func (l *redoLog) wait() error {
	if !l.pending {
		return nil
	}
	l.pending = false
	err := <-l.done
	if cap(l.buf) > logKeepBuf {
		l.buf = nil // a batch of large entries: not held until the next one
	}
	return err
}

// logKeepBuf is the largest encoding buffer the log keeps between batches.
const logKeepBuf = 4 << 20

func (l *redoLog) close() {
	for _, s := range l.segs {
		if s.f != nil {
			s.f.Close()
		}
	}
	l.segs = nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
