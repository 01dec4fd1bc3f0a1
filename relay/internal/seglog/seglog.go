// Package seglog is the relay's segment log: the redo log of the SQLite
// archive, which an acknowledged publish is durable in. It knows records,
// segments and their files; what the records mean (entries, channel rows)
// is the archive's.
package seglog

import (
	"bufio"
	"cmp"
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
	"sync"
	"sync/atomic"
)

// The log. A file-backed archive appends every batch of entries
// to a segment file and flushes it with one fdatasync before it answers
// the batch; SQLite holds the index (each entry's channel, seq, type, ts
// and where its payload is in the log; no sender) and the channel rows, and
// commits them without syncing. The log is the source of truth: SQLite
// records the log position it has applied up to in the same transaction
// as the rows, and an open replays the records after that position, so an
// index transaction that a crash of the machine takes back is rebuilt
// from the log.
//
// A segment is named by its number, %016x.seg, and written from its start
// by one run of the archive only: each open starts a new segment, so a
// torn tail (a batch the crash cut, never acknowledged) is never followed
// by later writes, and the replay stops at its first bad record. A
// segment's file may be one a removed segment left (recycled, see
// prepare), so past the records written to it it holds zeros or the old
// segment's records; each record's checksum covers the number of its
// segment, so an old record never reads as one of the new segment.
//
// Record layout, little endian:
//
//	crc32c    uint32  of the segment's number (uint64) and then of
//	                  everything after the checksum, to the end of the payload
//	length    uint32  of the body
//	body:
//	kind      uint8   KindEntry or KindChan
//	flags     uint8   FlagDirty, FlagHasEpoch, FlagMoved
//	entryType uint8
//	zero      uint8
//	seq       uint64  the entry's seq (KindEntry)
//	ts        int64   unix milliseconds (KindEntry)
//	reserved  uint64  the channel's reserved ceiling after the record (FlagDirty)
//	epoch     uint64  the commit epoch expected next (FlagHasEpoch)
//	chanLen   uint16
//	subLen    uint16  0: records name no sender (the channel pays, budget.go);
//	                  segments written before that may hold the publishing
//	                  account here, read and ignored; the archive moves
//	                  their entries out and deletes their files after its
//	                  first open with senderless records (loadSenderless)
//	channel, sub, payload
const (
	KindEntry = 1 // an archived entry
	KindChan  = 2 // a change of the channel row alone (a fence reset)

	FlagDirty    = 1 // the record carries the channel row
	FlagHasEpoch = 2
	FlagMoved    = 4 // a stored entry moved from an older segment (compact)

	// HeaderSize is the length of a record's checksum and length.
	HeaderSize = 8
	recFixed   = 40
	// MaxName bounds a record's channel and account names; the
	// sequencer refuses a publish with a longer one (Fits).
	MaxName = 0xffff
	// MaxPayload is the largest payload a record carries: the relay's
	// largest, a handshake's (relay.MaxHandshakePayload).
	MaxPayload = 16 << 20
	// maxRecordBody bounds a record's body when the log is read back: the
	// largest payload and the longest channel and account names fit.
	maxRecordBody = recFixed + 2*0xffff + MaxPayload

	// A segment is written with zeros to its size before it is used, so
	// that an append overwrites allocated blocks and its fdatasync has no
	// metadata to commit: on this ext4, 1 MiB appended and flushed took
	// 2.4 ms, the same written over zeros 0.34 ms (fallocate: 0.60 ms).
	// A run's first segment is small, so that an archive opened for a
	// moment costs little; each next one doubles, up to
	// DefaultMaxSegment (or the size Open is given).
	firstSegment      = 1 << 20
	DefaultMaxSegment = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Seed is the checksum of a segment's number, which every record's
// checksum in the segment starts from.
func Seed(seg uint64) uint32 {
	return crc32.Checksum(binary.LittleEndian.AppendUint64(nil, seg), castagnoli)
}

// Record is one record of the log.
type Record struct {
	Kind      uint8
	Flags     uint8
	EntryType uint8
	Seq       uint64
	TS        int64
	Reserved  uint64
	Epoch     uint64
	Channel   string
	Sub       string
	Payload   []byte
}

var errBadRecord = errors.New("relay: log record is damaged")

// RecordSize is the length of r's encoding.
func RecordSize(r *Record) int {
	return HeaderSize + recFixed + len(r.Channel) + len(r.Sub) + len(r.Payload)
}

// Fits reports whether an entry of channel and account sub with an
// n-byte payload fits one record: what a scan reads back (maxRecordBody).
func Fits(channel, sub string, n int) bool {
	return len(channel) <= MaxName && len(sub) <= MaxName &&
		recFixed+len(channel)+len(sub)+n <= maxRecordBody
}

// AppendRecord appends r's encoding, for the segment whose segSeed is
// seed, to b. It returns the offset in the record where r's payload
// begins.
func AppendRecord(b []byte, seed uint32, r *Record) ([]byte, int, error) {
	if !Fits(r.Channel, r.Sub, len(r.Payload)) {
		return b, 0, errors.New("relay: log record: names or payload too long")
	}
	body := recFixed + len(r.Channel) + len(r.Sub) + len(r.Payload)
	start := len(b)
	b = slices.Grow(b, HeaderSize+body)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(body))
	b = append(b, r.Kind, r.Flags, r.EntryType, 0)
	b = binary.LittleEndian.AppendUint64(b, r.Seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.TS))
	b = binary.LittleEndian.AppendUint64(b, r.Reserved)
	b = binary.LittleEndian.AppendUint64(b, r.Epoch)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.Channel)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.Sub)))
	b = append(b, r.Channel...)
	b = append(b, r.Sub...)
	at := len(b)
	b = append(b, r.Payload...)
	binary.LittleEndian.PutUint32(b[start:], crc32.Update(seed, castagnoli, b[start+4:]))
	return b, at - start, nil
}

