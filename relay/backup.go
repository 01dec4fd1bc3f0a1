package relay

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// LogDir is the folder of the log of a file-backed archive whose SQLite
// file is dbPath (Config.DBPath): the payloads are there, and the file
// holds the index. The two make one archive, to be kept, copied and
// restored together.
func LogDir(dbPath string) string { return dbPath + "-log" }

// BackupArchive writes a consistent copy of the file-backed archive at
// src (the Config.DBPath of a relay that may be running, in this process
// or another) to dst, which must not exist, and to LogDir(dst): the
// index as of one moment (SQLite's VACUUM INTO) and the log segments its
// rows point into. A relay started on the copy serves what the archive
// held at that moment, and replays whatever the copied segments hold
// after it.
//
// A running relay removes segments no row points into any more and
// reuses their files. The copy holds a shared lock of the log's lock
// file from before the index is copied until the segments are, and the
// relay removes a segment only under the exclusive lock, so none the copy
// needs goes. Every row of the copy is checked against the record it
// points to all the same (each record's checksum covers its segment's
// number), and the copy is made again, up to three times, if one does not
// match.
func BackupArchive(ctx context.Context, src, dst string) error {
	// Refused before anything is written: a failed copy removes what it
	// wrote, which must never be someone's file.
	for _, p := range []string{dst, dst + "-wal", dst + "-shm", LogDir(dst)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("relay: backup: %s exists already (or cannot be checked: %v)", p, err)
		}
	}
	for attempt := 1; ; attempt++ {
		err := backupArchive(ctx, src, dst)
		if err == nil {
			return nil
		}
		for _, p := range []string{dst, dst + "-wal", dst + "-shm"} {
			os.Remove(p)
		}
		os.RemoveAll(LogDir(dst))
		if !errors.Is(err, errSegmentReused) || attempt == 3 {
			return err
		}
	}
}

var errSegmentReused = errors.New("relay: backup: a segment was removed while it was copied")

func backupArchive(ctx context.Context, src, dst string) error {
	if lock, err := os.Open(filepath.Join(LogDir(src), lockName)); err == nil {
		defer lock.Close()
		if err := lockShared(lock); err != nil {
			return err
		}
		defer unlock(lock)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := sqlitedb.VacuumInto(ctx, src, dst); err != nil {
		return err
	}
	db, err := sqlitedb.Open(dst)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT channel, seq, seg, at, size FROM messages
		WHERE seg IS NOT NULL ORDER BY seg, at`)
	if err != nil {
		return err
	}
	defer rows.Close()
	from, to := LogDir(src), LogDir(dst)
	var f *os.File
	seg := uint64(0)
	var buf []byte
	for rows.Next() {
		var channel string
		var seq, s, at, size int64
		if err := rows.Scan(&channel, &seq, &s, &at, &size); err != nil {
			return err
		}
		if f == nil || uint64(s) != seg {
			if f != nil {
				f.Close()
			}
			seg = uint64(s)
			if f, err = copySegment(from, to, seg); err != nil {
				return err
			}
		}
		// The record the row points to, in the copy.
		if buf, err = checkRecord(f, seg, channel, uint64(seq), at, size, buf); err != nil {
			f.Close()
			return err
		}
	}
	if f != nil {
		f.Close()
	}
	if err := rows.Err(); err != nil {
		return err
	}
	// The entries acknowledged before the copy that the index did not
	// hold yet are in the segments from the position it holds up to: a
	// relay started on the copy replays them.
	var applied int64
	err = db.QueryRowContext(ctx, `SELECT value FROM state WHERE key = 'log_seg'`).Scan(&applied)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if err == nil {
		segs, err := listSegments(from)
		if err != nil {
			return err
		}
		for _, s := range segs {
			if s < uint64(applied) {
				continue
			}
			if _, err := os.Stat(filepath.Join(to, segName(s))); err == nil {
				continue // copied for its rows
			}
			cp, err := copySegment(from, to, s)
			if err != nil && !errors.Is(err, errSegmentReused) {
				return err
			}
			if cp != nil {
				cp.Close()
			}
		}
	}
	if _, err := os.Stat(to); err == nil {
		return syncDir(to)
	}
	return nil
}

// copySegment copies a segment file into the folder to, which it
// creates, and returns the copy, open, once it is on disk.
func copySegment(from, to string, seg uint64) (*os.File, error) {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return nil, err
	}
	in, err := os.Open(filepath.Join(from, segName(seg)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errSegmentReused
	}
	if err != nil {
		return nil, err
	}
	defer in.Close()
	out, err := os.OpenFile(filepath.Join(to, segName(seg)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
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

// checkRecord checks that the record of channel's entry seq, whose payload
// of size bytes is at offset at of segment seg (open as f), is there: a
// segment whose number was reused holds another record there. Records
// name no sender now, but a segment written before that holds, between
// the channel and the payload, the account that published (of a length
// the row no longer says): that record is found by its name lengths, which
// sit just before its names.
func checkRecord(f *os.File, seg uint64, channel string, seq uint64, at, size int64, buf []byte) ([]byte, error) {
	nc := len(channel)
	try := func(ns int) (bool, error) {
		n := recordSize(&logRec{channel: channel, sub: strings.Repeat("\x00", ns)}) + int(size)
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
		r, err := decodeRecord(buf[:k], segSeed(seg))
		return err == nil && r.channel == channel && r.seq == seq && len(r.sub) == ns, nil
	}
	if ok, err := try(0); ok || err != nil {
		return buf, err
	}
	// An older record: read what may precede the payload and look for the
	// name lengths (chanLen nc, then subLen ns) ns+nc+4 bytes before it.
	w := min(at, int64(4+nc+maxRecordName))
	head := make([]byte, w)
	if _, err := f.ReadAt(head, at-w); err != nil {
		return buf, err
	}
	for ns := 1; ns <= maxRecordName && int64(ns+nc+4) <= w; ns++ {
		p := int(w) - ns - nc - 4
		if binary.LittleEndian.Uint16(head[p:]) != uint16(nc) || binary.LittleEndian.Uint16(head[p+2:]) != uint16(ns) ||
			string(head[p+4:p+4+nc]) != channel {
			continue
		}
		if ok, err := try(ns); ok || err != nil {
			return buf, err
		}
	}
	return buf, errSegmentReused
}
