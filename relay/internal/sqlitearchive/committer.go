package sqlitearchive

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

// CommitterNice is how much nicer than the rest of the process the
// committer's thread runs (Linux). Its transactions (SQLite's CPU work and
// an fsync per batch) are what delays pushes when the CPU is contended:
// the committer works on every publish, pushes do not wait for it, and a
// push whose writer is queued behind a transaction waits for the whole
// transaction. At nice 10 the kernel gives the CPU to the readers,
// sequencer and writers first, and a committer that falls behind only
// grows its next batch (acks wait for it either way). relaybench on two
// cores, tally serve beside Centrifugo, 6 interleaved rounds: latency 1→1
// p99 483 → 208 µs and p50 65 → 41 µs; durable 16×64 0.99× and 1×1 0.94×
// (docs/BENCHMARKS-NOTES.md, "The tail, third look").
const CommitterNice = 10

// runCommitter is the committer of an archive in memory: it writes and
// answers each batch. It returns when the sequencer has stopped and
// everything it passed on is committed and answered.
func (a *Archive) runCommitter(ctx context.Context) {
	a.committerTID.Store(int64(lowerPriority(CommitterNice)))
	sweep := time.NewTicker(a.sweepEvery)
	defer sweep.Stop()
	batch := make([]*pubReq, 0, 64)
	for {
		select {
		case r, ok := <-a.seqd:
			if !ok {
				a.finish(ctx)
				return
			}
			batch = a.drain(append(batch[:0], r))
			a.commit(ctx, batch)
			clear(batch)
		case <-sweep.C:
			a.sweepTTL(ctx)
		}
	}
}

