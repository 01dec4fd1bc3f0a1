package relay

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

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
	// Who published each entry (for the per-account quota), and the
	// channel members the relay learned from the directory's feed (the
	// feed cursor is the state key 'members_after').
	`ALTER TABLE messages ADD COLUMN sub TEXT NOT NULL DEFAULT '';
	CREATE TABLE members (
		channel TEXT NOT NULL,
		sub     TEXT NOT NULL,
		PRIMARY KEY (channel, sub)
	) WITHOUT ROWID;`,
	// The payload bytes each account has stored, as of the last clean
	// shutdown (the state key 'usage_clean' says whether it is current).
	`CREATE TABLE usage (sub TEXT PRIMARY KEY, bytes INTEGER NOT NULL) WITHOUT ROWID;`,
	// The drop floors of each channel: the highest seq of an application
	// entry (app) and of a handshake entry (hs) the archive deleted, by
	// the cap or the TTL. A read from below a floor is truncated.
	`CREATE TABLE floors (
		channel TEXT PRIMARY KEY,
		app     INTEGER NOT NULL DEFAULT 0,
		hs      INTEGER NOT NULL DEFAULT 0
	) WITHOUT ROWID;`,
	// Where each payload is: in the log (segment seg, at offset at) for a
	// file-backed archive, or in the row (seg NULL) for one in memory and
	// for rows stored before the log. size is the payload's length either
	// way; the quotas and caps count it.
	`ALTER TABLE messages ADD COLUMN seg INTEGER;
	ALTER TABLE messages ADD COLUMN at INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE messages ADD COLUMN size INTEGER NOT NULL DEFAULT 0;
	UPDATE messages SET size = length(payload);
	CREATE INDEX messages_seg ON messages (seg, at) WHERE seg IS NOT NULL;`,
	// No sender per entry: the bytes of a channel's entries are charged
	// to the channel's payer (budget.go), kept once per channel, and the
	// per-entry account goes. The payer of a channel that has entries is
	// the account of its oldest; the figures saved at the last shutdown
	// were per sender, so they are recounted.
	`ALTER TABLE channels ADD COLUMN payer TEXT NOT NULL DEFAULT '';
	UPDATE channels SET payer = coalesce((SELECT m.sub FROM messages m WHERE m.channel = channels.name ORDER BY m.seq LIMIT 1), '');
	ALTER TABLE messages DROP COLUMN sub;
	DELETE FROM usage;
	UPDATE state SET value = 0 WHERE key = 'usage_clean';`,
}

// Defaults of the archive's zero Config fields.
const (
	DefaultMaxFirstEpoch = 1 << 32
	DefaultAccountQuota  = 256 << 20
	DefaultMaxPageBytes  = 4 << 20
)

// DefaultTimeGranularity is the default of Config.TimeGranularity.
const DefaultTimeGranularity = time.Second

// MaxTimeGranularity is the coarsest Config.TimeGranularity: seats order
// device revocations against entry times to that grain.
const MaxTimeGranularity = time.Second

// coarseMillis is t in Unix milliseconds, rounded down to a multiple of
// g (at least a millisecond).
func coarseMillis(t time.Time, g time.Duration) int64 {
	ms := t.UnixMilli()
	if step := g.Milliseconds(); step > 1 {
		ms -= ms % step
	}
	return ms
}

// archiveDefaults fills and checks the Config fields the archive applies.
func archiveDefaults(cfg *Config) error {
	if cfg.AccountQuota < 0 || cfg.MaxPageBytes < 0 || cfg.OrgBudget < 0 || cfg.GroupBudget < 0 || cfg.ServerBudget < 0 {
		return errors.New("relay: negative limit in Config")
	}
	if cfg.TimeGranularity < 0 || cfg.TimeGranularity > MaxTimeGranularity {
		return errors.New("relay: TimeGranularity in Config must be from 0 to a second")
	}
	setDefault(&cfg.TimeGranularity, DefaultTimeGranularity)
	setDefault(&cfg.MaxFirstEpoch, DefaultMaxFirstEpoch)
	setDefault(&cfg.AccountQuota, DefaultAccountQuota)
	setDefault(&cfg.MaxPageBytes, DefaultMaxPageBytes)
	return nil
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
	// insertRows is how many rows one multi-row INSERT carries; the
	// per-statement overhead dominates the cost of a 1 KiB row otherwise.
	insertRows = 32
	// rowCols is the columns of one inserted row.
	rowCols = 8
)

// pubReq is one publish (or, with reply set, one reply that must leave in
// order after the conn's earlier publishes) queued for the archive.
type pubReq struct {
	c *conn
	// sub is the payer (budget.go): the publishing account, with its org
	// and group, until the sequencer makes it the channel's payer, whom
	// the entry is charged to. It is never stored with the entry.
	sub     string
	channel string
	id      string // the scoped key of the publish's "id" (dedupKey), or ""
	payload []byte // nil once the entry is in the log
	hdr     header
	frame   []byte   // push frame up to the payload; completed by the sequencer
	buf     *pushBuf // the lent buffer frame was built in, or nil
	reply   []byte
	weight  int64 // held in archive.inflight until answered

	// A fence reset (resetFence) instead of a publish: the channel expects
	// resetTo next; done receives the commit's result.
	fence   bool
	resetTo uint64
	resetID int64 // the feed event's id; 0 for none
	done    chan error

	// Set by the sequencer.
	st       *chanState
	seq      uint64
	ts       int64
	size     int64  // the payload's length
	held     bool   // deliver only after the commit
	refused  []byte // the error frame of a publish refused (fence, quota): nothing is stored or delivered
	dup      bool   // refused holds the ack of the earlier publish with the same id
	dirty    bool   // the channel row changes with this entry
	reserved uint64 // the channel row after this entry
	hasEpoch bool
	epoch    uint64

	// Set by the logger: where the payload is in the log.
	seg uint64
	at  int64

	// A stored entry the compactor moves (compact) from where its
	// payload was, from, or from its row (inline: an entry stored before
	// the log, see migrateInline); done receives the flush's result.
	move   bool
	from   logPos
	inline bool
}

