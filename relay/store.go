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
// There are two (the backends table below): the SQLite archive
// (archive*.go), the default, and the JetStream archive (jetstream*.go),
// chosen by Config.NATSURL, which several relays share. Both keep the
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

// An openBackend opens an archive for a relay: db is the relay's own SQLite
// database (revocations, members, and for the SQLite archive the archive
// itself). backends is the table New chooses from, by backendName; a new
// backend adds its constructor here and the Config fields that choose it.
type openBackend func(ctx context.Context, db *sql.DB, h *hub, cfg *Config) (archiver, error)

var backends = map[string]openBackend{
	"sqlite":    openSQLiteBackend,
	"jetstream": openJetStreamBackend,
}

// backendName is the backend a Config chooses: JetStream when it names a
// NATS, else SQLite.
func backendName(cfg *Config) string {
	if cfg.NATSURL != "" {
		return "jetstream"
	}
	return "sqlite"
}

func openSQLiteBackend(ctx context.Context, db *sql.DB, h *hub, cfg *Config) (archiver, error) {
	a, err := openArchive(ctx, db, h, cfg)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// openJetStreamBackend keeps the relay's own state (revocations,
// members) in the local SQLite; the archive is the stream.
func openJetStreamBackend(ctx context.Context, db *sql.DB, h *hub, cfg *Config) (archiver, error) {
	if err := sqlitedb.Migrate(ctx, db, migrations); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	a, err := openJetStream(ctx, h, cfg)
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (a *archive) useCounters(c *relayCounters) { a.counters = c }
func (a *archive) lendsFrames() bool            { return true }
func (a *archive) handshakeLimit() int          { return MaxHandshakePayload }

func (a *jsArchive) useCounters(*relayCounters) {}
func (a *jsArchive) lendsFrames() bool          { return false }
func (a *jsArchive) handshakeLimit() int        { return a.maxHandshake }

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