// recordLen returns the length of the record whose header h begins, or
// false when the header cannot begin a record.
func recordLen(h []byte) (int, bool) {
	n := binary.LittleEndian.Uint32(h[4:])
	if n < recFixed || n > maxRecordBody {
		return 0, false
	}
	return HeaderSize + int(n), true
}

// DecodeRecord decodes the record b holds exactly, for the segment whose
// segSeed is seed. The payload aliases b. Only bytes appendRecord can
// produce decode, so a decoded record encodes back to b.
func DecodeRecord(b []byte, seed uint32) (Record, error) {
	if len(b) < HeaderSize+recFixed {
		return Record{}, errBadRecord
	}
	if n, ok := recordLen(b); !ok || n != len(b) {
		return Record{}, errBadRecord
	}
	if crc32.Update(seed, castagnoli, b[4:]) != binary.LittleEndian.Uint32(b) {
		return Record{}, errBadRecord
	}
	p := b[HeaderSize:]
	r := Record{Kind: p[0], Flags: p[1], EntryType: p[2]}
	if r.Kind != KindEntry && r.Kind != KindChan || r.Flags&^(FlagDirty|FlagHasEpoch|FlagMoved) != 0 || p[3] != 0 {
		return Record{}, errBadRecord
	}
	r.Seq = binary.LittleEndian.Uint64(p[4:])
	r.TS = int64(binary.LittleEndian.Uint64(p[12:]))
	r.Reserved = binary.LittleEndian.Uint64(p[20:])
	r.Epoch = binary.LittleEndian.Uint64(p[28:])
	nc, ns := int(binary.LittleEndian.Uint16(p[36:])), int(binary.LittleEndian.Uint16(p[38:]))
	p = p[recFixed:]
	if nc+ns > len(p) {
		return Record{}, errBadRecord
	}
	r.Channel, r.Sub, r.Payload = string(p[:nc]), string(p[nc:nc+ns]), p[nc+ns:]
	return r, nil
}

// Pos is a position in the log: an offset in a segment.
type Pos struct {
	Seg uint64
	Off int64
}

// Log is the log's files. The writer side (append, the current
// segment) belongs to the archive's logger; reads and removals may come
// from any goroutine.
type Log struct {
	dir  string
	sync bool // fdatasync each append (false for Config.NoSync)

	// Writer only.
	cur   *os.File
	seg   uint64
	off   int64
	limit int64         // the current segment's prepared size
	max   int64         // the largest segment prepared
	seed  uint32        // the current segment's segSeed
	spare chan spareSeg // the next segment, once prepared

	current atomic.Uint64 // seg, for other goroutines

	mu    sync.Mutex
	segs  []uint64            // the segments, in order
	files map[uint64]*os.File // open segments, shared by readers
	// A segment the index no longer points into is removed only once no
	// read that may have begun before its last row went is running: each
	// read pins the generation it began in, and each removal starts a
	// new one.
	gen     uint64
	readers map[uint64]int // reads running, by the generation they began in
	doomed  []doomedSeg
	free    []string // files of removed segments, for prepare to reuse
	// NoReuseBelow: a removed segment below it is deleted, never reused
	// (its file may hold records that name their senders). Set at open.
	NoReuseBelow uint64
	// lock is the log's lock file. A backup holds a shared lock on it
	// while it copies (BackupArchive); a segment is removed or reused
	// only under the exclusive lock, so never under a backup.
	lock *os.File
}