// chanState is the archive's view of one channel. seq, reserved and the
// epoch belong to the sequencer; durable and held are shared with the
// committer.
type chanState struct {
	name     string
	payer    string // whom the channel's entries are charged to (budget.go); set once, by the sequencer
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

// archive is the SQLite store. The committer goroutine owns every write;
// see runSequencer for the pipeline.
type archive struct {
	db  *sql.DB
	w   *sql.Conn
	hub *hub
	cap uint64
	ttl time.Duration

	evictChunk    uint64 // rows the cap eviction deletes at a time, at least
	maxFirstEpoch uint64
	budget        limits // the archive budgets (budget.go)

	counters *relayCounters // the relay's metrics; nil records nothing

	usageMu sync.Mutex // guards usage
	usage   *tally     // payload bytes stored (or being stored) per payer and budget
	now     func() time.Time
	// granularity is Config.TimeGranularity: entries' ts are rounded
	// down to it.
	granularity time.Duration
	log         *slog.Logger
	reqs        chan *pubReq // to the sequencer
	seqd        chan *pubReq // from the sequencer to the committer
	mark        *commitMark  // lets reads wait for what was pushed before them

	inflight *semaphore.Weighted // payload bytes between readers and answers

	// Owned by the sequencer.
	states map[string]*chanState
	dedup  *dedup // the sequencer's publish ids
	lastTS int64

	failMu sync.Mutex
	failed error // set once a write fails; see fail

	// A file-backed archive's log (seglog.go), nil in memory. The
	// logger appends each batch to it and answers the batch; the indexer
	// then writes the batch's rows, and applied is the log position the
	// index holds up to (indexer only).
	seglog  *segLog
	logged  chan loggedBatch
	logBuf  []byte // logger only
	applied logPos
	moved   bool          // the last write moved entries; indexer only
	compact chan struct{} // wakes the compactor
	quit    chan struct{} // stops the compactor
	compWG  sync.WaitGroup

	// floors maps a channel name to its *atomic.Uint64 cap floor (see
	// chanState.floor), for readers. A floor only ever rises, and the
	// committer raises it only after the commit that moves it, so a reader
	// holding an older floor may serve an entry the cap has just pushed
	// out, but never hides one within it.
	floors sync.Map

	// fences maps a channel name to the commit epoch it expects next
	// (uint64), as of the last entry or fence reset made durable since
	// the archive opened; before that, the channels table holds it (an
	// open replays the log into it). Set in release, before the answer,
	// so whoever holds an ack reads the fence its commit moved. See
	// nextEpoch.
	fences sync.Map

	args []any

	insert, insertN, evict, evictHS, upsert, load    *sql.Stmt
	readApp, readAll, loadApp, floorQ, sweep         *sql.Stmt
	evictSum, hsFloor, evictHSSum, sweepTo, sweepSum *sql.Stmt
	sweepMax, dropApp, dropHS, dropSweep, dropsQ     *sql.Stmt
	oldestApp, oldestAll, firstApp, firstAll         *sql.Stmt
	setApplied, segUsed, moveRow                     *sql.Stmt

	loaded map[string]*chanState // the channels the committer has loaded; committer only

	committerTID atomic.Int64 // the committer's thread when it runs nicer (lowerPriority), else 0

	run sqliteRun
}

func openArchive(ctx context.Context, db *sql.DB, h *hub, cfg *Config) (*archive, error) {
	if err := archiveDefaults(cfg); err != nil {
		return nil, err
	}
	w, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("relay: archive connection: %w", err)
	}
	if cfg.DBPath != "" {
		if err := setPageSize(ctx, w); err != nil {
			w.Close()
			return nil, fmt.Errorf("relay: archive page size: %w", err)
		}
	}
	if err := sqlitedb.Migrate(ctx, db, migrations); err != nil {
		w.Close()
		return nil, fmt.Errorf("relay: %w", err)
	}
	a := &archive{
		db:            db,
		w:             w,
		hub:           h,
		cap:           uint64(cfg.ArchiveCap),
		evictChunk:    max(1, uint64(cfg.ArchiveCap)/16),
		maxFirstEpoch: cfg.MaxFirstEpoch,
		usage:         newTally(),
		loaded:        make(map[string]*chanState),
		ttl:           cfg.ArchiveTTL,
		now:           cfg.Now,
		granularity:   cfg.TimeGranularity,
		log:           cfg.Logger,
		reqs:          make(chan *pubReq, maxBatch),
		inflight:      semaphore.NewWeighted(maxInflightBytes),
		seqd:          make(chan *pubReq, maxBatch),
		mark:          newCommitMark(),
		states:        make(map[string]*chanState),
		dedup:         newDedup(dupWindow(cfg.ArchiveTTL)),
	}
	fail := func(err error) (*archive, error) {
		a.close()
		return nil, fmt.Errorf("relay: archive: %w", err)
	}
	if cfg.NoSync {
		if _, err := w.ExecContext(ctx, "PRAGMA synchronous=OFF"); err != nil {
			return fail(err)
		}
	}
	// The writer keeps the hot end of every channel cached (the default
	// cache is 2 MB). Its automatic checkpoint (every 1000 pages) keeps the
	// WAL short, so commits restart it from its beginning instead of
	// appending to an ever larger file, which makes every fsync dearer.
	for _, p := range []string{"PRAGMA cache_size=-65536", "PRAGMA wal_autocheckpoint=1000"} {
		if _, err := w.ExecContext(ctx, p); err != nil {
			return fail(err)
		}
	}
	for _, s := range []struct {
		dst   **sql.Stmt
		query string
		conn  bool
	}{
		// OR ROLLBACK: a row that broke (channel, seq) would be a bug
		// the committer stops on anyway, and with the default ABORT every
		// multi-row INSERT keeps a statement journal, a copy of each page
		// before it changes (16 KiB each), so that it alone could be
		// undone: 4.7 % of the CPU samples of BenchmarkDurable16.
		{&a.insert, `INSERT OR ROLLBACK INTO messages (channel, seq, entry_type, ts, payload, seg, at, size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, true},
		{&a.insertN, `INSERT OR ROLLBACK INTO messages (channel, seq, entry_type, ts, payload, seg, at, size) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?),", insertRows), ","), true},
		// The cap counts application entries and handshake entries
		// (commits, proposals, Welcomes) separately, so chat and cover
		// traffic never push out the commits an offline member needs to
		// follow the group; the TTL applies to both.
		// Each delete has a query that sums what it frees per payer (the
		// channels' payers), for the quotas, run just before it. (DELETE ... RETURNING costs
		// three times a plain delete, a sum over the same, cached rows
		// far less.)
		// Application rows up to the evicted mark are gone already, so
		// neither needs to walk past the handshake rows kept below it.
		{&a.evictSum, `SELECT c.payer, sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.channel = ? AND m.seq > ? AND m.seq <= ? AND m.entry_type = 0 GROUP BY c.payer`, true},
		{&a.evict, `DELETE FROM messages WHERE channel = ? AND seq > ? AND seq <= ? AND entry_type = 0`, true},
		{&a.loadApp, `SELECT m.seq, c.payer, m.size FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.channel = ? AND m.entry_type = 0 ORDER BY m.seq DESC LIMIT ?`, true},
		{&a.sweepMax, `SELECT channel, max(seq) FROM messages WHERE id < ? GROUP BY channel`, true},
		// The drop floors rise just before each delete, in its
		// transaction: to the newest application entry at or below ?2,
		// the newest handshake entry below ?2, or, for the TTL sweep,
		// the newest entry of each kind among the rows it deletes.
		{&a.dropApp, `INSERT INTO floors (channel, app) SELECT ?1, s FROM
			(SELECT max(seq) AS s FROM messages WHERE channel = ?1 AND entry_type = 0 AND seq <= ?2) WHERE s IS NOT NULL
			ON CONFLICT (channel) DO UPDATE SET app = max(app, excluded.app)`, true},
		{&a.dropHS, `INSERT INTO floors (channel, hs) SELECT ?1, s FROM
			(SELECT max(seq) AS s FROM messages WHERE channel = ?1 AND entry_type != 0 AND seq < ?2) WHERE s IS NOT NULL
			ON CONFLICT (channel) DO UPDATE SET hs = max(hs, excluded.hs)`, true},
		{&a.dropSweep, `INSERT INTO floors (channel, app, hs)
			SELECT channel, coalesce(max(CASE WHEN entry_type = 0 THEN seq END), 0), coalesce(max(CASE WHEN entry_type != 0 THEN seq END), 0)
			FROM messages WHERE id < ?1 GROUP BY channel
			ON CONFLICT (channel) DO UPDATE SET app = max(app, excluded.app), hs = max(hs, excluded.hs)`, true},
		{&a.dropsQ, `SELECT app, hs FROM floors WHERE channel = ?`, false},
		// The first entry a page could hold (?2 is the TTL cutoff, ?3 the
		// cap floor), and the first row after a seq whether or not a page
		// would show it.
		{&a.oldestApp, `SELECT seq FROM messages WHERE channel = ?1 AND ts >= ?2 AND entry_type = 0 AND seq >= ?3
			ORDER BY seq LIMIT 1`, false},
		{&a.oldestAll, `SELECT seq FROM messages WHERE channel = ?1 AND ts >= ?2 AND (entry_type != 0 OR seq >= ?3)
			ORDER BY seq LIMIT 1`, false},
		{&a.firstApp, `SELECT seq, ts FROM messages WHERE channel = ? AND seq > ? AND entry_type = 0 ORDER BY seq LIMIT 1`, false},
		{&a.firstAll, `SELECT seq, ts FROM messages WHERE channel = ? AND seq > ? ORDER BY seq LIMIT 1`, false},
		{&a.floorQ, `SELECT seq FROM messages WHERE channel = ?1 AND entry_type = 0 ORDER BY seq DESC LIMIT 1 OFFSET ?2 - 1`, false},
		{&a.hsFloor, `SELECT seq FROM messages WHERE channel = ?1 AND entry_type != 0
			ORDER BY seq DESC LIMIT 1 OFFSET ?2 - 1`, true},
		{&a.evictHSSum, `SELECT c.payer, sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.channel = ? AND m.entry_type != 0 AND m.seq < ? GROUP BY c.payer`, true},
		{&a.evictHS, `DELETE FROM messages WHERE channel = ? AND entry_type != 0 AND seq < ?`, true},
		{&a.sweepTo, `SELECT coalesce(
			(SELECT id FROM messages WHERE ts >= ?1 ORDER BY id LIMIT 1),
			(SELECT coalesce(max(id), 0) + 1 FROM messages))`, true},
		{&a.sweepSum, `SELECT c.payer, sum(m.size) FROM messages m JOIN channels c ON c.name = m.channel
			WHERE m.id < ? GROUP BY c.payer`, true},
		{&a.sweep, `DELETE FROM messages WHERE id < ?`, true},
		// A channel's payer is set once; "" leaves it as it is.
		{&a.upsert, `INSERT INTO channels (name, reserved, epoch, payer) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET reserved = excluded.reserved, epoch = excluded.epoch,
			payer = CASE WHEN channels.payer = '' THEN excluded.payer ELSE channels.payer END`, true},
		{&a.load, `SELECT reserved, epoch, payer FROM channels WHERE name = ?`, false},
		// Rows past the cap may linger until the committer evicts them in
		// its next chunk, so reads apply the cap themselves: ?5 is the
		// channel's cap floor.
		{&a.readApp, `SELECT seq, entry_type, ts, payload, seg, at, size FROM messages
			WHERE channel = ?1 AND seq > ?2 AND ts >= ?3 AND entry_type = 0 AND seq >= ?5
			ORDER BY seq LIMIT ?4`, false},
		{&a.readAll, `SELECT seq, entry_type, ts, payload, seg, at, size FROM messages
			WHERE channel = ?1 AND seq > ?2 AND ts >= ?3 AND (entry_type != 0 OR seq >= ?5)
			ORDER BY seq LIMIT ?4`, false},
		{&a.setApplied, `INSERT INTO state (key, value) VALUES ('log_seg', ?1), ('log_off', ?2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, true},
		{&a.segUsed, `SELECT 1 FROM messages WHERE seg = ? LIMIT 1`, true},
		// A move applies only to a row still where the compactor read it.
		// A row moved from a segment (seg, at) or from its own payload
		// column (seg NULL, at 0) points at its record; the column empties.
		{&a.moveRow, `UPDATE messages SET seg = ?1, at = ?2, payload = x'' WHERE channel = ?3 AND seq = ?4 AND seg IS ?5 AND at = ?6`, true},
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
	if cfg.DBPath != "" {
		if err := a.openLog(ctx, LogDir(cfg.DBPath), !cfg.NoSync, cfg.logSegment); err != nil {
			return fail(err)
		}
	}
	var last sql.NullInt64
	if err := w.QueryRowContext(ctx, `SELECT max(ts) FROM messages`).Scan(&last); err != nil {
		return fail(err)
	}
	a.lastTS = last.Int64
	if err := a.loadUsage(ctx); err != nil {
		return fail(err)
	}
	a.budget = budgetLimits(cfg, a.usage.total)
	return a, nil
}

// loadUsage restores the bytes each payer (account, org and group; see
// budget.go) has stored. Keeping the
// figures current in the usage table would add a write to every commit,
// the hot path, so the committer keeps them in memory and saves them at a
// clean shutdown (finish). A clean start loads that table, one row per
// account; only after a crash are the figures recomputed, with one pass
// over the archive (BenchmarkOpenRecomputeUsage: about 2 s per million
// rows of 1 KiB on a busy 2-core machine). The clean mark is cleared
// before anything is written, so a crash after this start recomputes too.
func (a *archive) loadUsage(ctx context.Context) error {
	var clean int64
	err := a.w.QueryRowContext(ctx, `SELECT value FROM state WHERE key = 'usage_clean'`).Scan(&clean)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	// Summed here rather than with GROUP BY, which would sort every row.
	q := `SELECT c.payer, m.size FROM messages m JOIN channels c ON c.name = m.channel`
	if clean == 1 {
		q = `SELECT sub, bytes FROM usage`
	}
	rows, err := a.w.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var sub sql.RawBytes
		var n int64
		if err := rows.Scan(&sub, &n); err != nil {
			return err
		}
		a.usage.add(parsePayer(string(sub)), n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if clean == 1 {
		_, err = a.w.ExecContext(ctx, `UPDATE state SET value = 0 WHERE key = 'usage_clean'`)
	}
	return err
}

// charge reserves n bytes of a payer's budgets for a publish; it returns
// the scope of the budget they would pass, or "" once they are reserved.
// Called by the sequencer.
func (a *archive) charge(payerStr string, n int64) string {
	p := parsePayer(payerStr)
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	if scope := a.budget.refuse(p, n, a.usage); scope != "" {
		return scope
	}
	a.usage.add(p, n)
	return ""
}

// credit returns bytes freed by deletes to their payers' budgets.
func (a *archive) credit(freed map[string]int64) {
	if len(freed) == 0 {
		return
	}
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	for p, n := range freed {
		a.usage.add(parsePayer(p), -n)
	}
}

// used returns the bytes an account has stored.
func (a *archive) used(sub string) int64 {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.account[sub]
}

func (a *archive) storedBytes() int64 {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.total
}

func (a *archive) budgetUse() (budgetUse, limits) {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.use(), a.budget
}

// deleteRows adds what the rows a delete will remove hold per account
// (sum's rows of sub and bytes) to freed, then runs the delete, both with
// args. Only the committer deletes, so both see the same rows.
func deleteRows(ctx context.Context, sum, del *sql.Stmt, freed map[string]int64, args ...any) error {
	if err := addFreed(ctx, sum, freed, args...); err != nil {
		return err
	}
	_, err := del.ExecContext(ctx, args...)
	return err
}

func addFreed(ctx context.Context, stmt *sql.Stmt, freed map[string]int64, args ...any) error {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var sub string
		var n int64
		if err := rows.Scan(&sub, &n); err != nil {
			return err
		}
		freed[sub] += n
	}
	return rows.Err()
}

// archivePageSize is the page size of a new archive file. A transaction
// writes every page it changes whole, and most of the indexer's are small
// (rows of about 100 bytes, the payloads being in the log): SQLite's
// default. (16 KiB served the payloads in the rows; a file made then keeps
// its pages.)
const archivePageSize = 4096

// setPageSize gives a new, empty database file the archive's page size. The
// page size of a WAL database is fixed, so the file leaves WAL mode for the
// VACUUM that applies it.
func setPageSize(ctx context.Context, c *sql.Conn) error {
	var tables int
	if err := c.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil || tables > 0 {
		return err
	}
	for _, q := range []string{"PRAGMA journal_mode=DELETE", fmt.Sprintf("PRAGMA page_size=%d", archivePageSize), "VACUUM"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			c.ExecContext(ctx, "PRAGMA journal_mode=WAL")
			return err
		}
	}
	var mode string
	if err := c.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil || mode != "wal" {
		return fmt.Errorf("journal mode %q: %v", mode, err)
	}
	return nil
}

func (a *archive) closeStmts() {
	for _, s := range []*sql.Stmt{a.insert, a.insertN, a.evict, a.evictHS, a.upsert, a.load, a.readApp, a.readAll, a.loadApp, a.floorQ, a.sweep,
		a.evictSum, a.hsFloor, a.evictHSSum, a.sweepTo, a.sweepSum, a.sweepMax,
		a.dropApp, a.dropHS, a.dropSweep, a.dropsQ, a.oldestApp, a.oldestAll, a.firstApp, a.firstAll,
		a.setApplied, a.segUsed, a.moveRow} {
		if s != nil {
			s.Close()
		}
	}
}

// submit queues a request for the writer. It blocks while the queue is full,
// which is the backpressure a fast publisher feels.
func (a *archive) submit(r *pubReq) { a.reqs <- r }

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
func (a *archive) runSequencer() {
	defer close(a.seqd)
	for r := range a.reqs {
		a.mark.taken()
		ch, origin, pb := r.channel, r.c, r.buf
		live := a.sequence(r)
		// The committer first, the push after. The goroutine readied
		// last is the one this thread runs next once the sequencer
		// waits: pushing last lets the subscriber's writer run before
		// the committer's transaction (hundreds of µs of CPU, then an
		// fsync that keeps the thread) rather than behind it, and the
		// committer is taken by the other thread or runs right after.
		a.seqd <- r
		if live != nil {
			a.hub.fanout(ch, live, pb, origin)
		}
	}
}

// sequence numbers a request. It returns the push frame of an
// application entry that may go to subscribers at once (before its
// commit); other entries keep their frame for the committer to deliver.
func (a *archive) sequence(r *pubReq) []byte {
	if r.reply != nil || r.move {
		return nil
	}
	st := a.state(r.channel)
	if st == nil {
		return nil
	}
	r.st = st
	if r.fence {
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
			r.refused, r.dup = ackFrame(seq), true
			return nil
		}
	}
	if r.hdr.commit {
		if st.hasEpoch && r.hdr.epoch != st.epoch {
			r.refused = staleEpochFrame(st.epoch)
			return nil
		}
		// The first commit sets the fence; one far ahead of any group
		// (or one no epoch could follow) would jam the channel for good.
		if r.hdr.epoch == math.MaxUint64 || !st.hasEpoch && r.hdr.epoch > a.maxFirstEpoch {
			r.refused = epochOutOfRangeFrame(a.maxFirstEpoch)
			return nil
		}
	}
	if !fitsRecord(r.channel, "", len(r.payload)) {
		// Only a relay whose PreAuthReadLimit lets a payload past the
		// record's bound gets here; a record could not carry it.
		r.refused = errorFrame("name_too_long", "the entry is too long to archive")
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
		r.refused = quotaFrame(scope)
		return nil
	}
	if r.hdr.commit {
		st.hasEpoch, st.epoch, r.dirty = true, r.hdr.epoch+1, true
	}
	ts := coarseMillis(a.now(), a.granularity)
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
	r.frame = pushSuffix(r.frame, r.seq, r.hdr.entryType, ts)
	if r.hdr.entryType == EntryApp && r.seq <= st.durable.Load() && st.held.Load() == 0 {
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
func (a *archive) state(name string) *chanState {
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

// sweepInterval is how often the archives sweep expired entries (and the
// compactor looks at the log's size): every 30 s, or every TTL if shorter.
func sweepInterval(ttl time.Duration) time.Duration { return min(ttl, 30*time.Second) }

// committerNice is how much nicer than the rest of the process the
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
const committerNice = 10

// runCommitter is the committer of an archive in memory: it writes and
// answers each batch. It returns when the sequencer has stopped and
// everything it passed on is committed and answered.
func (a *archive) runCommitter(ctx context.Context) {
	a.committerTID.Store(int64(lowerPriority(committerNice)))
	sweep := time.NewTicker(sweepInterval(a.ttl))
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
func (a *archive) drain(batch []*pubReq) []*pubReq {
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

func (a *archive) commit(ctx context.Context, batch []*pubReq) {
	err := a.failure()
	if err == nil {
		t0 := time.Now()
		werr := a.write(ctx, batch, logPos{})
		a.counters.observeCommit(time.Since(t0))
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
func (a *archive) fail(err error) error {
	a.failMu.Lock()
	defer a.failMu.Unlock()
	if a.failed == nil {
		a.failed = err
		a.log.Error("relay: archive write failed; refusing publishes until restart", "err", err)
	}
	return a.failed
}

func (a *archive) ready(context.Context) error {
	if a.failure() != nil {
		return errors.New("the archive stopped after a failed write; restart the relay")
	}
	return nil
}

func (a *archive) up() bool { return a.failure() == nil }

func (a *archive) failure() error {
	a.failMu.Lock()
	defer a.failMu.Unlock()
	return a.failed
}

// release follows a batch's flush (err nil) or its failure: it raises the
// durable ceilings, delivers the entries that waited for durability and
// answers every request, in arrival order.
func (a *archive) release(batch []*pubReq, err error) {
	if err == nil {
		for _, r := range batch {
			if r.dirty && r.st != nil && r.reserved > r.st.durable.Load() {
				r.st.durable.Store(r.reserved)
			}
			if r.dirty && r.st != nil && r.hasEpoch && r.refused == nil && (r.fence || r.hdr.commit) {
				a.fences.Store(r.channel, r.epoch)
			}
		}
	}
	for _, r := range batch {
		if r.held {
			if err == nil {
				a.hub.fanout(r.channel, r.frame, r.buf, r.c)
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
func (a *archive) yield(batch []*pubReq) {
	if len(batch) <= yieldBatch {
		runtime.Gosched()
	}
}

// loggedBatch is a batch the logger has flushed (ok) or failed, on its
// way to the indexer; end is the log's end after it.
type loggedBatch struct {
	reqs []*pubReq
	end  logPos
	ok   bool
}

// runLogger is the first committer stage of a file-backed archive: it
// appends each batch to the log with one flush, then delivers the held
// entries and answers the batch. An acknowledged entry is thus in the log,
// which an open replays into the index; reads wait for the indexer (see
// commitMark), so an acknowledged entry is also readable.
func (a *archive) runLogger() {
	defer close(a.logged)
	for r := range a.seqd {
		// A new slice each time: the indexer owns it after.
		batch := a.drain(append(make([]*pubReq, 0, 64), r))
		err := a.failure()
		var end logPos
		if err == nil {
			t0 := time.Now()
			var lerr error
			end, lerr = a.appendLog(batch)
			a.counters.observeCommit(time.Since(t0))
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
func (a *archive) appendLog(batch []*pubReq) (logPos, error) {
	n := 0
	for _, r := range batch {
		if rec, ok := logRecord(r); ok {
			n += recordSize(&rec)
		}
	}
	if n == 0 {
		return a.seglog.end(), nil
	}
	seed, err := a.seglog.room(n)
	if err != nil {
		return logPos{}, err
	}
	at := a.seglog.end() // where the batch goes
	buf := a.logBuf[:0]
	for _, r := range batch {
		rec, ok := logRecord(r)
		if !ok {
			continue
		}
		start := len(buf)
		var rel int
		if buf, rel, err = appendRecord(buf, seed, &rec); err != nil {
			return logPos{}, err
		}
		if !r.fence {
			// The record holds the payload now. (After a failed
			// append nothing reads either: the batch is refused.)
			r.seg, r.at, r.payload = at.seg, at.off+int64(start+rel), nil
		}
	}
	if err := a.seglog.append(buf); err != nil {
		return logPos{}, err
	}
	a.logBuf = buf[:0]
	if cap(buf) > maxLogBuf {
		a.logBuf = nil
	}
	return a.seglog.end(), nil
}

// logRecord returns the log record of a request, or false for one that
// stores nothing.
func logRecord(r *pubReq) (logRec, bool) {
	if r.move {
		return logRec{kind: recEntry, flags: recMoved, entryType: r.hdr.entryType, seq: r.seq, ts: r.ts,
			channel: r.channel, payload: r.payload}, true
	}
	if r.reply != nil || r.refused != nil || r.st == nil {
		return logRec{}, false
	}
	rec := logRec{kind: recEntry, entryType: r.hdr.entryType, seq: r.seq, ts: r.ts,
		reserved: r.reserved, epoch: r.epoch, channel: r.channel, payload: r.payload}
	if r.fence {
		rec = logRec{kind: recChan, reserved: r.reserved, epoch: r.epoch, channel: r.channel}
	}
	if r.dirty {
		rec.flags |= recDirty
	}
	if r.hasEpoch {
		rec.flags |= recHasEpoch
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
	end  logPos
}

func (ib *indexBatch) add(lb loggedBatch) {
	ib.n += len(lb.reqs)
	if lb.ok {
		ib.rows, ib.end = append(ib.rows, lb.reqs...), lb.end
	}
}

// gather adds the batches waiting, up to maxIndexBatch rows; true once
// the logger has stopped.
func (a *archive) gather(ib *indexBatch) bool {
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
func (a *archive) runIndexer(ctx context.Context) {
	a.committerTID.Store(int64(lowerPriority(committerNice)))
	sweep := time.NewTicker(sweepInterval(a.ttl))
	defer sweep.Stop()
	var rows []*pubReq
	collected := a.applied.seg
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
			if a.applied.seg > collected || a.moved {
				if a.applied.seg > collected {
					select {
					case a.compact <- struct{}{}:
					default:
					}
				}
				collected, a.moved = a.applied.seg, false
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

// yieldBatch is the largest transaction after which the committer yields.
const yieldBatch = 64

// write stores a batch in one transaction. With a log, the rows point
// into it and the transaction records end, the log position it holds up
// to; in memory, the rows hold the payloads.
func (a *archive) write(ctx context.Context, batch []*pubReq, end logPos) (err error) {
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
		if r.st != nil && !r.st.loaded && r.reply == nil && r.refused == nil && !r.fence && r.hdr.entryType == EntryApp {
			if err := a.loadRuns(ctx, r.st); err != nil {
				return err
			}
		}
	}
	args := a.args[:0]
	for _, r := range batch {
		if r.move {
			from := any(int64(r.from.seg))
			if r.inline {
				from = nil
			}
			if _, err := a.moveRow.ExecContext(ctx, int64(r.seg), r.at, r.channel, int64(r.seq), from, r.from.off); err != nil {
				return err
			}
			a.moved = true
			continue
		}
		if r.reply != nil || r.refused != nil || r.st == nil {
			continue
		}
		if r.fence {
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
	for st, r := range rows {
		if dirty[st] {
			var epoch any
			if r.hasEpoch {
				epoch = int64(r.epoch)
			}
			if _, err := a.upsert.ExecContext(ctx, st.name, int64(r.reserved), epoch, r.sub); err != nil {
				return err
			}
		}
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
		if _, err := a.setApplied.ExecContext(ctx, int64(end.seg), end.off); err != nil {
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

// trimHandshakes deletes a channel's handshake entries past the cap, and
// adds what they held per account to freed.
func (a *archive) trimHandshakes(ctx context.Context, name string, freed map[string]int64) error {
	var below int64
	err := a.hsFloor.QueryRowContext(ctx, name, int64(a.cap)).Scan(&below)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := a.dropHS.ExecContext(ctx, name, below); err != nil {
		return err
	}
	return deleteRows(ctx, a.evictHSSum, a.evictHS, freed, name, below)
}

// loadRuns loads a channel's newest cap application seqs, inside the
// committer's transaction and before it adds any.
func (a *archive) loadRuns(ctx context.Context, st *chanState) error {
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
func (a *archive) readFloor(ctx context.Context, name string) (uint64, error) {
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

func (a *archive) answer(r *pubReq, err error) {
	if r.weight > 0 {
		a.inflight.Release(r.weight)
	}
	if r.done != nil {
		if err == nil && r.fence && r.st == nil {
			err = errors.New("relay: archive: the channel's state cannot be read")
		}
		r.done <- err
		return
	}
	if r.c == nil {
		return
	}
	f := r.reply
	switch {
	case f != nil:
	case r.dup && err != nil:
		// The first publish with the id is in this failed batch or an
		// earlier one (the archive fails and stops): not stored.
		f = errorFrame("internal", "the archive could not store the message")
	case r.refused != nil:
		f = r.refused
	case err != nil || r.st == nil:
		f = errorFrame("internal", "the archive could not store the message")
	default:
		f = ackFrame(r.seq)
	}
	// Queued before pending drops, so a reply the reader sends directly
	// can never overtake it.
	r.c.pushAnswer(f)
	r.c.pending.Add(-1)
}

// finish records the exact last sequence number of every channel, so a
// clean restart continues without a gap. It runs after the sequencer has
// stopped.
func (a *archive) finish(ctx context.Context) {
	if a.failure() != nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if a.seglog != nil && a.seglog.sync {
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
		end := a.seglog.end()
		if _, err := a.setApplied.ExecContext(ctx, int64(end.seg), end.off); err != nil {
			a.w.ExecContext(ctx, "ROLLBACK")
			return
		}
	}
	a.w.ExecContext(ctx, "COMMIT")
}

// saveUsage stores the accounts' usage and marks it current (see
// loadUsage), inside finish's transaction.
func (a *archive) saveUsage(ctx context.Context) error {
	if _, err := a.w.ExecContext(ctx, `DELETE FROM usage`); err != nil {
		return err
	}
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	for sub, n := range a.usage.payers {
		if _, err := a.w.ExecContext(ctx, `INSERT INTO usage (sub, bytes) VALUES (?, ?)`, sub, n); err != nil {
			return err
		}
	}
	_, err := a.w.ExecContext(ctx, `INSERT INTO state (key, value) VALUES ('usage_clean', 1)
		ON CONFLICT (key) DO UPDATE SET value = 1`)
	return err
}

// sweepTTL deletes entries older than the TTL. ts grows with the row id, so
// the expired rows are exactly those before the first unexpired one.
func (a *archive) sweepTTL(ctx context.Context) {
	a.counters.sweep()
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	var below int64
	err := a.sweepTo.QueryRowContext(ctx, cutoff).Scan(&below)
	freed := make(map[string]int64)
	var cut map[string]uint64
	if err == nil {
		cut, err = a.sweptTo(ctx, below)
	}
	if err == nil {
		// The floors rise first: a sweep that fails after it leaves reads
		// told of a loss that has not happened yet, never the reverse.
		_, err = a.dropSweep.ExecContext(ctx, below)
	}
	if err == nil {
		err = deleteRows(ctx, a.sweepSum, a.sweep, freed, below)
	}
	if err != nil {
		a.log.Error("relay: archive TTL sweep failed", "err", err)
		return
	}
	a.credit(freed)
	// The sweep gave back the bytes of what it deleted, so the blocks
	// that held those rows must not give them back again.
	for name, to := range cut {
		st := a.loaded[name]
		if st == nil {
			continue
		}
		k := 0
		for k < len(st.blocks) && st.blocks[k].last <= to {
			k++
		}
		st.blocks = slices.Delete(st.blocks, 0, k)
		if len(st.blocks) > 0 && st.blocks[0].first <= to {
			st.blocks[0].exact = false
		}
		st.evicted = max(st.evicted, to)
	}
}

// sweptTo returns, per channel, the highest seq the sweep of the rows with
// ids below below deletes.
func (a *archive) sweptTo(ctx context.Context, below int64) (map[string]uint64, error) {
	rows, err := a.sweepMax.QueryContext(ctx, below)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cut := make(map[string]uint64)
	for rows.Next() {
		var name string
		var seq int64
		if err := rows.Scan(&name, &seq); err != nil {
			return nil, err
		}
		cut[name] = uint64(seq)
	}
	return cut, rows.Err()
}

// Pages of GET /v1/messages and GET /v1/sync are streamed: rows go to the
// client through one bounded buffer as SQLite yields them, so a read holds
// at most a buffer and one row, whatever the page's size.
const (
	pageBuffer = 64 << 10
	b64Chunk   = 48 << 10 // payload bytes encoded at a time; a multiple of 3
)

var pageBufs = sync.Pool{New: func() any {
	return &pageBuf{w: bufio.NewWriterSize(nil, pageBuffer), b64: make([]byte, 0, base64.StdEncoding.EncodedLen(b64Chunk))}
}}

type pageBuf struct {
	w   *bufio.Writer
	b64 []byte
	num []byte
	raw []byte // payload bytes read from the log, b64Chunk at most
	win []byte // a window of the log, logWindowSize
}

func (pb *pageBuf) window() []byte {
	if pb.win == nil {
		pb.win = make([]byte, logWindowSize)
	}
	return pb.win
}

// logWindowSize is how much of a segment a page reads at a time: the
// entries of a channel published together lie together in the log, so a
// page's are mostly in a few windows, each one pread.
const logWindowSize = 64 << 10

// logWindow reads a segment through a window of it.
type logWindow struct {
	f   *os.File
	seg uint64
	off int64  // where the window begins
	n   int    // bytes in it
	buf []byte // logWindowSize
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

// pageTail is the longest end of a page.
const pageTail = len(`],"has_more":false,"truncated":false,"oldest_seq":18446744073709551615}` + "\n")

// writePage writes the JSON body of GET /v1/messages (appOnly) or GET
// /v1/sync to w: the entries of a channel after since, up to limit of
// them and up to maxBytes of body (but always one entry, if there is one),
// and has_more, which is true when either bound cut the page, truncated
// and oldest_seq (see cutOff). begin is called once the archive has
// answered, before the first byte of the body; started reports whether it
// was. An error after that leaves a partial body, which the caller can
// only abort.
func (a *archive) writePage(ctx context.Context, w io.Writer, begin func(), name string, since uint64, limit, maxBytes int, appOnly bool) (started bool, err error) {
	if a.seglog != nil {
		// Before the snapshot: no segment its rows point into goes
		// while the page is read.
		g := a.seglog.pin()
		defer a.seglog.unpin(g)
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
	pe := newPageEncoder(w, maxBytes, appOnly)
	defer pe.release()
	win := logWindow{buf: pe.pb.window()}
	pe.truncated, pe.oldest = trunc, oldest
	for n := 0; rows != nil && rows.Next(); n++ {
		if n == limit {
			pe.more = true
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
				f, err := a.seglog.file(uint64(seg.Int64))
				if err != nil {
					return true, fmt.Errorf("relay: archive read: %w", err)
				}
				win.reset(f, uint64(seg.Int64))
			}
			fits, err = pe.addAt(uint64(seq), uint8(et), ts, &win, at, size)
		} else {
			fits, err = pe.add(uint64(seq), uint8(et), ts, payload)
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
	return true, pe.finish()
}

// cutOff reports whether a read of a channel's log (application entries
// when appOnly, else all) from since is truncated, and the oldest seq the
// log holds (0 when it holds nothing). A read is truncated when an entry
// of the log after since is gone or hidden: deleted by the cap or the TTL
// (seqs up to the channel's drop floor in the floors table), or still
// stored but past the TTL cutoff or below the cap floor. Seqs are not
// contiguous, so this never compares since with the oldest seq: a gap
// below the oldest entry is not a loss.
func (a *archive) cutOff(ctx context.Context, tx *sql.Tx, name string, since uint64, cutoff int64, floor uint64, appOnly bool) (bool, uint64, error) {
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

// pageEncoder writes one page of entries as JSON through a pooled buffer,
// whichever archive yields the entries.
type pageEncoder struct {
	pb      *pageBuf
	appOnly bool
	max     int
	size    int
	n       int
	more    bool // set when a bound cut the page

	truncated bool   // since was older than what the channel holds
	oldest    uint64 // the oldest seq the log holds, 0 for none
	first     uint64 // the page's first entry, 0 for none
}

func newPageEncoder(w io.Writer, maxBytes int, appOnly bool) *pageEncoder {
	key := `{"entries":[`
	if appOnly {
		key = `{"messages":[`
	}
	pb := pageBufs.Get().(*pageBuf)
	pb.w.Reset(w)
	pb.w.WriteString(key)
	return &pageEncoder{pb: pb, appOnly: appOnly, max: maxBytes, size: len(key)}
}

// add writes one entry, or reports false (and sets more) when it would
// take the page past its byte bound; the first entry always fits.
func (e *pageEncoder) add(seq uint64, et uint8, ts int64, payload []byte) (bool, error) {
	head, fits := e.begin(seq, et, ts, int64(len(payload)))
	if !fits {
		return false, nil
	}
	pb := e.pb
	for off := 0; off < len(payload); off += b64Chunk {
		pb.b64 = base64.StdEncoding.AppendEncode(pb.b64[:0], payload[off:min(off+b64Chunk, len(payload))])
		pb.w.Write(pb.b64)
	}
	return e.end(head)
}

// addAt is add for a payload of n bytes at off in src, read b64Chunk at a
// time.
func (e *pageEncoder) addAt(seq uint64, et uint8, ts int64, src io.ReaderAt, off, n int64) (bool, error) {
	head, fits := e.begin(seq, et, ts, n)
	if !fits {
		return false, nil
	}
	pb := e.pb
	if pb.raw == nil {
		pb.raw = make([]byte, b64Chunk)
	}
	for o := int64(0); o < n; o += b64Chunk {
		raw := pb.raw[:min(b64Chunk, n-o)]
		if _, err := src.ReadAt(raw, off+o); err != nil {
			return false, fmt.Errorf("relay: archive read: log: %w", err)
		}
		pb.b64 = base64.StdEncoding.AppendEncode(pb.b64[:0], raw)
		pb.w.Write(pb.b64)
	}
	return e.end(head)
}

// begin writes the start of an entry of an n-byte payload, up to the
// payload, and returns where the rest of pb.num begins; false (and more
// set) when the entry would take the page past its byte bound.
func (e *pageEncoder) begin(seq uint64, et uint8, ts int64, n int64) (int, bool) {
	pb := e.pb
	num := pb.num[:0]
	if e.n > 0 {
		num = append(num, ',')
	}
	num = append(num, `{"seq":`...)
	num = strconv.AppendUint(num, seq, 10)
	if !e.appOnly {
		num = append(num, `,"entry_type":`...)
		num = strconv.AppendUint(num, uint64(et), 10)
	}
	num = append(num, `,"payload":"`...)
	head := len(num)
	num = append(num, `","ts":`...)
	num = strconv.AppendInt(num, ts, 10)
	num = append(num, '}')
	pb.num = num
	entry := len(num) + base64.StdEncoding.EncodedLen(int(n))
	if e.n > 0 && e.size+entry+pageTail > e.max {
		e.more = true
		return 0, false
	}
	e.size += entry
	if e.n == 0 {
		e.first = seq
	}
	e.n++
	pb.w.Write(num[:head])
	return head, true
}

// end writes the rest of the entry begin started.
func (e *pageEncoder) end(head int) (bool, error) {
	if _, err := e.pb.w.Write(e.pb.num[head:]); err != nil {
		return false, err // the client is gone
	}
	return true, nil
}

// finish writes the end of the page and flushes it.
func (e *pageEncoder) finish() error {
	bw := e.pb.w
	bw.WriteString(`],"has_more":`)
	bw.WriteString(strconv.FormatBool(e.more))
	bw.WriteString(`,"truncated":`)
	bw.WriteString(strconv.FormatBool(e.truncated))
	bw.WriteString(`,"oldest_seq":`)
	bw.WriteString(strconv.FormatUint(e.oldest, 10))
	bw.WriteString("}\n")
	return bw.Flush()
}

func (e *pageEncoder) release() {
	e.pb.w.Reset(nil)
	pageBufs.Put(e.pb)
}

// nextEpoch returns the commit epoch the channel expects next, and false
// when it has had no commit (nor fence reset) yet. A fence the sequencer
// has moved but not yet made durable is not seen: a commit counts once it
// could be acknowledged.
func (a *archive) nextEpoch(ctx context.Context, channel string) (uint64, bool, error) {
	if v, ok := a.fences.Load(channel); ok {
		return v.(uint64), true, nil
	}
	var reserved int64
	var epoch sql.NullInt64
	var payer string
	err := a.load.QueryRowContext(ctx, channel).Scan(&reserved, &epoch, &payer)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("relay: reading the commit fence: %w", err)
	}
	return uint64(epoch.Int64), epoch.Valid, nil
}

// resetFence is the owner's recovery of a jammed commit fence: from now on
// the channel expects a commit at epoch and refuses every other one as
// stale. It goes through the pipeline like a publish, so it is ordered with
// the publishes around it, and returns once the new fence is durable (or
// the archive failed to store it). It must not be called once the
// relay's Close has begun closing the archive's input.
func (a *archive) resetFence(channel string, epoch uint64, _ int64) error {
	if epoch == math.MaxUint64 {
		return errors.New("relay: fence reset: the epoch after the last one cannot be expected")
	}
	done := make(chan error, 1)
	a.submit(&pubReq{channel: channel, fence: true, resetTo: epoch, done: done})
	return <-done
}

func (a *archive) close() {
	a.closeStmts()
	a.w.Close()
	if a.seglog != nil {
		a.seglog.close()
	}
}
