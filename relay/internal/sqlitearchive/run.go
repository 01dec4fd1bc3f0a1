package sqlitearchive

import (
	"context"
	"sync"

	"github.com/skytale-oss/skytale/relay/internal/backend"
	"github.com/skytale-oss/skytale/relay/internal/seglog"
)

var _ backend.Archiver = (*Archive)(nil)

// Submit queues a publish, or a reply to leave after the connection's
// earlier publishes; it blocks while the queue is full.
func (a *Archive) Submit(br backend.Request) {
	kind := kindPublish
	if br.Reply != nil {
		kind = kindReply
	}
	a.submit(&pubReq{
		kind: kind, c: br.Conn, sub: br.Sub, channel: br.Channel, id: br.ID, payload: br.Payload,
		hdr:   header{entryType: br.EntryType, commit: br.Commit, epoch: br.Epoch},
		frame: br.Frame, buf: br.Buf, reply: br.Reply, weight: br.Weight,
	})
}

// Held returns the bytes the budget of scope holds for key.
func (a *Archive) Held(scope, key string) int64 {
	a.usageMu.Lock()
	defer a.usageMu.Unlock()
	return a.usage.Held(scope, key)
}

// LendsFrames is true: the sequencer completes each publish's push frame
// in the buffer the relay lent and fans it out.
func (a *Archive) LendsFrames() bool { return true }

// HandshakeLimit is the relay's: a record holds the largest handshake.
func (a *Archive) HandshakeLimit() int { return a.maxHandshake }

// sqliteRun holds the SQLite archive's goroutines.
type sqliteRun struct{ wg sync.WaitGroup }

// Start starts the pipeline: the sequencer and, in memory, the committer;
// with a log, the logger, the indexer and the compactor.
func (a *Archive) Start() {
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

// Stop closes the input and returns once every request accepted is
// answered.
func (a *Archive) Stop() {
	if a.quit != nil {
		// Before the input closes: the compactor submits moves.
		close(a.quit)
		a.compWG.Wait()
	}
	close(a.reqs)
	a.run.wg.Wait()
}

// Acquire holds n payload bytes until the request is answered.
func (a *Archive) Acquire(n int64) { a.inflight.Acquire(context.Background(), n) }

// WaitVisible returns once everything pushed to any subscriber before the
// call can be read (see commitMark).
func (a *Archive) WaitVisible(ctx context.Context) error { return a.mark.wait(ctx) }

// Log returns the archive's segment log, nil for an archive in memory.
func (a *Archive) Log() *seglog.Log { return a.seglog }

// CommitterThread returns the id of the thread the committer (or the
// indexer) runs on once it made it nicer (CommitterNice), else 0.
func (a *Archive) CommitterThread() int { return int(a.committerTID.Load()) }
