package sqlitearchive

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"sync/atomic"

	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

// chanState is the archive's view of one channel. seq, reserved and the
// epoch belong to the sequencer; durable and held are shared with the
// committer.
type chanState struct {
	name     string
	payer    string // whom the channel's entries are charged to (relay/budget.go); set once, by the sequencer
	seq      uint64 // last assigned
	reserved uint64 // ceiling promised to the committer
	hasEpoch bool
	epoch    uint64 // expected next

	// Committer only. The application entries within the cap, as runs of
	// consecutive seqs, oldest first: seqs are strictly increasing but
	// not contiguous (handshake entries sit between them, a crash skips
	// the rest of a reserved block), so the cap is a count of entries,
	// never a distance in seqs. Loaded from the archive on first use.
	evicted uint64 // application rows up to here are deleted
	loaded  bool
	runs    []seqRun
	napp    uint64         // entries in runs
	floor   *atomic.Uint64 // the oldest seq within the cap; shared with readers via archive.floors
	// The application rows stored above evicted, in blocks of about
	// evictChunk, with the bytes each account has in them: the cap
	// evicts whole blocks and gives their bytes back without reading the
	// rows again.
	blocks []evBlock

	durable atomic.Uint64 // reserved ceiling known to be committed
	held    atomic.Int64  // entries waiting for their commit before delivery
}

// evBlock is a run of stored application rows, seqs first..last, and the
// payload bytes per account in them. A block the TTL sweep cut into is not
// exact any more; its bytes are then summed from the rows when it goes.
type evBlock struct {
	first, last uint64
	n           uint64
	exact       bool
	subs        []subBytes
}

type subBytes struct {
	sub string
	n   int64
}

// addStored records a stored application row for eviction.
func (st *chanState) addStored(seq uint64, sub string, n int64, chunk uint64) {
	if k := len(st.blocks); k == 0 || st.blocks[k-1].n >= chunk {
		st.blocks = append(st.blocks, evBlock{first: seq, exact: true})
	}
	b := &st.blocks[len(st.blocks)-1]
	b.last = seq
	b.n++
	for i := range b.subs {
		if b.subs[i].sub == sub {
			b.subs[i].n += n
			return
		}
	}
	b.subs = append(b.subs, subBytes{sub, n})
}

// seqRun is the seqs first..last, all of them application entries.
type seqRun struct{ first, last uint64 }

// addApp records a new application entry (above every seq recorded) and
// drops the oldest past the cap.
func (st *chanState) addApp(seq, capN uint64) {
	if n := len(st.runs); n > 0 && st.runs[n-1].last+1 == seq {
		st.runs[n-1].last = seq
	} else {
		st.runs = append(st.runs, seqRun{seq, seq})
	}
	st.napp++
	for st.napp > capN {
		r := &st.runs[0]
		drop := min(st.napp-capN, r.last-r.first+1)
		r.first += drop
		st.napp -= drop
		if r.first > r.last {
			st.runs = st.runs[1:]
		}
	}
}

// capFloor is the oldest seq among the newest cap application entries, or
// 0 while the channel holds fewer.
func (st *chanState) capFloor(capN uint64) uint64 {
	if st.napp < capN || len(st.runs) == 0 {
		return 0
	}
	return st.runs[0].first
}

// raise sets f to v unless it is higher already.
func raise(f *atomic.Uint64, v uint64) {
	for {
		old := f.Load()
		if old >= v || f.CompareAndSwap(old, v) {
			return
		}
	}
}

// submit queues a request for the writer. It blocks while the queue is full,
// which is the backpressure a fast publisher feels.
func (a *Archive) submit(r *pubReq) { a.reqs <- r }