// drain adds to batch what the sequencer has passed on, up to maxBatch,
// without waiting.
func (a *Archive) drain(batch []*pubReq) []*pubReq {
	for len(batch) < maxBatch {
		select {
		case r, ok := <-a.seqd:
			if !ok {
				return batch
			}
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

func (a *Archive) commit(ctx context.Context, batch []*pubReq) {
	err := a.failure()
	if err == nil {
		t0 := time.Now()
		werr := a.write(ctx, batch, seglog.Pos{})
		a.observeCommit(time.Since(t0))
		if werr != nil {
			err = a.fail(fmt.Errorf("relay: archive write: %w", werr))
		}
	}
	a.release(batch, err)
	a.mark.done(len(batch))
	a.yield(batch)
}

// fail stops the archive after a failed write. Fail-stop: the sequencer
// has moved past state that is not durable, so carrying on could reuse an
// epoch. Every further publish is refused until a restart reloads durable
// state. It returns the first failure.
func (a *Archive) fail(err error) error {
	a.failMu.Lock()
	defer a.failMu.Unlock()
	if a.failed == nil {
		a.failed = err
		a.log.Error("relay: archive write failed; refusing publishes until restart", "err", err)
	}
	return a.failed
}

// Ready returns nil until a write fails.
func (a *Archive) Ready(context.Context) error {
	if a.failure() != nil {
		return errors.New("the archive stopped after a failed write; restart the relay")
	}
	return nil
}

// Up reports whether no write has failed.
func (a *Archive) Up() bool { return a.failure() == nil }

func (a *Archive) failure() error {
	a.failMu.Lock()
	defer a.failMu.Unlock()
	return a.failed
}

// release follows a batch's flush (err nil) or its failure: it raises the
// durable ceilings, delivers the entries that waited for durability and
// answers every request, in arrival order.
func (a *Archive) release(batch []*pubReq, err error) {
	if err == nil {
		for _, r := range batch {
			if r.dirty && r.st != nil && r.reserved > r.st.durable.Load() {
				r.st.durable.Store(r.reserved)
			}
			if r.dirty && r.st != nil && r.hasEpoch && r.refused == nil && (r.kind == kindFence || r.hdr.commit) {
				a.fences.Store(r.channel, r.epoch)
			}
		}
	}
	for _, r := range batch {
		if r.held {
			if err == nil {
				a.hub.Fanout(r.channel, r.frame, r.buf, connID(r.c))
			}
			r.st.held.Add(-1)
		}
		a.answer(r, err)
	}
}

// yield follows the answers of a small batch. The answers (and held
// pushes) just made their connections' writers the next goroutine this
// thread runs. Without a yield the committer goes on at once to its next
// transaction (hundreds of µs of CPU, then an fsync that keeps the thread)
// and the writers wait behind it: in an execution trace of the latency
// benchmark the median ack waited 370 µs for its writer to run, and
// pushes queued behind it. A busy committer (a large batch) does not
// yield: there every pause of the committer is throughput lost, and the
// other thread takes the writers anyway.
func (a *Archive) yield(batch []*pubReq) {
	if len(batch) <= yieldBatch {
		runtime.Gosched()
	}
}

// yieldBatch is the largest transaction after which the committer yields.
const yieldBatch = 64

// write stores a batch in one transaction. With a log, the rows point
// into it and the transaction records end, the log position it holds up
// to; in memory, the rows hold the payloads.
func (a *Archive) write(ctx context.Context, batch []*pubReq, end seglog.Pos) (err error) {
	if _, err := a.w.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			a.w.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	last := make(map[*chanState]*pubReq) // the last entry stored per channel
	rows := make(map[*chanState]*pubReq) // the last request per channel; it carries the channel row
	dirty := make(map[*chanState]bool)
	evicted := make(map[*chanState]uint64)
	popped := make(map[*chanState]int) // blocks evicted per channel
	handshake := make(map[*chanState]bool)
	var freed map[string]int64 // bytes deleted per account
	for _, r := range batch {
		if r.st != nil && !r.st.loaded && r.kind == kindPublish && r.refused == nil && r.hdr.entryType == backend.EntryApp {
			if err := a.loadRuns(ctx, r.st); err != nil {
				return err
			}
		}
	}
	args := a.args[:0]
	for _, r := range batch {
		if r.kind == kindMove {
			from := any(int64(r.from.Seg))
			if r.inline {
				from = nil
			}
			if _, err := a.moveRow.ExecContext(ctx, int64(r.seg), r.at, r.channel, int64(r.seq), from, r.from.Off); err != nil {
				return err
			}
			a.moved = true
			continue
		}
		if r.kind == kindReply || r.refused != nil || r.st == nil {
			continue
		}
		if r.kind == kindFence {
			rows[r.st] = r
			dirty[r.st] = true
			continue
		}
		payload, seg := any(r.payload), any(nil)
		if a.seglog != nil {
			payload, seg = emptyBlob, int64(r.seg)
		}
		args = append(args, r.channel, int64(r.seq), int64(r.hdr.entryType), r.ts, payload, seg, r.at, r.size)
		if len(args) == rowCols*insertRows {
			if _, err := a.insertN.ExecContext(ctx, args...); err != nil {
				return err
			}
			args = args[:0]
		}
		last[r.st] = r
		rows[r.st] = r
		if r.hdr.entryType != 0 {
			handshake[r.st] = true
		} else {
			r.st.addApp(r.seq, a.cap)
			r.st.addStored(r.seq, r.sub, r.size, a.evictChunk)
		}
		if r.dirty {
			dirty[r.st] = true
		}
	}
	for i := 0; i < len(args); i += rowCols {
		if _, err := a.insert.ExecContext(ctx, args[i:i+rowCols]...); err != nil {
			return err
		}
	}
	clear(args)
	a.args = args[:0]
	if err := a.writeChannelRows(ctx, rows, dirty); err != nil {
		return err
	}
	for st := range last {
		// Evict in chunks: deleting one old row per commit would touch
		// the oldest pages on every commit, doubling what one publish in
		// flight writes and syncs.
		// Whole blocks go once all their rows are below the cap floor.
		f := st.capFloor(a.cap)
		k, exact := 0, true
		for k < len(st.blocks) && st.blocks[k].last < f {
			exact = exact && st.blocks[k].exact
			k++
		}
		if k > 0 {
			if freed == nil {
				freed = make(map[string]int64)
			}
			hi := st.blocks[k-1].last
			if _, err := a.dropApp.ExecContext(ctx, st.name, int64(hi)); err != nil {
				return err
			}
			if exact {
				for _, b := range st.blocks[:k] {
					for _, sb := range b.subs {
						freed[sb.sub] += sb.n
					}
				}
				_, err = a.evict.ExecContext(ctx, st.name, int64(st.evicted), int64(hi))
			} else {
				err = deleteRows(ctx, a.evictSum, a.evict, freed, st.name, int64(st.evicted), int64(hi))
			}
			if err != nil {
				return err
			}
			evicted[st], popped[st] = hi, k
		}
		// Handshake entries are rare (one commit per epoch is fenced):
		// trim them to the cap whenever one is written.
		if handshake[st] {
			if freed == nil {
				freed = make(map[string]int64)
			}
			if err := a.trimHandshakes(ctx, st.name, freed); err != nil {
				return err
			}
		}
	}
	if a.seglog != nil {
		if _, err := a.setApplied.ExecContext(ctx, int64(end.Seg), end.Off); err != nil {
			return err
		}
	}
	if _, err = a.w.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	a.applied = end
	for st, to := range evicted {
		st.evicted = to
		st.blocks = slices.Delete(st.blocks, 0, popped[st])
	}
	a.credit(freed)
	for st := range last {
		if st.loaded {
			raise(st.floor, st.capFloor(a.cap))
		}
	}
	return nil
}

// writeChannelRows writes the channel rows that changed in a batch, each
// from the last request of its channel.
func (a *Archive) writeChannelRows(ctx context.Context, rows map[*chanState]*pubReq, dirty map[*chanState]bool) error {
	for st, r := range rows {
		if !dirty[st] {
			continue
		}
		var epoch any
		if r.hasEpoch {
			epoch = int64(r.epoch)
		}
		if _, err := a.upsert.ExecContext(ctx, st.name, int64(r.reserved), epoch, r.sub); err != nil {
			return err
		}
	}
	return nil
}

func (a *Archive) answer(r *pubReq, err error) {
	if r.weight > 0 {
		a.inflight.Release(r.weight)
	}
	if r.done != nil {
		if err == nil && r.kind == kindFence && r.st == nil {
			err = errors.New("relay: archive: the channel's state cannot be read")
		}
		r.done <- err
		return
	}
	if r.c == nil {
		return
	}
	refused := r.refused
	if r.dup && err != nil {
		// The first publish with the id is in this failed batch or an
		// earlier one (the archive fails and stops): not stored.
		refused = nil
	}
	r.c.Answer(backend.AnswerFrame(r.reply, refused, r.seq, err != nil || r.st == nil))
}

// connID is the id of the connection c (0 for none), whose own entry
// fan-out skips.
func connID(c backend.Conn) uint64 {
	if c == nil {
		return 0
	}
	return c.ID()
}

// observeCommit records a group commit of d in the relay's metrics.
func (a *Archive) observeCommit(d time.Duration) {
	if a.metrics != nil {
		a.metrics.ObserveCommit(d)
	}
}

// swept counts a run of the TTL sweep in the relay's metrics.
func (a *Archive) swept() {
	if a.metrics != nil {
		a.metrics.Swept()
	}
}

// finish records the exact last sequence number of every channel, so a
// clean restart continues without a gap. It runs after the sequencer has
// stopped.
func (a *Archive) finish(ctx context.Context) {
	if a.failure() != nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if a.seglog != nil && a.seglog.Syncs() {
		// The last transaction makes everything before it durable, so
		// the next open has nothing to replay.
		if _, err := a.w.ExecContext(ctx, "PRAGMA synchronous=FULL"); err != nil {
			return
		}
	}
	if _, err := a.w.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return
	}
	for name, st := range a.states {
		if st.reserved == st.seq {
			continue
		}
		var epoch any
		if st.hasEpoch {
			epoch = int64(st.epoch)
		}
		if _, err := a.upsert.ExecContext(ctx, name, int64(st.seq), epoch, st.payer); err != nil {
			a.w.ExecContext(ctx, "ROLLBACK")
			return
		}
	}
	if err := a.saveUsage(ctx); err != nil {
		a.w.ExecContext(ctx, "ROLLBACK")
		return
	}
	if a.seglog != nil {
		// The logger has stopped: its end is final.
		end := a.seglog.End()
		if _, err := a.setApplied.ExecContext(ctx, int64(end.Seg), end.Off); err != nil {
			a.w.ExecContext(ctx, "ROLLBACK")
			return
		}
	}
	a.w.ExecContext(ctx, "COMMIT")
}
