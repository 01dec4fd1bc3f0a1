package seglog

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A backup of a log (the relay's BackupArchive) copies its segments while
// the log runs, under LockShared, and checks each record an index row
// points to in the copy (CheckRecord).

// ErrReused is a segment removed, or its number reused, while it was
// copied: the copy is to be made again.
var ErrReused = errors.New("relay: backup: a segment was removed while it was copied")

// LockShared takes a shared lock of the log in dir, under which no
// segment is removed or reused, and returns its release. A folder with no
// log yet has nothing to lock.
func LockShared(dir string) (unlock func(), err error) {
	lock, err := os.Open(filepath.Join(dir, lockName))
	if errors.Is(err, os.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := lockShared(lock); err != nil {
		lock.Close()
		return nil, err
	}
	return func() { unlockFile(lock); lock.Close() }, nil
}

// Copy copies segment seg of the log in folder from into the folder
// to, which it creates, and returns the copy, open, once it is on disk.
// A segment that is gone (removed since it was listed) is ErrReused.
func Copy(from, to string, seg uint64) (*os.File, error) {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return nil, err
	}
	in, err := os.Open(filepath.Join(from, Name(seg)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrReused
	}
	if err != nil {
		return nil, err
	}
	defer in.Close()
	out, err := os.OpenFile(filepath.Join(to, Name(seg)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if err != nil {
		out.Close()
		return nil, err
	}
	return out, nil
}

// CheckRecord checks that the record of channel's entry seq, whose payload
// of size bytes is at offset at of segment seg (open as f), is there: a
// segment whose number was reused holds another record there. Records
// name no sender now, but a segment written before that holds, between
// the channel and the payload, the account that published (of a length
// the row no longer says): that record is found by its name lengths, which
// sit just before its names.
func CheckRecord(f *os.File, seg uint64, channel string, seq uint64, at, size int64, buf []byte) ([]byte, error) {
	nc := len(channel)
	try := func(ns int) (bool, error) {
		n := RecordSize(&Record{Channel: channel, Sub: strings.Repeat("\x00", ns)}) + int(size)
		start := at + size - int64(n)
		if start < 0 {
			return false, nil
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		k, err := f.ReadAt(buf, start)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		r, err := DecodeRecord(buf[:k], Seed(seg))
		return err == nil && r.Channel == channel && r.Seq == seq && len(r.Sub) == ns, nil
	}
	if ok, err := try(0); ok || err != nil {
		return buf, err
	}
	// An older record: read what may precede the payload and look for the
	// name lengths (chanLen nc, then subLen ns) ns+nc+4 bytes before it.
	w := min(at, int64(4+nc+MaxName))
	head := make([]byte, w)
	if _, err := f.ReadAt(head, at-w); err != nil {
		return buf, err
	}
	for ns := 1; ns <= MaxName && int64(ns+nc+4) <= w; ns++ {
		p := int(w) - ns - nc - 4
		if binary.LittleEndian.Uint16(head[p:]) != uint16(nc) || binary.LittleEndian.Uint16(head[p+2:]) != uint16(ns) ||
			string(head[p+4:p+4+nc]) != channel {
			continue
		}
		if ok, err := try(ns); ok || err != nil {
			return buf, err
		}
	}
	return buf, ErrReused
}
