// Package backend is the seam between the relay and its archives (the
// SQLite archive, relay/internal/sqlitearchive, the default, and
// relay/jsarchive, on NATS JetStream): the request an archive stores, the
// interface it implements, what the relay gives it to open, and the pieces
// they build their answers, push frames and pages from. Every archive
// keeps the contract docs/RELAY.md states and is tested with the same
// suite.
package backend

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"
)

// EntryApp is the entry type of application messages, relay.EntryApp
// (defined here so that both archives share the one value); handshake
// entries have others.
const EntryApp = 0

// A Conn is the connection a publish came on.
type Conn interface {
	// ID identifies the connection: the fan-out of its own entry skips
	// it.
	ID() uint64
	// Answer sends the publish's answer (an ack, a refusal, or a reply
	// queued behind the publish) and ends it.
	Answer(frame []byte)
}

// A Hub delivers entries to the relay's subscribers.
type Hub interface {
	// Fanout pushes frame to the channel's subscribers but the
	// connection from (0 for none). buf is the lent buffer the frame was
	// built in (Request.Buf), or nil; Fanout takes it over.
	Fanout(channel string, frame []byte, buf *PushBuf, from uint64)
}

// Metrics are the figures an archive reports to the relay's metrics;
// optional.
type Metrics interface {
	// ObserveCommit records one group commit and how long it took.
	ObserveCommit(d time.Duration)
	// Swept counts one run of the TTL sweep.
	Swept()
}

// A Request is one publish (or reply, or fence reset) for an archive, in
// the order of its connection. The archive answers it exactly once:
// through Conn, or on Done for a fence reset.
type Request struct {
	Conn Conn // nil for the relay's own requests
	// Sub is the publisher's payer string (ParsePayer); the archive
	// charges the channel's payer, never stores the publisher.
	Sub     string
	Channel string
	ID      string // the publish's scoped id (deduplication), or ""
	Payload []byte
	// EntryType is the payload's (EntryApp for application messages);
	// Commit and Epoch are a commit's, whose epoch the fence checks.
	EntryType uint8
	Commit    bool
	Epoch     uint64
	// Reply, if set, makes the request an answer to send once the
	// connection's earlier publishes are answered, and no publish.
	Reply []byte
	// Weight is what the request holds of the archive's in-flight bytes
	// (Archiver.Acquire), given back when it is answered.
	Weight int64
	// Frame is the push frame of the publish up to its payload
	// (PushPrefix and the payload's base64), and Buf the lent buffer it
	// was built in or nil, for an archive that LendsFrames: it completes
	// the frame (PushSuffix) and hands both to Hub.Fanout.
	Frame []byte
	Buf   *PushBuf

	// Fence, with ResetTo and ResetID (the directory feed event's id, 0
	// for none), makes the request a fence reset, answered on Done.
	Fence   bool
	ResetTo uint64
	ResetID int64
	Done    chan error

	// Refused is the refusal the archive answers instead of an ack (a
	// fence or a budget passed); nothing is stored then.
	Refused []byte
}

// An Archiver is an archive behind a relay. Its methods are safe for concurrent use but
// Start, Stop and Close.
type Archiver interface {
	// Start starts the archive's goroutines.
	Start()
	// Submit queues a request; it blocks while the queue is full.
	Submit(r Request)
	// Acquire holds n payload bytes until the request is answered.
	Acquire(n int64)
	// ResetFence makes a channel expect epoch next; id is the
	// directory feed event's id, 0 for none. It returns once the fence
	// is durable.
	ResetFence(channel string, epoch uint64, id int64) error
	// NextEpoch returns the commit epoch a channel expects next, and
	// false when it has no fence yet.
	NextEpoch(ctx context.Context, channel string) (uint64, bool, error)
	// WaitVisible returns once everything pushed to any subscriber
	// before the call can be read.
	WaitVisible(ctx context.Context) error
	// WritePage writes one page of GET /v1/messages (appOnly) or GET
	// /v1/sync to w, calling begin before its first byte.
	WritePage(ctx context.Context, w io.Writer, begin func(), channel string, since uint64, limit, maxBytes int, appOnly bool) (started bool, err error)
	// Used returns the payload bytes an account's budget holds.
	Used(account string) int64
	// Held returns the bytes the budget of scope holds for key (the
	// account, group or org; "" for the server's).
	Held(scope, key string) int64
	// StoredBytes returns the payload bytes stored over all accounts.
	StoredBytes() int64
	// BudgetUse returns the use of the budgets, and their sizes.
	BudgetUse() (BudgetUse, Limits)
	// Ready returns nil while the archive takes publishes.
	Ready(ctx context.Context) error
	// Up reports, without a request, whether the backend is reachable.
	Up() bool
	// HandshakeLimit is the largest handshake payload the archive
	// stores.
	HandshakeLimit() int
	// LendsFrames reports whether the archive completes and fans out the
	// push frames of the requests (Request.Frame, Request.Buf) rather
	// than building its own.
	LendsFrames() bool
	// Stop closes the input and returns once every request accepted is
	// answered.
	Stop()
	// Close releases what the archive holds; after Stop, or instead of
	// Start when the relay fails to start.
	Close()
}

// Env is what the relay gives an archive to open with: where it delivers,
// and the settings of relay.Config the archive keeps.
type Env struct {
	Hub    Hub
	Logger *slog.Logger
	Now    func() time.Time
	// Granularity is the precision of the entries' times
	// (relay.Config.TimeGranularity; CoarseMillis).
	Granularity time.Duration
	// Cap is the most entries kept per channel and kind, TTL how long
	// they are kept (relay.Config.ArchiveCap, ArchiveTTL).
	Cap int
	TTL time.Duration
	// MaxFirstEpoch is the highest epoch a channel's first commit may
	// carry.
	MaxFirstEpoch uint64
	// MaxPayload and MaxHandshakePayload are the relay's limits on an
	// application and a handshake payload.
	MaxPayload, MaxHandshakePayload int
	// Budgets returns the budgets' sizes for an archive that holds
	// stored bytes already.
	Budgets func(stored int64) Limits
	// ReadyCheckEvery is how long an answer of the backend stands for
	// Ready; SweepInterval how often the archive sweeps what expired.
	ReadyCheckEvery, SweepInterval time.Duration
	// Metrics, if set, receives the archive's figures.
	Metrics Metrics
}

// A Backend opens an archive for a relay (relay.Config.Archive).
type Backend interface {
	Open(ctx context.Context, env Env) (Archiver, error)
}

// ErrUnreachable is matched (errors.Is) by an Open error when the
// archive's backend did not answer: the configuration may be right, and a
// later start may succeed.
var ErrUnreachable = errors.New("relay: the archive's backend is unreachable")

// ErrUnavailable wraps a read the archive could not serve within its
// budget (no stream leader, say): the relay answers 503 and the client
// may try again soon.
var ErrUnavailable = errors.New("relay: the archive is unavailable")

// DupWindow is how long a publish id is remembered for an archive whose
// entries live for ttl: a retry within it is stored once and answered
// with the first one's seq (on JetStream, the stream's duplicate window).
func DupWindow(ttl time.Duration) time.Duration { return min(ttl, 2*time.Minute) }

// CoarseMillis is t in Unix milliseconds, rounded down to a multiple of
// granularity (none when it is 0 or below a millisecond).
func CoarseMillis(t time.Time, granularity time.Duration) int64 {
	ms := t.UnixMilli()
	if g := granularity.Milliseconds(); g > 1 {
		ms -= ms % g
	}
	return ms
}
