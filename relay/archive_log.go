package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// emptyBlob is the payload column of a row whose payload is in the log.
var emptyBlob = []byte{}

// openLog opens a file-backed archive's log, replays into the index what
// the index does not hold yet, and starts the segment this run appends to.
// It runs before the archive's goroutines start, while the writer still
// commits with a full sync.
func (a *archive) openLog(ctx context.Context, dir string, sync bool) error {
	l, segs, err := openSegLog(dir, sync)
	if err != nil {
		return err
	}
	a.seglog = l
	from, err := a.loadApplied(ctx)
	if err != nil {
		return err
	}
	next := max(from.seg, 1)
	if len(segs) > 0 {
		next = max(next, segs[len(segs)-1]+1)
	}
	if err := a.replay(ctx, segs, from, logPos{next, 0}); err != nil {
		return fmt.Errorf("log replay: %w", err)
	}
	if err := l.startSegment(next); err != nil {
		return err
	}
	a.applied = logPos{next, 0}
	// The log is what makes an entry durable; the index commits without
	// a sync. A machine crash may take back its last transactions, which
	// the next open replays from the log. (SQLite in WAL mode keeps the
	// file itself consistent at NORMAL: only checkpoints sync it.)
	if sync {
		if _, err := a.w.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
			return err
		}
	}
	return nil
}

// loadApplied reads the log position the index holds up to.
func (a *archive) loadApplied(ctx context.Context) (logPos, error) {
	var pos logPos
	rows, err := a.w.QueryContext(ctx, `SELECT key, value FROM state WHERE key IN ('log_seg', 'log_off')`)
	if err != nil {
		return pos, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return pos, err
		}
		if k == "log_seg" {
			pos.seg = uint64(v)
		} else {
			pos.off = v
		}
	}
	return pos, rows.Err()
}

// replay writes the rows and channel rows of the log's records from
// from, segment by segment up to each one's end or its torn tail, and
// then records next as the position the index holds up to, all in one
// transaction. A segment's torn tail was never acknowledged, and nothing
// is ever written after it: the next segment is a new run's.
func (a *archive) replay(ctx context.Context, segs []uint64, from, next logPos) (err error) {
	if _, err := a.w.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			a.w.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	// The log is the truth: a row the index holds where a record goes
	// (damage) is replaced by the record.
	put, err := a.w.PrepareContext(ctx, `INSERT INTO messages (channel, seq, entry_type, ts, payload, sub, seg, at, size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, seq) DO UPDATE SET entry_type = excluded.entry_type,
		ts = excluded.ts, payload = excluded.payload, sub = excluded.sub, seg = excluded.seg, at = excluded.at, size = excluded.size`)
	if err != nil {
		return err
	}
	defer put.Close()
	n := 0
	handshakes := make(map[string]bool) // channels given handshake entries
	for _, seg := range segs {
		if seg < from.seg {
			continue
		}
		off := int64(0)
		if seg == from.seg {
			off = from.off
		}
		_, err := a.seglog.scan(seg, off, func(r *logRec, at int64) error {
			n++
			if r.kind == recEntry {
				if _, err := put.ExecContext(ctx, r.channel, int64(r.seq), int64(r.entryType), r.ts, emptyBlob, r.sub,
					int64(seg), at, int64(len(r.payload))); err != nil {
					return err
				}
				if r.entryType != EntryApp {
					handshakes[r.channel] = true
				}
			}
			if r.flags&recDirty == 0 {
				return nil
			}
			var epoch any
			if r.flags&recHasEpoch != 0 {
				epoch = int64(r.epoch)
			}
			_, err := a.upsert.ExecContext(ctx, r.channel, int64(r.reserved), epoch)
			return err
		})
		if err != nil {
			return fmt.Errorf("segment %d: %w", seg, err)
		}
	}
	// The cap of application entries applies when the committer first
	// loads a channel (loadRuns); the handshake entries' is applied here,
	// as write applies it. The usage is recomputed below.
	for name := range handshakes {
		if err := a.trimHandshakes(ctx, name, make(map[string]int64)); err != nil {
			return err
		}
	}
	if n > 0 {
		// The usage saved at the last clean stop cannot include what
		// the index had not written.
		if _, err := a.w.ExecContext(ctx, `UPDATE state SET value = 0 WHERE key = 'usage_clean'`); err != nil {
			return err
		}
	}
	if _, err := a.setApplied.ExecContext(ctx, int64(next.seg), next.off); err != nil {
		return err
	}
	_, err = a.w.ExecContext(ctx, "COMMIT")
	return err
}

// collectSegments removes the segments no row points into any more: all
// of them below the one the index is applying, which holds the log's end.
// Their removal waits for a synced commit (the deletes that emptied them
// must not be taken back by a crash) and for the reads that began before.
func (a *archive) collectSegments(ctx context.Context) {
	if a.seglog == nil || a.failure() != nil {
		return
	}
	var dead []uint64
	for _, seg := range a.seglog.list() {
		if seg >= a.applied.seg {
			break
		}
		var one int
		err := a.segUsed.QueryRowContext(ctx, int64(seg)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			dead = append(dead, seg)
		} else if err != nil {
			a.log.Error("relay: archive log collection failed", "err", err)
			return
		}
	}
	if len(dead) == 0 {
		return
	}
	if a.seglog.sync {
		if err := a.syncedCommit(ctx); err != nil {
			a.log.Error("relay: archive log collection failed", "err", err)
			return
		}
	}
	for _, seg := range dead {
		a.seglog.drop(seg)
	}
}

// syncedCommit commits a transaction with a full sync of the writer's
// WAL, which makes every earlier commit durable too.
func (a *archive) syncedCommit(ctx context.Context) error {
	if _, err := a.w.ExecContext(ctx, "PRAGMA synchronous=FULL"); err != nil {
		return err
	}
	_, err := a.w.ExecContext(ctx, `INSERT INTO state (key, value) VALUES ('log_synced', ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, int64(a.applied.seg))
	if _, perr := a.w.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err == nil {
		err = perr
	}
	return err
}
