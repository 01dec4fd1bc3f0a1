package sqlitearchive

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

// emptyBlob is the payload column of a row whose payload is in the log.
var emptyBlob = []byte{}

// openLog opens a file-backed archive's log, replays into the index what
// the index does not hold yet, and starts the segment this run appends to.
// It runs before the archive's goroutines start, while the writer still
// commits with a full sync.
func (a *Archive) openLog(ctx context.Context, dir string, sync bool, maxSeg int64) error {
	l, segs, err := seglog.Open(dir, sync, maxSeg)
	if err != nil {
		return err
	}
	a.seglog = l
	// The rows of entries stored before the log, which migrateInline
	// moves into it: an index that is empty once they are moved, and
	// that no later row enters. (Building it reads the table once, at
	// the first open of an archive from before the log.)
	if _, err := a.w.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS messages_inline ON messages (id) WHERE seg IS NULL`); err != nil {
		return err
	}
	from, err := a.loadApplied(ctx)
	if err != nil {
		return err
	}
	if err := a.checkSegments(ctx, segs); err != nil {
		return err
	}
	// Above every segment the index may point into, whether or not its
	// file is there.
	next := from.Seg + 1
	if len(segs) > 0 {
		next = max(next, segs[len(segs)-1]+1)
	}
	if err := a.replay(ctx, segs, from, seglog.Pos{Seg: next, Off: 0}); err != nil {
		return fmt.Errorf("log replay: %w", err)
	}
	if err := a.loadSenderless(ctx, next); err != nil {
		return err
	}
	if err := l.StartSegment(next); err != nil {
		return err
	}
	a.applied = seglog.Pos{Seg: next, Off: 0}
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

// loadSenderless reads the first segment whose records are known to
// name no sender (the state key 'senderless_from'), setting it to next
// at the first open that has none: relays before it wrote the
// publishing account into each record (subLen), and a segment's file
// could be a recycled one holding older records past its own. The
// compactor moves the entries out of the segments below it
// (moveSenderSegments), and the log removes their files instead of
// reusing them, so no file of the archive keeps those names.
func (a *Archive) loadSenderless(ctx context.Context, next uint64) error {
	var from int64
	err := a.w.QueryRowContext(ctx, `SELECT value FROM state WHERE key = 'senderless_from'`).Scan(&from)
	if errors.Is(err, sql.ErrNoRows) {
		from = int64(next)
		_, err = a.w.ExecContext(ctx, `INSERT INTO state (key, value) VALUES ('senderless_from', ?)`, from)
	}
	if err != nil {
		return err
	}
	a.seglog.NoReuseBelow = uint64(from)
	return nil
}

// moveSenderSegments moves the entries of every segment below the
// first senderless one (see loadSenderless) to the end of the log; the
// indexer's collection then removes the emptied files.
func (a *Archive) moveSenderSegments() error {
	var moved int
	for _, seg := range a.seglog.List() {
		if seg >= a.seglog.NoReuseBelow || seg >= a.seglog.Current() {
			break
		}
		select {
		case <-a.quit:
			return errStopping
		default:
		}
		if err := a.MoveSegment(seg); err != nil {
			return err
		}
		moved++
	}
	if moved > 0 {
		a.log.Info("relay: rewrote the archive's older log segments without their senders", "segments", moved)
	}
	return nil
}

// checkSegments refuses an index that points into segments the log does
// not have: the database file without its log folder (LogDir), or with
// a damaged one. Serving it would hand out other bytes, or none, as the
// entries' payloads.
func (a *Archive) checkSegments(ctx context.Context, segs []uint64) error {
	for seg := int64(-1); ; {
		err := a.w.QueryRowContext(ctx, `SELECT seg FROM messages WHERE seg > ? ORDER BY seg LIMIT 1`, seg).Scan(&seg)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, ok := slices.BinarySearch(segs, uint64(seg)); !ok {
			return fmt.Errorf("the index points into log segment %s, which the log folder %s does not hold: "+
				"an archive is its database file and that folder, restored together", seglog.Name(uint64(seg)), a.seglog.Dir())
		}
	}
}

// loadApplied reads the log position the index holds up to.
func (a *Archive) loadApplied(ctx context.Context) (seglog.Pos, error) {
	var pos seglog.Pos
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
			pos.Seg = uint64(v)
		} else {
			pos.Off = v
		}
	}
	return pos, rows.Err()
}

// replay writes the rows and channel rows of the log's records from
// from, segment by segment up to each one's end or its torn tail, and
// then records next as the position the index holds up to, all in one
// transaction. A segment's torn tail was never acknowledged, and nothing
// is ever written after it: the next segment is a new run's.
func (a *Archive) replay(ctx context.Context, segs []uint64, from, next seglog.Pos) (err error) {
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
	put, err := a.w.PrepareContext(ctx, `INSERT INTO messages (channel, seq, entry_type, ts, payload, seg, at, size)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (channel, seq) DO UPDATE SET entry_type = excluded.entry_type,
		ts = excluded.ts, payload = excluded.payload, seg = excluded.seg, at = excluded.at, size = excluded.size`)
	if err != nil {
		return err
	}
	defer put.Close()
	// A moved entry's record changes only where the row points, if the
	// row is there still.
	move, err := a.w.PrepareContext(ctx, `UPDATE messages SET seg = ?, at = ?, payload = x'' WHERE channel = ? AND seq = ?`)
	if err != nil {
		return err
	}
	defer move.Close()
	n := 0
	handshakes := make(map[string]bool) // channels given handshake entries
	for _, seg := range segs {
		if seg < from.Seg {
			continue
		}
		off := int64(0)
		if seg == from.Seg {
			off = from.Off
		}
		_, err := a.seglog.Scan(seg, off, func(r *seglog.Record, at int64) error {
			n++
			if r.Flags&seglog.FlagMoved != 0 {
				_, err := move.ExecContext(ctx, int64(seg), at, r.Channel, int64(r.Seq))
				return err
			}
			if r.Kind == seglog.KindEntry {
				if _, err := put.ExecContext(ctx, r.Channel, int64(r.Seq), int64(r.EntryType), r.TS, emptyBlob,
					int64(seg), at, int64(len(r.Payload))); err != nil {
					return err
				}
				if r.EntryType != backend.EntryApp {
					handshakes[r.Channel] = true
				}
			}
			if r.Flags&seglog.FlagDirty == 0 {
				return nil
			}
			var epoch any
			if r.Flags&seglog.FlagHasEpoch != 0 {
				epoch = int64(r.Epoch)
			}
			_, err := a.upsert.ExecContext(ctx, r.Channel, int64(r.Reserved), epoch, "")
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
	if _, err := a.setApplied.ExecContext(ctx, int64(next.Seg), next.Off); err != nil {
		return err
	}
	_, err = a.w.ExecContext(ctx, "COMMIT")
	return err
}

// collectSegments removes the segments no row points into any more: all
// of them below the one the index is applying, which holds the log's end.
// Their removal waits for a synced commit (the deletes that emptied them
// must not be taken back by a crash) and for the reads that began before.
func (a *Archive) collectSegments(ctx context.Context) {
	if a.seglog == nil || a.failure() != nil {
		return
	}
	var dead []uint64
	for _, seg := range a.seglog.List() {
		if seg >= a.applied.Seg {
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
	if a.seglog.Syncs() {
		if err := a.syncedCommit(ctx); err != nil {
			a.log.Error("relay: archive log collection failed", "err", err)
			return
		}
	}
	for _, seg := range dead {
		a.seglog.Drop(seg)
	}
}

// syncedCommit commits a transaction with a full sync of the writer's
// WAL, which makes every earlier commit durable too.
func (a *Archive) syncedCommit(ctx context.Context) error {
	if _, err := a.w.ExecContext(ctx, "PRAGMA synchronous=FULL"); err != nil {
		return err
	}
	_, err := a.w.ExecContext(ctx, `INSERT INTO state (key, value) VALUES ('log_synced', ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, int64(a.applied.Seg))
	if _, perr := a.w.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err == nil {
		err = perr
	}
	return err
}

