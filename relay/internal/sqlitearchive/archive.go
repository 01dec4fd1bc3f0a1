// Package sqlitearchive is the relay's default archive: SQLite for the
// index and the channels' rows, and, for an archive in a file, a segment
// log (relay/internal/seglog) beside it that every acknowledged batch is
// durable in with one fdatasync. The relay opens it through the
// backend.Backend that New returns, as it opens every archive.
//
// The files, one job each: archive.go (the type, Open, the request,
// fences), schema.go (migrations, prepared statements), sequencer.go
// (seqs, reserved blocks, the fence check, live delivery), index.go (the
// logger and the indexer), committer.go (the batch transaction, the
// answers, the in-memory committer), log.go (replay, segment collection,
// the compactor), quota.go (usage per payer), sweep.go (the TTL), pages.go
// (the catch-up reads), dedup.go (publish ids), visible.go (what a read
// waits for), run.go (the goroutines and the backend.Archiver methods).
package sqlitearchive

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
	// maxInflightBytes bounds the payload bytes held between the relay's
	// readers and the answers; a publisher past it waits (Acquire).
	maxInflightBytes = 64 << 20
)

// header is what the relay read of a payload's cleartext MLS header.
type header struct {
	entryType uint8
	commit    bool   // the content type is commit: the fence checks its epoch
	epoch     uint64 // a commit's
}

// reqKind tells apart the requests that travel the pipeline. They share
// one queue because each keeps its place among the others: a reply leaves
// after the connection's earlier publishes, a fence reset applies between
// the commits around it, a move is logged in order with the publishes.
type reqKind uint8

const (
	kindPublish reqKind = iota // an entry to number, store and deliver
	kindReply                  // reply, sent once the connection's earlier publishes are answered
	kindFence                  // a fence reset (ResetFence)
	kindMove                   // a stored entry the compactor moves
)

// pubReq is one request queued for the archive, of one kind.
type pubReq struct {
	kind reqKind
	c    backend.Conn // nil for the archive's own requests
	// sub is the payer (relay/budget.go): the publishing account, with its org
	// and group, until the sequencer makes it the channel's payer, whom
	// the entry is charged to. It is never stored with the entry.
	sub     string
	channel string
	id      string // the scoped key of the publish's "id" (dedupKey), or ""
	payload []byte // nil once the entry is in the log
	hdr     header
	frame   []byte           // push frame up to the payload; completed by the sequencer
	buf     *backend.PushBuf // the lent buffer frame was built in, or nil
	reply   []byte           // kindReply: the frame
	weight  int64            // held in archive.inflight until answered

	// kindFence: the channel expects resetTo next; done receives the
	// commit's result (as it does for the archive's own publishes).
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

	// kindMove: a stored entry the compactor moves from where its
	// payload was, from, or from its row (inline: an entry stored before
	// the log, see migrateInline); done receives the flush's result.
	from   seglog.Pos
	inline bool
}