// lockName is the log's lock file.
const lockName = "lock"

// MaxFree is how many removed segments' files are kept for reuse.
const MaxFree = 2

// spareSeg is a segment prepared ahead of its use.
type spareSeg struct {
	seg  uint64
	f    *os.File
	size int64
	err  error
}

type doomedSeg struct {
	seg uint64
	gen uint64
}

func Name(seg uint64) string { return fmt.Sprintf("%016x.seg", seg) }

// Open opens (creating) the log directory and lists its segments.
// Segments grow to maxSeg bytes (0 for maxSegment).
func Open(dir string, sync bool, maxSeg int64) (*Log, []uint64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	segs, err := List(dir)
	if err != nil {
		return nil, nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	l := &Log{dir: dir, sync: sync, max: cmp.Or(maxSeg, DefaultMaxSegment), segs: segs, lock: lock,
		files: make(map[uint64]*os.File), readers: make(map[uint64]int)}
	return l, segs, nil
}

// List returns the numbers of the segments in dir, in order.
func List(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok || len(name) != 16 {
			continue
		}
		n, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			continue
		}
		segs = append(segs, n)
	}
	slices.Sort(segs)
	return segs, nil
}

// StartSegment makes a new segment seg, of firstSegment bytes, the one
// appends go to.
func (l *Log) StartSegment(seg uint64) error {
	sp := l.prepare(seg, min(firstSegment, l.max))
	if sp.err != nil {
		return sp.err
	}
	l.use(sp)
	return nil
}

// prepare makes segment seg: the file of a removed segment, renamed, or
// else a new file written with zeros to size bytes. Either way its blocks
// are allocated and written, and the file and its directory entry are
// durable when it returns, so an append to it needs one fdatasync with no
// metadata to commit. Reuse also spares the disk the zeros: writing them
// cost 11 % of BenchmarkDurable16's CPU.
func (l *Log) prepare(seg uint64, size int64) spareSeg {
	sp := spareSeg{seg: seg, size: size}
	name := filepath.Join(l.dir, Name(seg))
	if f, n, ok := l.reuse(name); ok {
		sp.f, sp.size = f, n
		return sp
	}
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		sp.err = err
		return sp
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
	}
	if err == nil && l.sync {
		if err = datasync(f); err == nil {
			err = SyncDir(l.dir)
		}
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		sp.err = err
		return sp
	}
	sp.f = f
	return sp
}

// reuse renames a removed segment's file to name, if there is one.
func (l *Log) reuse(name string) (*os.File, int64, bool) {
	l.mu.Lock()
	if len(l.free) == 0 {
		l.mu.Unlock()
		return nil, 0, false
	}
	old := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	l.mu.Unlock()
	if err := os.Rename(old, name); err != nil {
		os.Remove(old)
		return nil, 0, false
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err == nil && l.sync {
		err = SyncDir(l.dir)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = f.Stat()
	}
	if err != nil {
		if f != nil {
			f.Close()
		}
		os.Remove(name)
		return nil, 0, false
	}
	return f, fi.Size(), true
}

// use makes a prepared segment the current one.
func (l *Log) use(sp spareSeg) {
	l.mu.Lock()
	l.files[sp.seg] = sp.f
	l.segs = append(l.segs, sp.seg)
	l.mu.Unlock()
	l.cur, l.seg, l.off, l.limit, l.seed = sp.f, sp.seg, 0, sp.size, Seed(sp.seg)
	l.current.Store(sp.seg)
	l.spare = nil // taken, or never prepared
}

// prepareNext starts preparing the segment after the current one, once
// the current one is half full: an archive that never fills its first
// segment writes no second one.
func (l *Log) prepareNext() {
	next, size := l.seg+1, min(2*l.limit, l.max)
	l.spare = make(chan spareSeg, 1)
	go func(c chan<- spareSeg) { c <- l.prepare(next, size) }(l.spare)
}

func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Room makes the current segment one that n more bytes fit in, starting
// the next one if need be (a batch larger than a whole segment goes past
// its end), and returns its segSeed: a batch never spans two segments.
func (l *Log) Room(n int) (uint32, error) {
	if l.off > 0 && l.off+int64(n) > l.limit {
		if l.spare == nil {
			l.prepareNext()
		}
		sp := <-l.spare
		if sp.err != nil {
			l.spare = nil
			return 0, sp.err
		}
		l.use(sp)
	}
	return l.seed, nil
}

// Append writes b, whole records encoded for the segment room returned,
// at the end of the log (end) and flushes it. After an error the log's
// end is unknown, and the archive stops.
func (l *Log) Append(b []byte) error {
	if _, err := l.cur.WriteAt(b, l.off); err != nil {
		return err
	}
	if l.sync {
		if err := datasync(l.cur); err != nil {
			return err
		}
	}
	l.off += int64(len(b))
	if l.spare == nil && l.off > l.limit/2 {
		l.prepareNext()
	}
	return nil
}

// Dir returns the folder of the log's segments.
func (l *Log) Dir() string { return l.dir }

// Syncs reports whether each append is flushed to the disk.
func (l *Log) Syncs() bool { return l.sync }

// MaxSegment returns the size segments grow to.
func (l *Log) MaxSegment() int64 { return l.max }

// Current returns the segment appends go to; safe for concurrent use.
func (l *Log) Current() uint64 { return l.current.Load() }

// End is the position after the last append.
func (l *Log) End() Pos { return Pos{l.seg, l.off} }

// Footprint returns the segments, in order, and their files' sizes.
func (l *Log) Footprint() ([]uint64, []int64) {
	segs := l.List()
	sizes := make([]int64, len(segs))
	for i, seg := range segs {
		if fi, err := os.Stat(filepath.Join(l.dir, Name(seg))); err == nil {
			sizes[i] = fi.Size()
		}
	}
	return segs, sizes
}

// List returns the segments, in order.
func (l *Log) List() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.segs)
}