// The compactor bounds the log's size by what the archive holds. The cap
// and the TTL delete rows, and a segment goes once no row points into it;
// but one entry a quiet channel keeps would hold a whole segment, and a
// publisher who spreads entries over quiet channels could so keep every
// segment written within the TTL. Once the segments hold more than twice
// the payload bytes stored (plus CompactSlack), the compactor moves the
// live entries of the emptiest old segment to the end of the log, through
// the logger like a publish (seglog.FlagMoved), and the indexer points their rows
// at the new place; the emptied segment is then removed. Each move of a
// segment under half full frees more than it writes.
const (
	CompactSlack = 4   // segments of the largest size
	compactPage  = 256 // rows moved at a time
	// movePageBytes bounds the payloads a page of moves holds: a page
	// ends at the row that reaches it. A page's rows are read before
	// its moves go to the logger, and 256 of the largest handshakes
	// would be 4 GiB.
	movePageBytes = 4 << 20
)

// runCompactor runs compact when the indexer starts a new segment and at
// every sweep interval, until stop.
func (a *Archive) runCompactor() {
	t := time.NewTicker(a.sweepEvery)
	defer t.Stop()
	if err := a.migrateInline(); err != nil && !errors.Is(err, errStopping) {
		a.log.Error("relay: moving the archive's older payloads into its log failed", "err", err)
	}
	if err := a.moveSenderSegments(); err != nil && !errors.Is(err, errStopping) {
		a.log.Error("relay: rewriting the archive's older log segments failed", "err", err)
	}
	for {
		select {
		case <-a.quit:
			return
		case <-a.compact:
		case <-t.C:
		}
		if err := a.compactLog(); err != nil && !errors.Is(err, errStopping) {
			a.log.Error("relay: archive log compaction failed", "err", err)
		}
	}
}

var errStopping = errors.New("relay: archive stopping")

