package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

var migrations = []string{
	`CREATE TABLE messages (
		id         INTEGER PRIMARY KEY,
		channel    TEXT    NOT NULL,
		seq        INTEGER NOT NULL,
		entry_type INTEGER NOT NULL,
		ts         INTEGER NOT NULL,
		payload    BLOB    NOT NULL
	);
	CREATE UNIQUE INDEX messages_channel_seq ON messages (channel, seq);
	CREATE TABLE channels (
		name     TEXT PRIMARY KEY,
		reserved INTEGER NOT NULL, -- every seq up to here may have been handed out
		epoch    INTEGER           -- the commit epoch expected next; NULL until the first commit
	) WITHOUT ROWID;
	CREATE TABLE revoked (sub TEXT PRIMARY KEY) WITHOUT ROWID;
	CREATE TABLE state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;`,
}

const (
	// maxBatch bounds the publishes committed in one transaction.
	maxBatch = 4096
	// reserveBlock is how many sequence numbers a channel reserves durably
	// at a time. Live delivery of an app message may run ahead of its
	// commit, but never past the reserved ceiling, so a crash can leave a
	// gap in a channel's sequence but can never reuse a number a subscriber
	// has already seen.
	reserveBlock = 1024
)

// pubReq is one publish (or, with reply set, one reply that must leave in
// order after the conn's earlier publishes) queued for the archive writer.
type pubReq struct {
	c       *conn
	channel string
	payload []byte
	hdr     header
	frame   []byte // push frame up to the payload; completed by the writer
	reply   []byte

	// done, when set, receives the result instead of a reply frame
	// (in-process publishes).
	done chan<- pubResult
}

type pubResult struct {
	seq   uint64
	err   error
	epoch uint64 // expected epoch for errStaleEpoch
}

var errStaleEpoch = errors.New("relay: commit for a stale epoch")

// chanState is the writer's view of one channel.
type chanState struct {
	seq      uint64 // last assigned
	reserved uint64 // durable ceiling
	hasEpoch bool
	epoch    uint64
	dirty    bool // reserved or epoch changed in this batch
}

// archive is the SQLite store. A single writer goroutine owns every write:
// it drains queued publishes, sequences them, fences commits, and commits
// the whole batch in one transaction (one fsync), then sends the acks.
type archive struct {
	db     *sql.DB
	w      *sql.Conn
	hub    *hub
	cap    uint64
	ttl    time.Duration
	now    func() time.Time
	reqs   chan *pubReq
	states map[string]*chanState
	lastTS int64

	insert, evict, upsert, load *sql.Stmt
	readApp, readAll            *sql.Stmt
}

func openArchive(ctx context.Context, db *sql.DB, h *hub, cfg *Config) (*archive, error) {
	if err := sqlitedb.Migrate(ctx, db, migrations); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	w, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("relay: archive connection: %w", err)
	}
	a := &archive{
		db:     db,
		w:      w,
		hub:    h,
		cap:    uint64(cfg.ArchiveCap),
		ttl:    cfg.ArchiveTTL,
		now:    cfg.Now,
		reqs:   make(chan *pubReq, maxBatch),
		states: make(map[string]*chanState),
	}
	fail := func(err error) (*archive, error) {
		a.closeStmts()
		w.Close()
		return nil, fmt.Errorf("relay: archive: %w", err)
	}
	if cfg.NoSync {
		if _, err := w.ExecContext(ctx, "PRAGMA synchronous=OFF"); err != nil {
			return fail(err)
		}
	}
	for _, s := range []struct {
		dst   **sql.Stmt
		query string
		conn  bool
	}{
		{&a.insert, `INSERT INTO messages (channel, seq, entry_type, ts, payload) VALUES (?, ?, ?, ?, ?)`, true},
		{&a.evict, `DELETE FROM messages WHERE channel = ? AND seq <= ?`, true},
		{&a.upsert, `INSERT INTO channels (name, reserved, epoch) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET reserved = excluded.reserved, epoch = excluded.epoch`, true},
		{&a.load, `SELECT reserved, epoch FROM channels WHERE name = ?`, true},
		{&a.readApp, `SELECT seq, entry_type, ts, payload FROM messages
			WHERE channel = ? AND seq > ? AND ts >= ? AND entry_type = 0 ORDER BY seq LIMIT ?`, false},
		{&a.readAll, `SELECT seq, entry_type, ts, payload FROM messages
			WHERE channel = ? AND seq > ? AND ts >= ? ORDER BY seq LIMIT ?`, false},
	} {
		var err error
		if s.conn {
			*s.dst, err = w.PrepareContext(ctx, s.query)
		} else {
			*s.dst, err = db.PrepareContext(ctx, s.query)
		}
		if err != nil {
			return fail(err)
		}
	}
	var last sql.NullInt64
	if err := w.QueryRowContext(ctx, `SELECT max(ts) FROM messages`).Scan(&last); err != nil {
		return fail(err)
	}
	a.lastTS = last.Int64
	return a, nil
}

