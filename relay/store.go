package relay

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"sync"

	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// archiver is the archive behind a relay: where publishes are stored and
// numbered, fenced and delivered, and where the catch-up reads come from.
// There are two (openArchiver): the SQLite archive (archive*.go), the
// default, and the JetStream archive (package relay/jsarchive, behind
// external), chosen by Config.Archive, which several relays share. Both keep the
// guarantees docs/RELAY.md states; the contract tests run against each.
type archiver interface {
	// start starts the archive's goroutines.
	start()
	// submit queues a publish (or a reply to leave after the conn's
	// earlier publishes). It blocks while the queue is full.
	submit(r *pubReq)
	// acquire holds n payload bytes until the request is answered.
	acquire(n int64)
	// resetFence makes a channel expect epoch next (the owner's recovery
	// of a jammed fence); id is the directory feed event's id, 0 for none.
	// It returns once the new fence is durable.
	resetFence(channel string, epoch uint64, id int64) error
	// nextEpoch returns the commit epoch a channel expects next, as far
	// as it is durable, and false when the channel has no fence yet (no
	// commit, no reset). Safe for concurrent use.
	nextEpoch(ctx context.Context, channel string) (uint64, bool, error)
	// waitVisible returns once everything pushed to any subscriber before
	// the call can be read (see commitMark).
	waitVisible(ctx context.Context) error
	// writePage writes one page of GET /v1/messages (appOnly) or GET
	// /v1/sync; see archive.writePage.
	writePage(ctx context.Context, w io.Writer, begin func(), name string, since uint64, limit, maxBytes int, appOnly bool) (started bool, err error)
	// used returns the payload bytes an account has stored.
	used(sub string) int64
	// held returns the bytes the budget of scope holds for key (an
	// account, a group or an org; "" for the server's).
	held(scope, key string) int64
	// storedBytes returns the payload bytes stored over all accounts.
	storedBytes() int64
	// budgetUse returns the use of the archive budgets, for the metrics,
	// and their sizes.
	budgetUse() (backend.BudgetUse, backend.Limits)
	// ready returns nil while the archive takes publishes (see Ready).
	ready(ctx context.Context) error
	// up reports, without a request to a backend, whether the archive's
	// backend is reachable, for the metrics.
	up() bool
	// stop closes the input and returns once every request accepted is
	// answered.
	stop()
	// close releases what the archive holds; after stop.
	close()
	// useCounters gives the archive the relay's metrics; before start.
	useCounters(c *relayCounters)
	// lendsFrames reports whether the archive completes and hands on
	// the push frames lent to it (pushBuf) rather than copying.
	lendsFrames() bool
	// handshakeLimit is the largest handshake payload the archive
	// stores (at most MaxHandshakePayload).
	handshakeLimit() int
}

// openArchiver opens the archive a Config chooses: cfg.Archive when it
// names one (jsarchive's, on NATS JetStream), whose relay keeps only its
// own state (revocations, members) in db, the relay's SQLite; else the
// SQLite archive in db itself.
func openArchiver(ctx context.Context, db *sql.DB, h *hub, cfg *Config) (archiver, error) {
	if cfg.Archive == nil {
		a, err := openArchive(ctx, db, h, cfg)
		if err != nil {
			return nil, err // not a nil *archive in an archiver
		}
		return a, nil
	}
	if err := archiveDefaults(cfg); err != nil {
		return nil, err
	}
	if err := sqlitedb.Migrate(ctx, db, migrations); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	a, err := cfg.Archive.Open(ctx, backend.Env{
		Hub: h, Logger: cfg.Logger, Now: cfg.Now, Granularity: cfg.TimeGranularity,
		Cap: cfg.ArchiveCap, TTL: cfg.ArchiveTTL, MaxFirstEpoch: cfg.MaxFirstEpoch,
		MaxPayload: MaxPayload, MaxHandshakePayload: MaxHandshakePayload,
		Budgets:         func(stored int64) backend.Limits { return budgetLimits(cfg, stored) },
		ReadyCheckEvery: readyCheckEvery, SweepInterval: sweepInterval(cfg.ArchiveTTL),
	})
	if err != nil {
		return nil, err
	}
	return external{a}, nil
}