// compactLog moves the live entries of the emptiest old segments, until
// the log would be back within twice what the archive stores.
func (a *Archive) compactLog() error {
	segs, sizes := a.seglog.Footprint()
	var total int64
	for _, n := range sizes {
		total += n
	}
	bound := 2*a.StoredBytes() + CompactSlack*a.seglog.MaxSegment()
	if total <= bound {
		return nil
	}
	live := make(map[uint64]int64)
	rows, err := a.db.Query(`SELECT seg, sum(size) FROM messages WHERE seg IS NOT NULL GROUP BY seg`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var seg, n int64
		if err := rows.Scan(&seg, &n); err != nil {
			rows.Close()
			return err
		}
		live[uint64(seg)] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// The segments below the current one under half full, emptiest
	// first. One that holds no entry goes without a move.
	type victim struct {
		seg        uint64
		live, size int64
	}
	var vs []victim
	cur := a.seglog.Current()
	for i, seg := range segs {
		if n, ok := live[seg]; ok && seg < cur && 2*n < sizes[i] {
			vs = append(vs, victim{seg, n, sizes[i]})
		}
	}
	slices.SortFunc(vs, func(x, y victim) int { return cmp.Compare(x.live*y.size, y.live*x.size) })
	for _, v := range vs {
		if total <= bound {
			break
		}
		if err := a.MoveSegment(v.seg); err != nil {
			return err
		}
		total += v.live - v.size
	}
	return nil
}

// MoveSegment moves every entry stored in seg to the end of the log.
func (a *Archive) MoveSegment(seg uint64) error {
	g := a.seglog.Pin()
	defer a.seglog.Unpin(g)
	f, err := a.seglog.File(seg)
	if err != nil {
		return err
	}
	after := int64(-1)
	for {
		read, _, err := a.movePage(`SELECT channel, seq, entry_type, ts, at, size FROM messages
			WHERE seg = ? AND at > ? ORDER BY at LIMIT ?`, []any{int64(seg), after}, func(rows *sql.Rows, r *pubReq) (bool, error) {
			var at int64
			if err := rows.Scan(&r.channel, &r.seq, &r.hdr.entryType, &r.ts, &at, &r.size); err != nil {
				return false, err
			}
			r.from, after = seglog.Pos{Seg: seg, Off: at}, at
			r.payload = make([]byte, r.size)
			if _, err := f.ReadAt(r.payload, at); err != nil {
				return false, fmt.Errorf("segment %d: %w", seg, err)
			}
			return true, nil
		})
		if err != nil || read == 0 {
			return err
		}
	}
}

// migrateInline moves into the log the payloads of the entries an
// archive stored before it had one, in their rows (seg NULL), oldest
// first and a page at a time, as the compactor moves a segment's. Until
// then they are served from their rows. A crash midway loses nothing: a
// row is repointed only by the index's transaction after its record's
// flush, or by the replay of that record. A row no record can carry (an
// account name over seglog.MaxName, which the relay took before the log)
// stays as it is, served from its row until the cap or the TTL removes
// it. The database file keeps its size (SQLite reuses the freed pages for
// later rows; VACUUM, or a backup, gives them back).
func (a *Archive) migrateInline() error {
	after := int64(0)
	var moved, kept int
	for {
		read, n, err := a.movePage(`SELECT id, channel, seq, entry_type, ts, payload FROM messages
			WHERE seg IS NULL AND id > ? ORDER BY id LIMIT ?`, []any{after}, func(rows *sql.Rows, r *pubReq) (bool, error) {
			r.inline = true
			if err := rows.Scan(&after, &r.channel, &r.seq, &r.hdr.entryType, &r.ts, &r.payload); err != nil {
				return false, err
			}
			r.size = int64(len(r.payload))
			return seglog.Fits(r.channel, r.sub, len(r.payload)), nil
		})
		moved, kept = moved+n, kept+read-n
		if err != nil || read == 0 {
			if moved+kept > 0 && err == nil {
				a.log.Info("relay: moved the archive's older payloads into its log", "entries", moved, "kept_in_rows", kept)
			}
			return err
		}
	}
}

// movePage reads up to compactPage entries to move with query (args,
// then the page's size), each made by scan, which says whether to move
// it, and passes those through the logger like publishes. A page also
// ends at the row that brings its payloads to movePageBytes (scan has
// paged past it). It returns once their records are flushed, with how
// many rows it read and how many it moved.
func (a *Archive) movePage(query string, args []any, scan func(*sql.Rows, *pubReq) (bool, error)) (read, moved int, err error) {
	select {
	case <-a.quit:
		return 0, 0, errStopping
	default:
	}
	rows, err := a.db.Query(query, append(args, compactPage)...)
	if err != nil {
		return 0, 0, err
	}
	var page []*pubReq
	var held int64
	for held < movePageBytes && rows.Next() {
		read++
		r := &pubReq{kind: kindMove}
		ok, err := scan(rows, r)
		if err != nil {
			rows.Close()
			return read, 0, err
		}
		if ok {
			page = append(page, r)
			held += r.size
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return read, 0, err
	}
	done := make(chan error, len(page))
	for _, r := range page {
		// Held like a publish's payload until the logger has it.
		r.weight, r.done = r.size, done
		a.Acquire(r.size)
		a.submit(r)
	}
	for range page {
		if err := <-done; err != nil {
			return read, 0, err
		}
	}
	return read, len(page), nil
}
