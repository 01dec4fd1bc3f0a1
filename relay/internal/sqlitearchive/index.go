package sqlitearchive

import (
	"context"
	"fmt"
	"time"

	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

// loggedBatch is a batch the logger has flushed (ok) or failed, on its
// way to the indexer; end is the log's end after it.
type loggedBatch struct {
	reqs []*pubReq
	end  seglog.Pos
	ok   bool
}

// runLogger is the first committer stage of a file-backed archive: it
// appends each batch to the log with one flush, then delivers the held
// entries and answers the batch. An acknowledged entry is thus in the log,
// which an open replays into the index; reads wait for the indexer (see
// commitMark), so an acknowledged entry is also readable.
func (a *Archive) runLogger() {
	defer close(a.logged)
	for r := range a.seqd {
		// A new slice each time: the indexer owns it after.
		batch := a.drain(append(make([]*pubReq, 0, 64), r))
		err := a.failure()
		var end seglog.Pos
		if err == nil {
			t0 := time.Now()
			var lerr error
			end, lerr = a.appendLog(batch)
			a.observeCommit(time.Since(t0))
			if lerr != nil {
				err = a.fail(fmt.Errorf("relay: archive log: %w", lerr))
			}
		}
		a.release(batch, err)
		a.logged <- loggedBatch{batch, end, err == nil}
		if len(a.logged) >= cap(a.logged)/2 {
			a.mark.wake()
		}
		a.yield(batch)
	}
}

// maxLogBuf is the largest batch encoding the logger keeps for the next.
const maxLogBuf = 4 << 20

// appendLog writes a batch's records to the log and flushes them. Each
// stored entry learns where its payload is, and lets go of the payload:
// the indexer needs only its place.
func (a *Archive) appendLog(batch []*pubReq) (seglog.Pos, error) {
	n := 0
	for _, r := range batch {
		if rec, ok := logRecord(r); ok {
			n += seglog.RecordSize(&rec)
		}
	}
	if n == 0 {
		return a.seglog.End(), nil
	}
	seed, err := a.seglog.Room(n)
	if err != nil {
		return seglog.Pos{}, err
	}
	at := a.seglog.End() // where the batch goes
	buf := a.logBuf[:0]
	for _, r := range batch {
		rec, ok := logRecord(r)
		if !ok {
			continue
		}
		start := len(buf)
		var rel int
		if buf, rel, err = seglog.AppendRecord(buf, seed, &rec); err != nil {
			return seglog.Pos{}, err
		}
		if r.kind != kindFence {
			// The record holds the payload now. (After a failed
			// append nothing reads either: the batch is refused.)
			r.seg, r.at, r.payload = at.Seg, at.Off+int64(start+rel), nil
		}
	}
	if err := a.seglog.Append(buf); err != nil {
		return seglog.Pos{}, err
	}
	a.logBuf = buf[:0]
	if cap(buf) > maxLogBuf {
		a.logBuf = nil
	}
	return a.seglog.End(), nil
}

// logRecord returns the log record of a request, or false for one that
// stores nothing.
func logRecord(r *pubReq) (seglog.Record, bool) {
	if r.kind == kindMove {
		return seglog.Record{Kind: seglog.KindEntry, Flags: seglog.FlagMoved, EntryType: r.hdr.entryType, Seq: r.seq, TS: r.ts,
			Channel: r.channel, Payload: r.payload}, true
	}
	if r.kind == kindReply || r.refused != nil || r.st == nil {
		return seglog.Record{}, false
	}
	rec := seglog.Record{Kind: seglog.KindEntry, EntryType: r.hdr.entryType, Seq: r.seq, TS: r.ts,
		Reserved: r.reserved, Epoch: r.epoch, Channel: r.channel, Payload: r.payload}
	if r.kind == kindFence {
		rec = seglog.Record{Kind: seglog.KindChan, Reserved: r.reserved, Epoch: r.epoch, Channel: r.channel}
	}
	if r.dirty {
		rec.Flags |= seglog.FlagDirty
	}
	if r.hasEpoch {
		rec.Flags |= seglog.FlagHasEpoch
	}
	return rec, true
}

// maxIndexBatch bounds the requests the indexer writes in one transaction.
const maxIndexBatch = 4 * maxBatch

// A smaller transaction than lingerRows waits up to lingerFor for more
// batches, unless a read waits for it. The acks do not wait for the index,
// and a one-row transaction costs about as much as one of hundreds (the
// pages it changes are written whole): at one publish in flight the
// indexer's CPU per publish was most of the relay's.
const (
	lingerRows = 256
	lingerFor  = 2 * time.Millisecond
)

// indexBatch is what the indexer writes in one transaction: the rows of
// the flushed batches, and n, the requests of all of them.
type indexBatch struct {
	rows []*pubReq
	n    int
	end  seglog.Pos
}

func (ib *indexBatch) add(lb loggedBatch) {
	ib.n += len(lb.reqs)
	if lb.ok {
		ib.rows, ib.end = append(ib.rows, lb.reqs...), lb.end
	}
}

// gather adds the batches waiting, up to maxIndexBatch rows; true once
// the logger has stopped.
func (a *Archive) gather(ib *indexBatch) bool {
	for len(ib.rows) < maxIndexBatch {
		select {
		case lb, ok := <-a.logged:
			if !ok {
				return true
			}
			ib.add(lb)
		default:
			return false
		}
	}
	return false
}

// runIndexer is the second committer stage of a file-backed archive: it
// writes the rows of what the logger flushed, as many of its batches as
// are waiting in one transaction, without syncing (the log is durable).
func (a *Archive) runIndexer(ctx context.Context) {
	a.committerTID.Store(int64(lowerPriority(CommitterNice)))
	sweep := time.NewTicker(a.sweepEvery)
	defer sweep.Stop()
	var rows []*pubReq
	collected := a.applied.Seg
	for {
		select {
		case lb, ok := <-a.logged:
			if !ok {
				a.finish(ctx)
				return
			}
			ib := indexBatch{rows: rows[:0], end: lb.end}
			ib.add(lb)
			closed := a.gather(&ib)
			if !closed && len(ib.rows) < lingerRows {
				// Asleep, not woken by each batch the logger flushes.
				t := time.NewTimer(lingerFor)
				select {
				case <-a.mark.waiting:
				case <-t.C:
				}
				t.Stop()
				closed = a.gather(&ib)
			}
			rows, n, end := ib.rows, ib.n, ib.end
			if len(rows) > 0 && a.failure() == nil {
				if err := a.write(ctx, rows, end); err != nil {
					a.fail(fmt.Errorf("relay: archive index: %w", err))
				}
			}
			clear(rows)
			a.mark.done(n)
			// Each new segment is a time to look for ones to remove,
			// whose files the next segments reuse, and for the
			// compactor to look at the log's size; so is a move.
			if a.applied.Seg > collected || a.moved {
				if a.applied.Seg > collected {
					select {
					case a.compact <- struct{}{}:
					default:
					}
				}
				collected, a.moved = a.applied.Seg, false
				a.collectSegments(ctx)
			}
			if closed {
				a.finish(ctx)
				return
			}
		case <-sweep.C:
			a.sweepTTL(ctx)
			a.collectSegments(ctx)
		}
	}
}