// The archive runs as a two-stage pipeline, each stage one goroutine:
//
//   - the sequencer takes publishes in arrival order, fences commits,
//     assigns the channel's next seq and delivers app messages at once;
//   - the committer writes what the sequencer passed on in large
//     transactions (one fsync each), then delivers the entries that had to
//     wait for durability and sends every answer, in arrival order.
//
// Live delivery may thus run ahead of the fsync, but only for app messages
// whose seq is below a durably reserved ceiling, and only while nothing
// held is pending on the channel (so per-channel order is kept). A crash
// can therefore leave a gap in a channel's sequence but never reuses a
// number a subscriber has seen, and a commit is never delivered before the
// epoch it moves to is durable, so a crash cannot fork a group.
// Acknowledgements always wait for the commit.
func (a *Archive) runSequencer() {
	defer close(a.seqd)
	for r := range a.reqs {
		a.mark.taken()
		ch, origin, pb := r.channel, connID(r.c), r.buf
		live := a.sequence(r)
		// The committer first, the push after. The goroutine readied
		// last is the one this thread runs next once the sequencer
		// waits: pushing last lets the subscriber's writer run before
		// the committer's transaction (hundreds of µs of CPU, then an
		// fsync that keeps the thread) rather than behind it, and the
		// committer is taken by the other thread or runs right after.
		a.seqd <- r
		if live != nil {
			a.hub.Fanout(ch, live, pb, origin)
		}
	}
}

// sequence numbers a request. It returns the push frame of an
// application entry that may go to subscribers at once (before its
// commit); other entries keep their frame for the committer to deliver.
func (a *Archive) sequence(r *pubReq) []byte {
	if r.kind == kindReply || r.kind == kindMove {
		return nil
	}
	st := a.state(r.channel)
	if st == nil {
		return nil
	}
	r.st = st
	if r.kind == kindFence {
		// The committer keeps the channel's row from the batch's last
		// request: it carries the payer too.
		r.sub = st.payer
		st.hasEpoch, st.epoch, r.dirty = true, r.resetTo, true
		r.reserved, r.hasEpoch, r.epoch = st.reserved, true, st.epoch
		return nil
	}
	if r.id != "" {
		// A retry of a publish stored (or being stored) within the
		// window: its ack, before any check the first one changed.
		if seq, ok := a.dedup.seen(r.id, a.now()); ok {
			r.refused, r.dup = backend.AckFrame(seq), true
			return nil
		}
	}
	if r.hdr.commit {
		if st.hasEpoch && r.hdr.epoch != st.epoch {
			r.refused = backend.StaleEpochFrame(st.epoch)
			return nil
		}
		// The first commit sets the fence; one far ahead of any group
		// (or one no epoch could follow) would jam the channel for good.
		if r.hdr.epoch == math.MaxUint64 || !st.hasEpoch && r.hdr.epoch > a.maxFirstEpoch {
			r.refused = backend.EpochOutOfRangeFrame(a.maxFirstEpoch)
			return nil
		}
	}
	if !seglog.Fits(r.channel, "", len(r.payload)) {
		// Only a relay whose PreAuthReadLimit lets a payload past the
		// record's bound gets here; a record could not carry it.
		r.refused = backend.ErrorFrame("name_too_long", "the entry is too long to archive")
		return nil
	}
	// The channel pays for its entries: the first account to publish on
	// it becomes its payer, kept with the channel (not with the entry).
	if st.payer == "" {
		st.payer, r.dirty = r.sub, true
	}
	r.sub = st.payer
	r.size = int64(len(r.payload))
	if scope := a.charge(r.sub, r.size); scope != "" {
		r.refused = backend.QuotaFrame(scope)
		return nil
	}
	if r.hdr.commit {
		st.hasEpoch, st.epoch, r.dirty = true, r.hdr.epoch+1, true
	}
	ts := backend.CoarseMillis(a.now(), a.granularity)
	if ts < a.lastTS {
		ts = a.lastTS // ts grows with insertion order; the TTL sweep relies on it
	}
	a.lastTS = ts
	st.seq++
	// Reserve the next block while half of this one is left, so live
	// delivery rarely has to wait for the ceiling to become durable.
	if st.seq+reserveBlock/2 > st.reserved {
		st.reserved, r.dirty = st.seq+reserveBlock, true
	}
	r.seq, r.ts = st.seq, ts
	if r.id != "" {
		a.dedup.add(r.id, r.seq, a.now())
	}
	r.reserved, r.hasEpoch, r.epoch = st.reserved, st.hasEpoch, st.epoch
	r.frame = backend.PushSuffix(r.frame, r.seq, r.hdr.entryType, ts)
	if r.hdr.entryType == backend.EntryApp && r.seq <= st.durable.Load() && st.held.Load() == 0 {
		f := r.frame
		r.frame = nil
		return f
	}
	r.held = true
	st.held.Add(1)
	return nil
}

