package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

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
	from   seglog.Pos
	inline bool
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
	budget        backend.Limits // the archive budgets (budget.go)

	counters *relayCounters // the relay's metrics; nil records nothing

	usageMu sync.Mutex     // guards usage
	usage   *backend.Tally // payload bytes stored (or being stored) per payer and budget
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

	// A file-backed archive's log (package relay/internal/seglog), nil in memory. The
	// logger appends each batch to it and answers the batch; the indexer
	// then writes the batch's rows, and applied is the log position the
	// index holds up to (indexer only).
	seglog  *seglog.Log
	logged  chan loggedBatch
	logBuf  []byte // logger only
	applied seglog.Pos
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
		usage:         backend.NewTally(),
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
		dedup:         newDedup(backend.DupWindow(cfg.ArchiveTTL)),
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
	if err := a.prepare(ctx, db, w); err != nil {
		return fail(err)
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
	a.budget = budgetLimits(cfg, a.usage.Total)
	return a, nil
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
		a.seglog.Close()
	}
}
