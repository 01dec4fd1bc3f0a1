package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
	"github.com/skytale-oss/skytale/relay/internal/sqlitearchive"
)

// LogDir is the folder of the log of a file-backed archive whose SQLite
// file is dbPath (Config.DBPath): the payloads are there, and the file
// holds the index. The two make one archive, to be kept, copied and
// restored together.
func LogDir(dbPath string) string { return sqlitearchive.LogDir(dbPath) }

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
		if !errors.Is(err, seglog.ErrReused) || attempt == 3 {
			return err
		}
	}
}

func backupArchive(ctx context.Context, src, dst string) error {
	unlock, err := seglog.LockShared(LogDir(src))
	if err != nil {
		return err
	}
	defer unlock()
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
			if f, err = seglog.Copy(from, to, seg); err != nil {
				return err
			}
		}
		// The record the row points to, in the copy.
		if buf, err = seglog.CheckRecord(f, seg, channel, uint64(seq), at, size, buf); err != nil {
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
		segs, err := seglog.List(from)
		if err != nil {
			return err
		}
		for _, s := range segs {
			if s < uint64(applied) {
				continue
			}
			if _, err := os.Stat(filepath.Join(to, seglog.Name(s))); err == nil {
				continue // copied for its rows
			}
			cp, err := seglog.Copy(from, to, s)
			if err != nil && !errors.Is(err, seglog.ErrReused) {
				return err
			}
			if cp != nil {
				cp.Close()
			}
		}
	}
	if _, err := os.Stat(to); err == nil {
		return seglog.SyncDir(to)
	}
	return nil
}