// external is an archive of another package (backend.Archiver) behind
// the relay's archiver: it hands each publish on as a backend.Request.
type external struct{ a backend.Archiver }

func (e external) start() { e.a.Start() }

func (e external) submit(r *pubReq) {
	br := &backend.Request{
		Sub: r.sub, Channel: r.channel, ID: r.id, Payload: r.payload,
		EntryType: r.hdr.entryType, Commit: r.hdr.commit, Epoch: r.hdr.epoch,
		Reply: r.reply, Weight: r.weight,
		Fence: r.fence, ResetTo: r.resetTo, ResetID: r.resetID, Done: r.done,
	}
	if r.c != nil { // a nil *conn would make a Conn that is not nil
		br.Conn = r.c
	}
	e.a.Submit(br)
}

func (e external) acquire(n int64) { e.a.Acquire(n) }
func (e external) resetFence(channel string, epoch uint64, id int64) error {
	return e.a.ResetFence(channel, epoch, id)
}
func (e external) nextEpoch(ctx context.Context, channel string) (uint64, bool, error) {
	return e.a.NextEpoch(ctx, channel)
}
func (e external) waitVisible(ctx context.Context) error { return e.a.WaitVisible(ctx) }
func (e external) writePage(ctx context.Context, w io.Writer, begin func(), name string, since uint64, limit, maxBytes int, appOnly bool) (bool, error) {
	return e.a.WritePage(ctx, w, begin, name, since, limit, maxBytes, appOnly)
}
func (e external) used(sub string) int64                          { return e.a.Used(sub) }
func (e external) held(scope, key string) int64                   { return e.a.Held(scope, key) }
func (e external) storedBytes() int64                             { return e.a.StoredBytes() }
func (e external) budgetUse() (backend.BudgetUse, backend.Limits) { return e.a.BudgetUse() }
func (e external) ready(ctx context.Context) error                { return e.a.Ready(ctx) }
func (e external) up() bool                                       { return e.a.Up() }
func (e external) stop()                                          { e.a.Stop() }
func (e external) close()                                         { e.a.Close() }
func (e external) useCounters(*relayCounters)                     {}
func (e external) lendsFrames() bool                              { return false }
func (e external) handshakeLimit() int                            { return e.a.HandshakeLimit() }

// held returns the bytes the budget of scope holds for key.
func (a *archive) held(scope, key string) int64 {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.Held(scope, key)
}

func (a *archive) useCounters(c *relayCounters) { a.counters = c }
func (a *archive) lendsFrames() bool            { return true }
func (a *archive) handshakeLimit() int          { return MaxHandshakePayload }

var _ archiver = (*archive)(nil)

// sqliteRun holds the SQLite archive's goroutines.
type sqliteRun struct{ wg sync.WaitGroup }

func (a *archive) start() {
	a.run.wg.Go(a.runSequencer)
	if a.seglog == nil {
		a.run.wg.Go(func() { a.runCommitter(context.Background()) })
		return
	}
	// The indexer's lag is at most this many batches, which is what a
	// read may wait for; the logger wakes a lingering indexer once half
	// are waiting.
	a.logged = make(chan loggedBatch, 16)
	a.compact, a.quit = make(chan struct{}, 1), make(chan struct{})
	a.run.wg.Go(a.runLogger)
	a.run.wg.Go(func() { a.runIndexer(context.Background()) })
	a.compWG.Go(a.runCompactor)
}

func (a *archive) stop() {
	if a.quit != nil {
		// Before the input closes: the compactor submits moves.
		close(a.quit)
		a.compWG.Wait()
	}
	close(a.reqs)
	a.run.wg.Wait()
}

func (a *archive) acquire(n int64) { a.inflight.Acquire(context.Background(), n) }

func (a *archive) waitVisible(ctx context.Context) error { return a.mark.wait(ctx) }
