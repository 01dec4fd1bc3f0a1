package relay

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

// The archive's log. A file-backed archive appends every batch of entries
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
//	kind      uint8   recEntry or recChan
//	flags     uint8   recDirty, recHasEpoch, recMoved
//	entryType uint8
//	zero      uint8
//	seq       uint64  the entry's seq (recEntry)
//	ts        int64   unix milliseconds (recEntry)
//	reserved  uint64  the channel's reserved ceiling after the record (recDirty)
//	epoch     uint64  the commit epoch expected next (recHasEpoch)
//	chanLen   uint16
//	subLen    uint16  0: records name no sender (the channel pays, budget.go);
//	                  segments written before that may hold the publishing
//	                  account here, read and ignored; the archive moves
//	                  their entries out and deletes their files after its
//	                  first open with senderless records (loadSenderless)
//	channel, sub, payload
const (
	recEntry = 1 // an archived entry
	recChan  = 2 // a change of the channel row alone (a fence reset)

	recDirty    = 1 // the record carries the channel row
	recHasEpoch = 2
	recMoved    = 4 // a stored entry moved from an older segment (compact)

	recHeader = 8
	recFixed  = 40
	// maxRecordName bounds a record's channel and account names; the
	// sequencer refuses a publish with a longer one (fitsRecord).
	maxRecordName = 0xffff
	// maxRecordBody bounds a record's body when the log is read back: a
	// handshake payload (MaxHandshakePayload) and the longest channel and
	// account names fit.
	maxRecordBody = recFixed + 2*0xffff + MaxHandshakePayload

	// A segment is written with zeros to its size before it is used, so
	// that an append overwrites allocated blocks and its fdatasync has no
	// metadata to commit: on this ext4, 1 MiB appended and flushed took
	// 2.4 ms, the same written over zeros 0.34 ms (fallocate: 0.60 ms).
	// A run's first segment is small, so that an archive opened for a
	// moment costs little; each next one doubles, up to maxSegment.
	firstSegment = 1 << 20
	maxSegment   = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segSeed is the checksum of a segment's number, which every record's
// checksum in the segment starts from.
func segSeed(seg uint64) uint32 {
	return crc32.Checksum(binary.LittleEndian.AppendUint64(nil, seg), castagnoli)
}

// logRec is one record of the log.
type logRec struct {
	kind      uint8
	flags     uint8
	entryType uint8
	seq       uint64
	ts        int64
	reserved  uint64
	epoch     uint64
	channel   string
	sub       string
	payload   []byte
}

var errBadRecord = errors.New("relay: log record is damaged")

// recordSize is the length of r's encoding.
func recordSize(r *logRec) int {
	return recHeader + recFixed + len(r.channel) + len(r.sub) + len(r.payload)
}

// fitsRecord reports whether an entry of channel and account sub with an
// n-byte payload fits one record: what a scan reads back (maxRecordBody).
func fitsRecord(channel, sub string, n int) bool {
	return len(channel) <= maxRecordName && len(sub) <= maxRecordName &&
		recFixed+len(channel)+len(sub)+n <= maxRecordBody
}

// appendRecord appends r's encoding, for the segment whose segSeed is
// seed, to b. It returns the offset in the record where r's payload
// begins.
func appendRecord(b []byte, seed uint32, r *logRec) ([]byte, int, error) {
	if !fitsRecord(r.channel, r.sub, len(r.payload)) {
		return b, 0, errors.New("relay: log record: names or payload too long")
	}
	body := recFixed + len(r.channel) + len(r.sub) + len(r.payload)
	start := len(b)
	b = slices.Grow(b, recHeader+body)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(body))
	b = append(b, r.kind, r.flags, r.entryType, 0)
	b = binary.LittleEndian.AppendUint64(b, r.seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.ts))
	b = binary.LittleEndian.AppendUint64(b, r.reserved)
	b = binary.LittleEndian.AppendUint64(b, r.epoch)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.channel)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(r.sub)))
	b = append(b, r.channel...)
	b = append(b, r.sub...)
	at := len(b)
	b = append(b, r.payload...)
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
	return recHeader + int(n), true
}

// decodeRecord decodes the record b holds exactly, for the segment whose
// segSeed is seed. The payload aliases b. Only bytes appendRecord can
// produce decode, so a decoded record encodes back to b.
func decodeRecord(b []byte, seed uint32) (logRec, error) {
	if len(b) < recHeader+recFixed {
		return logRec{}, errBadRecord
	}
	if n, ok := recordLen(b); !ok || n != len(b) {
		return logRec{}, errBadRecord
	}
	if crc32.Update(seed, castagnoli, b[4:]) != binary.LittleEndian.Uint32(b) {
		return logRec{}, errBadRecord
	}
	p := b[recHeader:]
	r := logRec{kind: p[0], flags: p[1], entryType: p[2]}
	if r.kind != recEntry && r.kind != recChan || r.flags&^(recDirty|recHasEpoch|recMoved) != 0 || p[3] != 0 {
		return logRec{}, errBadRecord
	}
	r.seq = binary.LittleEndian.Uint64(p[4:])
	r.ts = int64(binary.LittleEndian.Uint64(p[12:]))
	r.reserved = binary.LittleEndian.Uint64(p[20:])
	r.epoch = binary.LittleEndian.Uint64(p[28:])
	nc, ns := int(binary.LittleEndian.Uint16(p[36:])), int(binary.LittleEndian.Uint16(p[38:]))
	p = p[recFixed:]
	if nc+ns > len(p) {
		return logRec{}, errBadRecord
	}
	r.channel, r.sub, r.payload = string(p[:nc]), string(p[nc:nc+ns]), p[nc+ns:]
	return r, nil
}