func (a *archive) closeStmts() {
	for _, s := range []*sql.Stmt{a.insert, a.evict, a.upsert, a.load, a.readApp, a.readAll} {
		if s != nil {
			s.Close()
		}
	}
}

// submit queues a request for the writer. It blocks while the queue is full,
// which is the backpressure a fast publisher feels.
func (a *archive) submit(r *pubReq) { a.reqs <- r }

// run is the writer goroutine. It returns once reqs is closed and drained.
func (a *archive) run(ctx context.Context) {
	sweepEvery := min(a.ttl, 30*time.Second)
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	batch := make([]*pubReq, 0, 64)
	var post []postItem
	for {
		select {
		case r, ok := <-a.reqs:
			if !ok {
				a.finish(ctx)
				return
			}
			batch = append(batch[:0], r)
		drain:
			for len(batch) < maxBatch {
				select {
				case r, ok := <-a.reqs:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				default:
					break drain
				}
			}
			post = a.commitBatch(ctx, batch, post[:0])
			clear(batch)
		case <-sweep.C:
			a.sweepTTL(ctx)
		}
	}
}

// postItem is something the writer does after its transaction committed:
// deliver a held message, or answer a request.
type postItem struct {
	req     *pubReq
	deliver []byte // a push frame to fan out
	answer  []byte // a frame for req.c
	result  pubResult
}

func (a *archive) commitBatch(ctx context.Context, batch []*pubReq, post []postItem) []postItem {
	ts := a.now().UnixMilli()
	if ts < a.lastTS {
		ts = a.lastTS // keep ts monotonic with insertion order; the TTL sweep relies on it
	}
	a.lastTS = ts

	touched := make(map[string]*chanState)
	held := make(map[string]bool)
	_, err := a.w.ExecContext(ctx, "BEGIN IMMEDIATE")
	for _, r := range batch {
		if r.reply != nil {
			post = append(post, postItem{req: r, answer: r.reply})
			continue
		}
		if err != nil {
			post = append(post, postItem{req: r, result: pubResult{err: err}})
			continue
		}
		var st *chanState
		st, err = a.state(ctx, r.channel)
		if err != nil {
			post = append(post, postItem{req: r, result: pubResult{err: err}})
			continue
		}
		if r.hdr.commit {
			if st.hasEpoch && r.hdr.epoch != st.epoch {
				post = append(post, postItem{req: r, answer: staleEpochFrame(st.epoch),
					result: pubResult{err: errStaleEpoch, epoch: st.epoch}})
				continue
			}
			st.hasEpoch, st.epoch, st.dirty = true, r.hdr.epoch+1, true
		}
		touched[r.channel] = st
		st.seq++
		seq := st.seq
		if seq > st.reserved {
			st.reserved, st.dirty = seq+reserveBlock-1, true
			held[r.channel] = true
		}
		push := pushSuffix(r.frame, seq, r.hdr.entryType, ts)
		// App messages go out before the fsync: the seq is below the durable
		// ceiling, and the publisher's ack still waits for the commit.
		// Commits and Welcomes (and anything behind them on the channel) go
		// out only once durable, so a crash can never fork a group.
		if r.hdr.entryType == EntryApp && !held[r.channel] {
			a.hub.fanout(r.channel, push, r.c)
		} else {
			held[r.channel] = true
			post = append(post, postItem{req: r, deliver: push})
		}
		post = append(post, postItem{req: r, answer: nil, result: pubResult{seq: seq}})
		_, err = a.insert.ExecContext(ctx, r.channel, int64(seq), int64(r.hdr.entryType), ts, r.payload)
	}
	if err == nil {
		for name, st := range touched {
			if st.dirty {
				var epoch any
				if st.hasEpoch {
					epoch = int64(st.epoch)
				}
				if _, err = a.upsert.ExecContext(ctx, name, int64(st.reserved), epoch); err != nil {
					break
				}
			}
			if st.seq > a.cap {
				if _, err = a.evict.ExecContext(ctx, name, int64(st.seq-a.cap)); err != nil {
					break
				}
			}
		}
	}
	if err == nil {
		_, err = a.w.ExecContext(ctx, "COMMIT")
	}
	if err != nil {
		a.w.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		// Forget the in-memory view of the touched channels: the next batch
		// reloads it, continuing above the durable ceiling so no number that
		// went out live is reused.
		for name := range touched {
			delete(a.states, name)
		}
		err = fmt.Errorf("relay: archive write: %w", err)
	} else {
		for _, st := range touched {
			st.dirty = false
		}
	}

	for _, p := range post {
		r := p.req
		switch {
		case p.deliver != nil:
			if err == nil {
				a.hub.fanout(r.channel, p.deliver, r.c)
			}
			continue
		case r.reply != nil:
		case err != nil && p.result.err == nil:
			p.result = pubResult{err: err}
			p.answer = nil
		}
		a.answer(r, p)
	}
	clear(post)
	return post
}