// Archive is the SQLite store. The committer goroutine owns every write;
// see runSequencer for the pipeline.
type Archive struct {
	db  *sql.DB
	w   *sql.Conn
	hub backend.Hub
	cap uint64
	ttl time.Duration

	evictChunk    uint64 // rows the cap eviction deletes at a time, at least
	maxFirstEpoch uint64
	budget        backend.Limits // the archive budgets (relay/budget.go)

	metrics      backend.Metrics // the relay's metrics; nil records nothing
	maxHandshake int             // the largest handshake payload
	sweepEvery   time.Duration   // how often the TTL sweep runs

	usageMu sync.Mutex     // guards usage
	usage   *backend.Tally // payload bytes stored (or being stored) per payer and budget
	now     func() time.Time
	// granularity is relay.Config.TimeGranularity: entries' ts are rounded
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

// Config is where the archive keeps its data.
type Config struct {
	// DB is the relay's SQLite database, which the archive migrates and
	// writes through one connection of its own.
	DB *sql.DB
	// Path is DB's file ("" for one in memory, which has no log); the log
	// is LogDir(Path).
	Path string
	// NoSync leaves out every flush: an ack then means written, not
	// durable (tests and benchmarks).
	NoSync bool
	// Segment is the size log segments grow to (0 for
	// seglog.DefaultMaxSegment); tests make it small.
	Segment int64
}

// New returns the backend that opens the archive cfg describes.
func New(cfg Config) backend.Backend { return opener{cfg} }

type opener struct{ cfg Config }

func (o opener) Open(ctx context.Context, env backend.Env) (backend.Archiver, error) {
	a, err := openArchive(ctx, o.cfg, env)
	if err != nil {
		return nil, err // not a nil *Archive in an Archiver
	}
	return a, nil
}

// LogDir is the folder of the log of the archive in the database file
// dbPath.
func LogDir(dbPath string) string { return dbPath + "-log" }

func openArchive(ctx context.Context, cfg Config, env backend.Env) (*Archive, error) {
	db := cfg.DB
	w, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("relay: archive connection: %w", err)
	}
	if cfg.Path != "" {
		if err := setPageSize(ctx, w); err != nil {
			w.Close()
			return nil, fmt.Errorf("relay: archive page size: %w", err)
		}
	}
	if err := sqlitedb.Migrate(ctx, db, Migrations); err != nil {
		w.Close()
		return nil, fmt.Errorf("relay: %w", err)
	}
	a := &Archive{
		db:            db,
		w:             w,
		hub:           env.Hub,
		metrics:       env.Metrics,
		cap:           uint64(env.Cap),
		evictChunk:    max(1, uint64(env.Cap)/16),
		maxFirstEpoch: env.MaxFirstEpoch,
		maxHandshake:  env.MaxHandshakePayload,
		sweepEvery:    env.SweepInterval,
		usage:         backend.NewTally(),
		loaded:        make(map[string]*chanState),
		ttl:           env.TTL,
		now:           env.Now,
		granularity:   env.Granularity,
		log:           env.Logger,
		reqs:          make(chan *pubReq, maxBatch),
		inflight:      semaphore.NewWeighted(maxInflightBytes),
		seqd:          make(chan *pubReq, maxBatch),
		mark:          newCommitMark(),
		states:        make(map[string]*chanState),
		dedup:         newDedup(backend.DupWindow(env.TTL)),
	}
	fail := func(err error) (*Archive, error) {
		a.Close()
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
	if cfg.Path != "" {
		if err := a.openLog(ctx, LogDir(cfg.Path), !cfg.NoSync, cfg.Segment); err != nil {
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
	a.budget = env.Budgets(a.usage.Total)
	return a, nil
}

func (a *Archive) closeStmts() {
	for _, s := range []*sql.Stmt{a.insert, a.insertN, a.evict, a.evictHS, a.upsert, a.load, a.readApp, a.readAll, a.loadApp, a.floorQ, a.sweep,
		a.evictSum, a.hsFloor, a.evictHSSum, a.sweepTo, a.sweepSum, a.sweepMax,
		a.dropApp, a.dropHS, a.dropSweep, a.dropsQ, a.oldestApp, a.oldestAll, a.firstApp, a.firstAll,
		a.setApplied, a.segUsed, a.moveRow} {
		if s != nil {
			s.Close()
		}
	}
}

// NextEpoch returns the commit epoch the channel expects next, and false
// when it has had no commit (nor fence reset) yet. A fence the sequencer
// has moved but not yet made durable is not seen: a commit counts once it
// could be acknowledged.
func (a *Archive) NextEpoch(ctx context.Context, channel string) (uint64, bool, error) {
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

// ResetFence is the owner's recovery of a jammed commit fence: from now on
// the channel expects a commit at epoch and refuses every other one as
// stale. It goes through the pipeline like a publish, so it is ordered with
// the publishes around it, and returns once the new fence is durable (or
// the archive failed to store it). It must not be called once the
// relay's Close has begun closing the archive's input.
func (a *Archive) ResetFence(channel string, epoch uint64, _ int64) error {
	if epoch == math.MaxUint64 {
		return errors.New("relay: fence reset: the epoch after the last one cannot be expected")
	}
	done := make(chan error, 1)
	a.submit(&pubReq{kind: kindFence, channel: channel, resetTo: epoch, done: done})
	return <-done
}

func (a *Archive) Close() {
	a.closeStmts()
	a.w.Close()
	if a.seglog != nil {
		a.seglog.Close()
	}
}
