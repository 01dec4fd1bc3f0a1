package sqlitearchive

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// logWindow reads a segment through a window of it, backend.LogWindowSize
// long (the page's, PageEncoder.Window): the entries of a channel
// published together lie together in the log, so a page's are mostly in a
// few windows, each one pread.
type logWindow struct {
	f   *os.File
	seg uint64
	off int64  // where the window begins
	n   int    // bytes in it
	buf []byte // backend.LogWindowSize
}

func (w *logWindow) reset(f *os.File, seg uint64) { w.f, w.seg, w.n = f, seg, 0 }

func (w *logWindow) ReadAt(p []byte, off int64) (int, error) {
	if off >= w.off && off+int64(len(p)) <= w.off+int64(w.n) {
		return copy(p, w.buf[off-w.off:w.n]), nil
	}
	if len(p) > len(w.buf)/2 {
		return w.f.ReadAt(p, off)
	}
	n, err := w.f.ReadAt(w.buf, off)
	if n < len(p) {
		w.n = 0
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	w.off, w.n = off, n
	return copy(p, w.buf), nil
}

// WritePage writes the JSON body of GET /v1/messages (appOnly) or GET
// /v1/sync to w: the entries of a channel after since, up to limit of
// them and up to maxBytes of body (but always one entry, if there is one),
// and has_more, which is true when either bound cut the page, truncated
// and oldest_seq (see cutOff). begin is called once the archive has
// answered, before the first byte of the body; started reports whether it
// was. An error after that leaves a partial body, which the caller can
// only abort.
func (a *Archive) WritePage(ctx context.Context, w io.Writer, begin func(), name string, since uint64, limit, maxBytes int, appOnly bool) (started bool, err error) {
	if a.seglog != nil {
		// Before the snapshot: no segment its rows point into goes
		// while the page is read.
		g := a.seglog.Pin()
		defer a.seglog.Unpin(g)
	}
	// One read transaction: the page and what it says of the floors come
	// from one snapshot, so a delete committed between them cannot hide
	// entries without the page saying so.
	tx, err := a.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return false, fmt.Errorf("relay: archive read: %w", err)
	}
	defer tx.Rollback()
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	floor, err := a.readFloor(ctx, name)
	if err != nil {
		return false, fmt.Errorf("relay: archive read: %w", err)
	}
	trunc, oldest, err := a.cutOff(ctx, tx, name, since, cutoff, floor, appOnly)
	if err != nil {
		return false, fmt.Errorf("relay: archive read: %w", err)
	}
	var rows *sql.Rows
	if since < math.MaxInt64 {
		stmt := a.readAll
		if appOnly {
			stmt = a.readApp
		}
		rows, err = tx.StmtContext(ctx, stmt).QueryContext(ctx, name, int64(since), cutoff, limit+1, int64(floor))
		if err != nil {
			return false, fmt.Errorf("relay: archive read: %w", err)
		}
		defer rows.Close()
	}
	begin()
	pe := backend.NewPageEncoder(w, maxBytes, appOnly)
	defer pe.Release()
	win := logWindow{buf: pe.Window()}
	pe.Truncated, pe.Oldest = trunc, oldest
	for n := 0; rows != nil && rows.Next(); n++ {
		if n == limit {
			pe.More = true
			break
		}
		var seq, et, ts, at, size int64
		var payload sql.RawBytes
		var seg sql.NullInt64
		if err := rows.Scan(&seq, &et, &ts, &payload, &seg, &at, &size); err != nil {
			return true, fmt.Errorf("relay: archive read: %w", err)
		}
		var fits bool
		if seg.Valid {
			if win.f == nil || win.seg != uint64(seg.Int64) {
				f, err := a.seglog.File(uint64(seg.Int64))
				if err != nil {
					return true, fmt.Errorf("relay: archive read: %w", err)
				}
				win.reset(f, uint64(seg.Int64))
			}
			fits, err = pe.AddAt(uint64(seq), uint8(et), ts, &win, at, size)
		} else {
			fits, err = pe.Add(uint64(seq), uint8(et), ts, payload)
		}
		if err != nil {
			return true, err
		}
		if !fits {
			break
		}
	}
	if rows != nil {
		if err := rows.Err(); err != nil {
			return true, fmt.Errorf("relay: archive read: %w", err)
		}
	}
	return true, pe.Finish()
}

// cutOff reports whether a read of a channel's log (application entries
// when appOnly, else all) from since is truncated, and the oldest seq the
// log holds (0 when it holds nothing). A read is truncated when an entry
// of the log after since is gone or hidden: deleted by the cap or the TTL
// (seqs up to the channel's drop floor in the floors table), or still
// stored but past the TTL cutoff or below the cap floor. Seqs are not
// contiguous, so this never compares since with the oldest seq: a gap
// below the oldest entry is not a loss.
func (a *Archive) cutOff(ctx context.Context, tx *sql.Tx, name string, since uint64, cutoff int64, floor uint64, appOnly bool) (bool, uint64, error) {
	var oldest int64
	q := a.oldestAll
	if appOnly {
		q = a.oldestApp
	}
	err := tx.StmtContext(ctx, q).QueryRowContext(ctx, name, cutoff, int64(floor)).Scan(&oldest)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, 0, err
	}
	if since >= math.MaxInt64 {
		return false, uint64(oldest), nil
	}
	var app, hs int64
	err = tx.StmtContext(ctx, a.dropsQ).QueryRowContext(ctx, name).Scan(&app, &hs)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, 0, err
	}
	dropped := app
	if !appOnly {
		dropped = max(app, hs)
	}
	if int64(since) < dropped {
		return true, uint64(oldest), nil
	}
	// Expired rows are a prefix of the archive (ts grows with the row
	// id) and rows past the cap a prefix of the channel's application
	// rows, so the first row after since tells whether any is hidden.
	var seq, ts int64
	err = tx.StmtContext(ctx, a.firstApp).QueryRowContext(ctx, name, int64(since)).Scan(&seq, &ts)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, 0, err
	}
	if err == nil && (ts < cutoff || uint64(seq) < floor) {
		return true, uint64(oldest), nil
	}
	if !appOnly {
		err = tx.StmtContext(ctx, a.firstAll).QueryRowContext(ctx, name, int64(since)).Scan(&seq, &ts)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return false, 0, err
		}
		if err == nil && ts < cutoff {
			return true, uint64(oldest), nil
		}
	}
	return false, uint64(oldest), nil
}