// File returns an open segment.
func (l *Log) File(seg uint64) (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.files[seg]; f != nil {
		return f, nil
	}
	f, err := os.Open(filepath.Join(l.dir, Name(seg)))
	if err != nil {
		return nil, err
	}
	l.files[seg] = f
	return f, nil
}

// Pin marks a read as running; unpin with what it returns.
func (l *Log) Pin() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readers[l.gen]++
	return l.gen
}

func (l *Log) Unpin(g uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers[g]--; l.readers[g] == 0 {
		delete(l.readers, g)
	}
	l.reap()
}

// Drop removes a segment once no read that began before the call runs.
// The caller has made durable an index that points nowhere into it.
func (l *Log) Drop(seg uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.doomed = append(l.doomed, doomedSeg{seg, l.gen})
	l.reap()
}

// Dropping reports whether seg waits, dropped, for the reads that may
// have begun before to end, and whether it is still listed.
func (l *Log) Dropping(seg uint64) (doomed, listed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.doomed, func(d doomedSeg) bool { return d.seg == seg }), slices.Contains(l.segs, seg)
}

func (l *Log) reap() {
	if len(l.doomed) == 0 || !tryLockExclusive(l.lock) {
		return // a backup is copying: the next reap removes them
	}
	defer unlockFile(l.lock)
	oldest := l.gen
	for g := range l.readers {
		oldest = min(oldest, g)
	}
	l.doomed = slices.DeleteFunc(l.doomed, func(d doomedSeg) bool {
		if oldest < d.gen {
			return false
		}
		if f := l.files[d.seg]; f != nil {
			f.Close()
			delete(l.files, d.seg)
		}
		name := filepath.Join(l.dir, Name(d.seg))
		if len(l.free) < MaxFree && d.seg >= l.NoReuseBelow {
			l.free = append(l.free, name)
		} else {
			os.Remove(name)
		}
		if i, ok := slices.BinarySearch(l.segs, d.seg); ok {
			l.segs = slices.Delete(l.segs, i, i+1)
		}
		return true
	})
}

// Scan calls fn with each record of a segment from off, in order, and
// the offset of the record's payload, up to the segment's end or its
// first damaged record: the tail a crash cut short. It returns the offset
// after the last good record.
func (l *Log) Scan(seg uint64, off int64, fn func(r *Record, at int64) error) (int64, error) {
	f, err := l.File(seg)
	if err != nil {
		return 0, err
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, off, 1<<62), 1<<20)
	seed := Seed(seg)
	var buf []byte
	for {
		h, err := br.Peek(HeaderSize)
		if err != nil {
			return off, nil // the end, or a header cut short
		}
		n, ok := recordLen(h)
		if !ok {
			return off, nil
		}
		buf = slices.Grow(buf[:0], n)[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return off, nil
		}
		r, err := DecodeRecord(buf, seed)
		if err != nil {
			return off, nil
		}
		if err := fn(&r, off+int64(n-len(r.Payload))); err != nil {
			return off, err
		}
		off += int64(n)
	}
}

// Close closes every segment file, and removes the spare segment.
func (l *Log) Close() {
	if l.spare != nil {
		if sp := <-l.spare; sp.err == nil {
			sp.f.Close()
			os.Remove(sp.f.Name())
		}
		l.spare = nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for seg, f := range l.files {
		f.Close()
		delete(l.files, seg)
	}
	l.lock.Close()
}