// logPos is a position in the log: an offset in a segment.
type logPos struct {
	seg uint64
	off int64
}

// segLog is the log's files. The writer side (append, the current
// segment) belongs to the archive's logger; reads and removals may come
// from any goroutine.
type segLog struct {
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
	// noReuseBelow: a removed segment below it is deleted, never reused
	// (its file may hold records that name their senders). Set at open.
	noReuseBelow uint64
	// lock is the log's lock file. A backup holds a shared lock on it
	// while it copies (BackupArchive); a segment is removed or reused
	// only under the exclusive lock, so never under a backup.
	lock *os.File
}

// lockName is the log's lock file.
const lockName = "lock"

// maxFree is how many removed segments' files are kept for reuse.
const maxFree = 2

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

func segName(seg uint64) string { return fmt.Sprintf("%016x.seg", seg) }

// openSegLog opens (creating) the log directory and lists its segments.
// Segments grow to maxSeg bytes (0 for maxSegment).
func openSegLog(dir string, sync bool, maxSeg int64) (*segLog, []uint64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	segs, err := listSegments(dir)
	if err != nil {
		return nil, nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	l := &segLog{dir: dir, sync: sync, max: cmp.Or(maxSeg, maxSegment), segs: segs, lock: lock,
		files: make(map[uint64]*os.File), readers: make(map[uint64]int)}
	return l, segs, nil
}

// listSegments returns the numbers of the segments in dir, in order.
func listSegments(dir string) ([]uint64, error) {
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

// startSegment makes a new segment seg, of firstSegment bytes, the one
// appends go to.
func (l *segLog) startSegment(seg uint64) error {
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
func (l *segLog) prepare(seg uint64, size int64) spareSeg {
	sp := spareSeg{seg: seg, size: size}
	name := filepath.Join(l.dir, segName(seg))
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
			err = syncDir(l.dir)
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
func (l *segLog) reuse(name string) (*os.File, int64, bool) {
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
		err = syncDir(l.dir)
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
func (l *segLog) use(sp spareSeg) {
	l.mu.Lock()
	l.files[sp.seg] = sp.f
	l.segs = append(l.segs, sp.seg)
	l.mu.Unlock()
	l.cur, l.seg, l.off, l.limit, l.seed = sp.f, sp.seg, 0, sp.size, segSeed(sp.seg)
	l.current.Store(sp.seg)
	l.spare = nil // taken, or never prepared
}

// prepareNext starts preparing the segment after the current one, once
// the current one is half full: an archive that never fills its first
// segment writes no second one.
func (l *segLog) prepareNext() {
	next, size := l.seg+1, min(2*l.limit, l.max)
	l.spare = make(chan spareSeg, 1)
	go func(c chan<- spareSeg) { c <- l.prepare(next, size) }(l.spare)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// room makes the current segment one that n more bytes fit in, starting
// the next one if need be (a batch larger than a whole segment goes past
// its end), and returns its segSeed: a batch never spans two segments.
func (l *segLog) room(n int) (uint32, error) {
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

// append writes b, whole records encoded for the segment room returned,
// at the end of the log (end) and flushes it. After an error the log's
// end is unknown, and the archive stops.
func (l *segLog) append(b []byte) error {
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

// end is the position after the last append.
func (l *segLog) end() logPos { return logPos{l.seg, l.off} }

// footprint returns the segments, in order, and their files' sizes.
func (l *segLog) footprint() ([]uint64, []int64) {
	segs := l.list()
	sizes := make([]int64, len(segs))
	for i, seg := range segs {
		if fi, err := os.Stat(filepath.Join(l.dir, segName(seg))); err == nil {
			sizes[i] = fi.Size()
		}
	}
	return segs, sizes
}

// list returns the segments, in order.
func (l *segLog) list() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.segs)
}

// file returns an open segment.
func (l *segLog) file(seg uint64) (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.files[seg]; f != nil {
		return f, nil
	}
	f, err := os.Open(filepath.Join(l.dir, segName(seg)))
	if err != nil {
		return nil, err
	}
	l.files[seg] = f
	return f, nil
}

// pin marks a read as running; unpin with what it returns.
func (l *segLog) pin() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readers[l.gen]++
	return l.gen
}

func (l *segLog) unpin(g uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.readers[g]--; l.readers[g] == 0 {
		delete(l.readers, g)
	}
	l.reap()
}

// drop removes a segment once no read that began before the call runs.
// The caller has made durable an index that points nowhere into it.
func (l *segLog) drop(seg uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.doomed = append(l.doomed, doomedSeg{seg, l.gen})
	l.reap()
}

func (l *segLog) reap() {
	if len(l.doomed) == 0 || !tryLockExclusive(l.lock) {
		return // a backup is copying: the next reap removes them
	}
	defer unlock(l.lock)
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
		name := filepath.Join(l.dir, segName(d.seg))
		if len(l.free) < maxFree && d.seg >= l.noReuseBelow {
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

// scan calls fn with each record of a segment from off, in order, and
// the offset of the record's payload, up to the segment's end or its
// first damaged record: the tail a crash cut short. It returns the offset
// after the last good record.
func (l *segLog) scan(seg uint64, off int64, fn func(r *logRec, at int64) error) (int64, error) {
	f, err := l.file(seg)
	if err != nil {
		return 0, err
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, off, 1<<62), 1<<20)
	seed := segSeed(seg)
	var buf []byte
	for {
		h, err := br.Peek(recHeader)
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
		r, err := decodeRecord(buf, seed)
		if err != nil {
			return off, nil
		}
		if err := fn(&r, off+int64(n-len(r.payload))); err != nil {
			return off, err
		}
		off += int64(n)
	}
}

// close closes every segment file, and removes the spare segment.
func (l *segLog) close() {
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