func (a *archive) answer(r *pubReq, p postItem) {
	if r.done != nil {
		r.done <- p.result
		return
	}
	if r.c == nil {
		return
	}
	f := p.answer
	if f == nil {
		if p.result.err != nil {
			f = errorFrame("internal", "the archive could not store the message")
		} else {
			f = ackFrame(p.result.seq)
		}
	}
	r.c.push(f)
	r.c.pending.Add(-1)
}

// state returns the writer's view of a channel, loading it on first use.
// After a restart the sequence continues above the durable ceiling.
func (a *archive) state(ctx context.Context, name string) (*chanState, error) {
	if st := a.states[name]; st != nil {
		return st, nil
	}
	var reserved int64
	var epoch sql.NullInt64
	err := a.load.QueryRowContext(ctx, name).Scan(&reserved, &epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	st := &chanState{seq: uint64(reserved), reserved: uint64(reserved), hasEpoch: epoch.Valid, epoch: uint64(epoch.Int64)}
	a.states[name] = st
	return st, nil
}

// finish records the exact last sequence number of every channel, so a
// clean restart continues without a gap.
func (a *archive) finish(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
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
		if _, err := a.upsert.ExecContext(ctx, name, int64(st.seq), epoch); err != nil {
			a.w.ExecContext(ctx, "ROLLBACK")
			return
		}
	}
	a.w.ExecContext(ctx, "COMMIT")
}

// sweepTTL deletes entries older than the TTL. ts grows with the row id, so
// the expired rows are exactly those before the first unexpired one.
func (a *archive) sweepTTL(ctx context.Context) {
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	a.w.ExecContext(ctx, `DELETE FROM messages WHERE id < coalesce(
		(SELECT id FROM messages WHERE ts >= ?1 ORDER BY id LIMIT 1),
		(SELECT coalesce(max(id), 0) + 1 FROM messages))`, cutoff)
}

// entry is one archived message.
type entry struct {
	seq       uint64
	entryType uint8
	ts        int64
	payload   []byte
}

// read returns up to limit entries of a channel after since, and whether
// more follow.
func (a *archive) read(ctx context.Context, name string, since uint64, limit int, appOnly bool) ([]entry, bool, error) {
	if since >= math.MaxInt64 {
		return nil, false, nil
	}
	stmt := a.readAll
	if appOnly {
		stmt = a.readApp
	}
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	rows, err := stmt.QueryContext(ctx, name, int64(since), cutoff, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("relay: archive read: %w", err)
	}
	defer rows.Close()
	out := make([]entry, 0, min(limit, 128))
	for rows.Next() {
		var e entry
		var seq, et int64
		if err := rows.Scan(&seq, &et, &e.ts, &e.payload); err != nil {
			return nil, false, fmt.Errorf("relay: archive read: %w", err)
		}
		e.seq, e.entryType = uint64(seq), uint8(et)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("relay: archive read: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

func (a *archive) close() {
	a.closeStmts()
	a.w.Close()
}