// state returns the sequencer's view of a channel, loading it on first
// use; after a restart the sequence continues above the durable ceiling.
// It returns nil when the archive cannot be read.
func (a *Archive) state(name string) *chanState {
	if st := a.states[name]; st != nil {
		return st
	}
	var reserved int64
	var epoch sql.NullInt64
	var payer string
	err := a.load.QueryRowContext(context.Background(), name).Scan(&reserved, &epoch, &payer)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	st := &chanState{name: name, payer: payer, seq: uint64(reserved), reserved: uint64(reserved), hasEpoch: epoch.Valid, epoch: uint64(epoch.Int64)}
	st.durable.Store(uint64(reserved))
	a.states[name] = st
	return st
}

// loadRuns loads a channel's newest cap application seqs, inside the
// committer's transaction and before it adds any.
func (a *Archive) loadRuns(ctx context.Context, st *chanState) error {
	rows, err := a.loadApp.QueryContext(ctx, st.name, int64(a.cap))
	if err != nil {
		return err
	}
	defer rows.Close()
	type stored struct {
		seq uint64
		sub string
		n   int64
	}
	var got []stored
	for rows.Next() {
		var seq, n int64
		var sub string
		if err := rows.Scan(&seq, &sub, &n); err != nil {
			return err
		}
		got = append(got, stored{uint64(seq), sub, n})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	st.runs, st.napp, st.blocks = nil, 0, nil
	for i := len(got) - 1; i >= 0; i-- {
		st.addApp(got[i].seq, a.cap)
		st.addStored(got[i].seq, got[i].sub, got[i].n, a.evictChunk)
	}
	// Rows below the newest cap may be left from before a restart; they
	// are in no block, so they go now.
	if f := st.capFloor(a.cap); f > 1 {
		freed := make(map[string]int64)
		if _, err := a.dropApp.ExecContext(ctx, st.name, int64(f-1)); err != nil {
			return err
		}
		if err := deleteRows(ctx, a.evictSum, a.evict, freed, st.name, 0, int64(f-1)); err != nil {
			return err
		}
		st.evicted = f - 1
		a.credit(freed) // the archive fails stop if the transaction does not commit
	}
	f, _ := a.floors.LoadOrStore(st.name, new(atomic.Uint64))
	st.floor = f.(*atomic.Uint64)
	st.loaded = true
	a.loaded[st.name] = st
	return nil
}

// readFloor returns the cap floor reads of a channel apply: the
// committer's when it has loaded the channel, else the archive's.
func (a *Archive) readFloor(ctx context.Context, name string) (uint64, error) {
	if f, ok := a.floors.Load(name); ok {
		return f.(*atomic.Uint64).Load(), nil
	}
	var seq int64
	err := a.floorQ.QueryRowContext(ctx, name, int64(a.cap)).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // fewer entries than the cap: nothing to hide
	}
	if err != nil {
		return 0, err
	}
	// Cache it: nobody has raised it yet, and any later floor is higher.
	f, _ := a.floors.LoadOrStore(name, new(atomic.Uint64))
	raise(f.(*atomic.Uint64), uint64(seq))
	return uint64(seq), nil
}
