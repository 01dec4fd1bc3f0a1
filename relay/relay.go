package relay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sync/semaphore"

	"github.com/skytale-oss/skytale/internal/channel"
	"github.com/skytale-oss/skytale/internal/httpx"
	"github.com/skytale-oss/skytale/internal/jwt"
	"github.com/skytale-oss/skytale/internal/redact"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// Defaults of the zero Config fields.
const (
	// DefaultArchiveCap is 10,000 rather than 1,000: cover traffic, which
	// the relay cannot tell from messages, would otherwise push a day's
	// real messages out of a busy room's log (see docs/BENCHMARKS-NOTES.md,
	// "Retention and cover traffic").
	DefaultArchiveCap     = 10000
	DefaultArchiveTTL     = 7 * 24 * time.Hour
	DefaultRevocationPoll = time.Second
	DefaultSendQueue      = 1024
	DefaultAuthTimeout    = 10 * time.Second

	DefaultPreAuthReadLimit      = 4 << 10
	DefaultMaxUnauthConns        = 1024
	DefaultMaxUnauthConnsPerAddr = 32
	DefaultMaxUnauthConnsPerNet  = 128
	DefaultMaxConns              = 4096
	DefaultMaxConnsPerAddr       = 256
	DefaultMaxConnsPerNet        = 1024
	DefaultPingInterval          = 30 * time.Second
	DefaultPingTimeout           = 15 * time.Second
	DefaultMaxConnsPerAccount    = 64
	DefaultMaxQueueBytes         = 16 << 20
	DefaultLargeFrameBudget      = 128 << 20
	DefaultLargeFrameWait        = 5 * time.Second
	DefaultLargeFrameTimeout     = 2 * time.Minute
)

// Paging limits of GET /v1/messages and GET /v1/sync.
const (
	DefaultLimit = 100
	MaxLimit     = 500
)

// ArchiveBackend is an archive kept outside package relay, opened by New:
// jsarchive.New's.
type ArchiveBackend = backend.Backend

// ErrArchiveUnreachable is matched (errors.Is) by the error of New when
// the Archive's backend (NATS) did not answer, or was not ready, when the
// relay started: the configuration may be right, and New may succeed
// later. tally serve waits, reporting not ready, and tries again.
var ErrArchiveUnreachable = backend.ErrUnreachable

// Config configures a relay. A zero field means its documented default. The
// Config must not be modified after it is passed to New.
type Config struct {
	// DBPath is the SQLite file of the archive; "" keeps it in memory.
	// With Archive set it holds only the relay's own state: the
	// revocations and channel members it learned from the directory.
	DBPath string
	// Archive, if set, keeps the archive there instead of in SQLite:
	// jsarchive.New (package relay/jsarchive) for a NATS JetStream
	// stream, which every relay given the same one shares as a node of
	// one cluster (docs/CLUSTER.md).
	Archive ArchiveBackend
	// Metrics, if set, receives what the relay counts: connections,
	// subscriptions, deliveries, publishes by result, budgets, feeds
	// (Stats). relaymetrics.New (package relay/relaymetrics) exports them
	// to Prometheus; none names a channel, an account or an address.
	Metrics Metrics
	// JWTSecret verifies the HS256 tokens the directory mints. Required.
	JWTSecret []byte
	// InternalSecret, if set, opens GET /v1/internal/fence to its holder:
	// a directory that runs apart from the relay reads the commit fence
	// there (the directory's internal secret). Empty answers 401.
	InternalSecret []byte
	// ArchiveCap is how many application entries each channel keeps
	// (default 10,000); it keeps as many handshake entries (commits,
	// proposals, Welcomes) besides, so application and cover traffic never
	// evict the commits a member needs to catch up.
	ArchiveCap int
	// ArchiveTTL is how long entries are kept (default 7 days).
	ArchiveTTL time.Duration
	// TimeGranularity is how coarse the time kept with each entry (its
	// ts, in the archive and in push frames) is: Unix milliseconds
	// rounded down to a multiple of it. 0 means DefaultTimeGranularity
	// (one second); time.Millisecond keeps the exact time. Entries keep
	// their order by seq, so nothing needs a finer ts; the archive keeps
	// no more of when a person wrote than a second. At most
	// MaxTimeGranularity (a second): seats order device revocations
	// against entry times to the second.
	TimeGranularity time.Duration
	// Revocations, if set, is polled for revoked subjects.
	Revocations RevocationSource
	// RevocationPoll is the polling interval (default 1 s).
	RevocationPoll time.Duration
	// ReadyFeedLag is how long ago the directory's feeds (Revocations,
	// Members) may have last been read to their end for GET /ready to
	// say the relay is ready (default 15 s).
	ReadyFeedLag time.Duration
	// SendQueue bounds the frames queued for one connection (default 1024).
	// A connection whose queue is full is disconnected as a slow consumer.
	SendQueue int
	// AuthTimeout is how long a new WebSocket has to authenticate
	// (default 10 s).
	AuthTimeout time.Duration
	// Logger receives one line per connection event and request; nil
	// discards. Tokens, payloads and secrets are never logged, and
	// neither are client addresses, account ids and channel names unless
	// LogClients: a request's path is logged as its route pattern.
	Logger *slog.Logger
	// LogClients puts client addresses, account ids and channel names
	// (and raw request paths) in the log lines, for debugging. Off by
	// default: a log that names people is a record of who talked when.
	LogClients bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// CheckpointInterval is how often the SQLite file's WAL is
	// checkpointed and truncated (default
	// sqlitedb.DefaultCheckpointInterval, one minute). Every connection
	// runs with secure_delete, so an entry evicted or expired leaves no
	// bytes in the database, and after the next checkpoint none in its
	// WAL.
	CheckpointInterval time.Duration
	// NoSync turns off fsync of the archive. For tests only: an
	// acknowledged publish may then be lost in a crash.
	NoSync bool
	// logSegment is the largest segment of the archive's log (default
	// seglog.DefaultMaxSegment); tests make it small.
	logSegment int64

	// Members is where the relay learns which accounts belong to which
	// channel (and the owners' fence resets): the directory in-process,
	// or NewHTTPMembers for a directory elsewhere. Only members may
	// publish; reads are member-only too unless OpenReads. Required
	// unless OpenChannels.
	Members MembershipSource
	// MembersPoll is how often Members is polled (default 1 s). A request
	// from an account the relay does not know as a member polls at once.
	MembersPoll time.Duration
	// OpenChannels lets every authenticated account publish to and read
	// every channel. Only for an embedding application that gates
	// channels itself.
	OpenChannels bool
	// OpenReads keeps subscribe, GET /v1/messages and GET /v1/sync open
	// to every authenticated account (the MLS group is then the only
	// gate); publishes stay member-only.
	OpenReads bool

	// MaxFirstEpoch is the highest epoch the first commit on a channel may
	// carry (default 1<<32), so nobody can set a fence the group could
	// never reach.
	MaxFirstEpoch uint64
	// AccountQuota bounds the payload bytes one account may have stored
	// in the archive across the channels it pays for (default 256 MiB): a
	// channel's entries are charged to the channel's payer, its first
	// publisher (budget.go), never recorded per sender. A publish past it
	// is refused with quota_exceeded.
	AccountQuota int64
	// OrgBudget, GroupBudget and ServerBudget bound the payload bytes
	// the archive keeps for one org's accounts, for one signup group's
	// (the accounts the directory made from one IPv4 /24 or IPv6 /64, the
	// token's grp claim) and for everyone (budget.go). A publish past one
	// is refused with quota_exceeded and the budget's "scope" ("account",
	// "group", "org" or "server"). The defaults fit the disk: ServerBudget
	// is half of what the archive could hold when the relay starts (the
	// free space of DBPath's file system plus what the archive already
	// stores), at most DefaultServerBudgetCap, or DefaultMemoryBudget for
	// an archive in memory (and for JetStream without DBPath: set it to
	// what the NATS store can give); OrgBudget is half of ServerBudget, so
	// no one org takes the relay; GroupBudget is DefaultGroupBudget, at
	// most a quarter of ServerBudget, so minting accounts from one network
	// buys no disk past it. New logs the figures.
	OrgBudget    int64
	GroupBudget  int64
	ServerBudget int64
	// MaxPageBytes bounds the body of one GET /v1/messages or /v1/sync
	// page (default 4 MiB); a page cut by it has has_more set. A page
	// always carries at least one entry.
	MaxPageBytes int

	// PreAuthReadLimit is the largest frame a socket may send before it
	// has authenticated (default 4 KiB).
	PreAuthReadLimit int64

	// Connection admission (admission.go). Client addresses are the TCP
	// peer's, or behind TrustedProxies the forwarded client's; a network
	// is an IPv4 /24 or an IPv6 /64. A socket over an address's or a
	// network's share is refused before the upgrade (429 rate_limited).
	//
	// MaxConns bounds the relay's WebSockets (default 4096: tally serve's
	// listener cap, within the open-file limits services are given, and
	// about 140 MiB of buffers and goroutines at the 33.5 KB a socket
	// docs/BENCHMARKS.md measured). Of them,
	// MaxUnauthConns are the login reserve (default 1024, at most a
	// quarter of MaxConns when that is set lower): only sockets that have
	// not yet authenticated hold them, so the authenticated ones never
	// take more than MaxConns-MaxUnauthConns. A login past that closes
	// the authenticated socket idle longest (1013, evicted); a new socket
	// with the reserve full closes the one silent longest in its login
	// (1013, busy). Honest clients log in within a round trip, and
	// reconnect with backoff when closed.
	MaxConns       int
	MaxUnauthConns int
	// MaxUnauthConnsPerAddr (default 32) and MaxUnauthConnsPerNet
	// (default 128) bound one client address's and one network's sockets
	// in their login: a device opens one or two at a time, a NAT of an
	// office a few dozen, and the network's share keeps one IPv6 host
	// with its /64 from taking the reserve alone (eight such shares fill
	// it, and then the oldest go first).
	MaxUnauthConnsPerAddr int
	MaxUnauthConnsPerNet  int
	// MaxConnsPerAddr (default 256) and MaxConnsPerNet (default 1024)
	// bound one client address's and one network's sockets, authenticated
	// or not: room for an office of a hundred users with a couple of
	// devices each behind one NAT address, while no one host or /24 or
	// /64 holds more than a quarter of MaxConns.
	MaxConnsPerAddr int
	MaxConnsPerNet  int
	// PingInterval is how often an authenticated socket is pinged
	// (default 30 s, below the idle timeouts of common proxies and NATs),
	// and PingTimeout how long its pong may take (default 15 s); a socket
	// that does not answer in time is closed.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// TrustedProxies are the addresses of reverse proxies in front of the
	// relay. A WebSocket upgrade from one of them is counted by the
	// client it forwards for: the rightmost X-Forwarded-For entry that is
	// not itself a trusted proxy (a PROXY protocol v2 header is read by
	// the listener instead, see tally serve --proxy-protocol). Without
	// it, every client behind a proxy is the proxy's one address and
	// shares one address's share: a few sockets from anyone lock everyone
	// out. Only proxies may be able to reach the relay from these
	// addresses.
	TrustedProxies []netip.Prefix

	// MaxConnsPerAccount bounds the authenticated sockets of one account
	// (default 64).
	MaxConnsPerAccount int
	// MaxQueueBytes bounds the bytes queued for one socket (default
	// 16 MiB); past it the socket is dropped as a slow consumer. Push
	// frames of handshakes over 1 MiB are counted against MaxQueueBytes
	// plus the largest such frame, so a queue always has room for one
	// largest handshake besides its other traffic.
	MaxQueueBytes int

	// LargeFrameBudget bounds the bytes of frames over the 1 MiB limit
	// (handshakes up to MaxHandshakePayload) being read and decoded at
	// once, over all sockets (default 128 MiB). Each such frame holds,
	// from the moment its first 1 MiB shows it to be a handshake until it
	// is handed to the archive, the most it may need: its read buffer and
	// its decoded payload (about 39 MiB for MaxHandshakePayload), so the
	// default admits three at once. It must be at least that much.
	LargeFrameBudget int64
	// LargeFrameWait is how long a socket waits for LargeFrameBudget
	// (default 5 s). Past it, the frame is read on and discarded without
	// being kept, and the publisher gets a busy error; the socket stays
	// open and no other socket waits for it.
	LargeFrameWait time.Duration
	// LargeFrameTimeout is how long a socket may take to send the rest of
	// a frame that holds LargeFrameBudget (default 2 minutes: a 16 MiB
	// handshake at about 190 KB/s). Past it the socket is closed, so a
	// client that trickles a large frame cannot keep the budget from
	// everyone else's handshakes.
	LargeFrameTimeout time.Duration
}

// Server is a relay: an http.Handler serving the WebSocket at /ws and
// /ws/{org}/{ns}/{svc}, GET /v1/messages, GET /v1/sync, GET /health and
// GET /ready.
type Server struct {
	cfg   Config
	log   *slog.Logger
	db    *sql.DB
	arch  backend.Archiver
	hub   *hub
	mux   *http.ServeMux
	start time.Time

	bgCtx    context.Context // ends when Close starts
	bgCancel context.CancelFunc
	bg       sync.WaitGroup // the feed pollers

	rev     *feedPoller[string]
	revMu   sync.RWMutex // guards revoked
	revoked map[string]struct{}

	mem     *feedPoller[ChannelEvent] // nil without Config.Members
	memMu   sync.RWMutex              // guards members
	members map[string]map[string]struct{}
	memGen  atomic.Uint64 // counts membership removals

	missMu   sync.Mutex // guards missNext
	missNext time.Time  // the start of the latest poll window of membership misses
	missGap  time.Duration

	adm *admission // admission.go

	gate httpx.Gate // requests and connections in progress

	// Frames over readLimit: handshakes up to maxHandshake decoded
	// (MaxHandshakePayload, or less on a NATS server that admits less),
	// read within the large budget, largeWeight bytes each.
	maxHandshake   int
	largeReadLimit int64
	largeWeight    int64
	large          *semaphore.Weighted

	// lendFrames: publishes build their push frames in lent buffers
	// (frame.go), which the SQLite archive's fan-out gives back. The
	// JetStream archive delivers from the stream instead.
	lendFrames bool

	counters *relayCounters // metrics.go
}

// New opens the archive and starts the relay's background goroutines. ctx
// bounds the opening (the database's migrations, on JetStream the dial to
// NATS and the stream's setup), not the relay's life: Close ends that.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := configDefaults(&cfg); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = slog.New(redact.Handler(log.Handler(), cfg.LogClients))
	cfg.JWTSecret = append([]byte(nil), cfg.JWTSecret...)
	cfg.InternalSecret = append([]byte(nil), cfg.InternalSecret...)
	counters := newRelayCounters(cfg.Metrics)

	db, err := sqlitedb.Open(cfg.DBPath)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      log,
		db:       db,
		hub:      newHub(),
		counters: counters,
		start:    cfg.Now(),
		revoked:  make(map[string]struct{}),
		members:  make(map[string]map[string]struct{}),
		// Membership misses start at most ten polls a second (and per
		// poll interval).
		missGap: min(cfg.MembersPoll/10, 100*time.Millisecond),
	}
	s.adm = newAdmission(&s.cfg)
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.rev = s.newRevocationPoller()
	if cfg.Members != nil {
		s.mem = s.newMembersPoller()
	}
	s.cfg.Logger = log
	s.arch, err = openArchiver(ctx, db, s.hub, counters, &s.cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.log.Info("relay: archive budgets", "account", s.cfg.AccountQuota, "group", s.cfg.GroupBudget,
		"org", s.cfg.OrgBudget, "server", s.cfg.ServerBudget)
	s.lendFrames = s.arch.LendsFrames()
	s.maxHandshake = s.arch.HandshakeLimit()
	s.largeReadLimit = frameLimit(s.maxHandshake)
	s.largeWeight = largeFrameWeight(s.maxHandshake)
	s.large = semaphore.NewWeighted(cfg.LargeFrameBudget)
	if err := s.loadRevoked(ctx); err != nil {
		s.arch.Close()
		db.Close()
		return nil, err
	}
	if s.mem != nil {
		if err := s.loadMembers(ctx); err != nil {
			s.arch.Close()
			db.Close()
			return nil, err
		}
	}

	s.routes()

	// Before anything starts, so a refusal has only the archive and the
	// database to close.
	if cfg.Metrics != nil {
		if err := cfg.Metrics.Watch(s); err != nil {
			s.arch.Close()
			db.Close()
			return nil, fmt.Errorf("relay: metrics: %w", err)
		}
	}
	// The pipeline stops when its input is closed, never by cancellation,
	// so Close flushes everything that was accepted.
	s.arch.Start()
	if cfg.Revocations != nil {
		s.bg.Go(func() { s.rev.run(s.bgCtx, cfg.RevocationPoll) })
	}
	if cfg.DBPath != "" {
		every := cfg.CheckpointInterval
		if every <= 0 {
			every = sqlitedb.DefaultCheckpointInterval
		}
		s.bg.Go(func() {
			sqlitedb.RunCheckpoints(s.bgCtx, db, every, func(err error) { s.log.Error("relay: checkpoint failed", "err", err) })
		})
	}
	if s.mem != nil {
		s.bg.Go(func() { s.mem.run(s.bgCtx, cfg.MembersPoll) })
	}
	return s, nil
}

// configDefaults checks cfg and fills its zero fields, but the
// archive's (archiveDefaults).
func configDefaults(cfg *Config) error {
	if len(cfg.JWTSecret) == 0 {
		return errors.New("relay: JWTSecret is required")
	}
	if cfg.ArchiveCap < 0 || cfg.ArchiveTTL < 0 || cfg.RevocationPoll < 0 || cfg.SendQueue < 0 || cfg.AuthTimeout < 0 ||
		cfg.MembersPoll < 0 || cfg.ReadyFeedLag < 0 || cfg.PreAuthReadLimit < 0 || cfg.MaxUnauthConns < 0 || cfg.MaxUnauthConnsPerAddr < 0 ||
		cfg.MaxUnauthConnsPerNet < 0 || cfg.MaxConns < 0 || cfg.MaxConnsPerAddr < 0 || cfg.MaxConnsPerNet < 0 ||
		cfg.PingInterval < 0 || cfg.PingTimeout < 0 ||
		cfg.MaxConnsPerAccount < 0 || cfg.MaxQueueBytes < 0 || cfg.LargeFrameBudget < 0 || cfg.LargeFrameWait < 0 || cfg.LargeFrameTimeout < 0 {
		return errors.New("relay: negative limit in Config")
	}
	if cfg.Members == nil && !cfg.OpenChannels {
		return errors.New("relay: Config.Members is required (the directory, NewHTTPMembers or a MemberSet), unless OpenChannels")
	}
	setDefault(&cfg.MembersPoll, DefaultMembersPoll)
	setDefault(&cfg.PreAuthReadLimit, DefaultPreAuthReadLimit)
	setDefault(&cfg.MaxConns, DefaultMaxConns)
	setDefault(&cfg.MaxUnauthConns, min(DefaultMaxUnauthConns, max(1, cfg.MaxConns/4)))
	setDefault(&cfg.MaxUnauthConnsPerAddr, DefaultMaxUnauthConnsPerAddr)
	setDefault(&cfg.MaxUnauthConnsPerNet, DefaultMaxUnauthConnsPerNet)
	setDefault(&cfg.MaxConnsPerAddr, DefaultMaxConnsPerAddr)
	setDefault(&cfg.MaxConnsPerNet, DefaultMaxConnsPerNet)
	setDefault(&cfg.PingInterval, DefaultPingInterval)
	setDefault(&cfg.PingTimeout, DefaultPingTimeout)
	if cfg.MaxUnauthConns >= cfg.MaxConns {
		return fmt.Errorf("relay: MaxUnauthConns (%d), the login reserve, must be below MaxConns (%d)", cfg.MaxUnauthConns, cfg.MaxConns)
	}
	cfg.TrustedProxies = slices.Clone(cfg.TrustedProxies)
	setDefault(&cfg.MaxConnsPerAccount, DefaultMaxConnsPerAccount)
	setDefault(&cfg.MaxQueueBytes, DefaultMaxQueueBytes)
	setDefault(&cfg.ArchiveCap, DefaultArchiveCap)
	setDefault(&cfg.ArchiveTTL, DefaultArchiveTTL)
	setDefault(&cfg.RevocationPoll, DefaultRevocationPoll)
	setDefault(&cfg.ReadyFeedLag, DefaultReadyFeedLag)
	setDefault(&cfg.SendQueue, DefaultSendQueue)
	setDefault(&cfg.AuthTimeout, DefaultAuthTimeout)
	setDefault(&cfg.LargeFrameBudget, DefaultLargeFrameBudget)
	setDefault(&cfg.LargeFrameWait, DefaultLargeFrameWait)
	setDefault(&cfg.LargeFrameTimeout, DefaultLargeFrameTimeout)
	if w := largeFrameWeight(MaxHandshakePayload); cfg.LargeFrameBudget < w {
		return fmt.Errorf("relay: LargeFrameBudget must be at least %d bytes (one %d-byte handshake read and decoded)", w, MaxHandshakePayload)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return nil
}

// routes makes the relay's mux.
func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /ready", s.handleReady)
	s.mux.HandleFunc("GET /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.handleRead(w, r, true) })
	s.mux.HandleFunc("GET /v1/sync", func(w http.ResponseWriter, r *http.Request) { s.handleRead(w, r, false) })
	s.mux.HandleFunc("GET /ws", s.handleWS)
	s.mux.HandleFunc("GET /ws/{org}/{ns}/{svc}", s.handleWS)
	s.mux.HandleFunc("GET /v1/internal/fence", s.handleInternalFence)
	for _, p := range []string{"/health", "/ready", "/v1/messages", "/v1/sync", "/ws", "/ws/{org}/{ns}/{svc}", "/v1/internal/fence"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			s.logRequest(r, http.StatusMethodNotAllowed)
			w.Header().Set("Allow", "GET")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "only GET is allowed here")
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.logRequest(r, http.StatusNotFound)
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint")
	})
}

// setDefault sets *v to def when *v is the zero value.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.gate.Enter() {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the relay is shutting down")
		return
	}
	defer s.gate.Leave()
	s.mux.ServeHTTP(w, r)
}

// Close stops accepting requests, closes every connection (with a close
// handshake while ctx allows, then abruptly), lets the archive writer commit
// what it holds, and waits for every goroutine the relay started.
func (s *Server) Close(ctx context.Context) error {
	if !s.gate.Close() {
		return nil
	}

	for _, c := range s.hub.all() {
		c.closeWith(websocket.StatusGoingAway, "relay shutting down", nil, false)
	}
	// Polls stop, and readers waiting for one go on (and refuse).
	s.bgCancel()
	done := s.gate.Drained()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		for _, c := range s.hub.all() {
			c.ws.CloseNow()
		}
		<-done
	}
	// No request is left to poll, and once the pollers are gone nothing
	// can reset a fence, so the writer can drain and stop.
	s.bg.Wait()
	s.arch.Stop()
	s.arch.Close()
	if cerr := s.db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	s.log.Info("relay: closed")
	return err
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	s.logRequest(r, http.StatusOK)
	httpx.WriteJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
		Uptime int64  `json:"uptime"`
	}{"ok", int64(s.cfg.Now().Sub(s.start).Seconds())})
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	httpx.WriteError(w, status, code, message)
}

// logPath is what a log line says of r's path: its route pattern, or with
// LogClients the path itself (any segment that looks like a credential
// replaced).
func (s *Server) logPath(r *http.Request) string {
	return redact.Path(s.cfg.LogClients, httpx.LogPath(r.URL.Path), r.Pattern)
}

func (s *Server) logRequest(r *http.Request, status int) {
	if !s.cfg.LogClients {
		s.log.Info("relay: request", "method", r.Method, "path", s.logPath(r), "status", status)
		return
	}
	s.log.Info("relay: request", "method", r.Method, "path", s.logPath(r), "status", status, "remote", r.RemoteAddr,
		"channel", r.URL.Query().Get("channel"))
}

// authorize checks the bearer token of an HTTP request, answering 401 or
// 403 itself when it fails.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (jwt.Claims, bool) {
	tok, ok := httpx.Bearer(r)
	if !ok {
		s.logRequest(r, http.StatusUnauthorized)
		writeError(w, http.StatusUnauthorized, "unauthorized", "missing bearer token")
		return jwt.Claims{}, false
	}
	claims, err := jwt.Verify(s.cfg.JWTSecret, tok, s.cfg.Now(), jwt.AudienceAPI, jwt.AudienceRelay)
	if err != nil {
		s.logRequest(r, http.StatusUnauthorized)
		writeError(w, http.StatusUnauthorized, "unauthorized", "invalid or expired token")
		return jwt.Claims{}, false
	}
	if s.isRevokedClaims(claims.Subject, claims.Device) {
		s.logRequest(r, http.StatusForbidden)
		writeError(w, http.StatusForbidden, "forbidden", "subject is revoked")
		return jwt.Claims{}, false
	}
	return claims, true
}

// handleRead serves GET /v1/messages (appOnly) and GET /v1/sync.
func (s *Server) handleRead(w http.ResponseWriter, r *http.Request, appOnly bool) {
	claims, ok := s.authorize(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	bad := func(code, msg string) {
		s.logRequest(r, http.StatusBadRequest)
		writeError(w, http.StatusBadRequest, code, msg)
	}
	name := q.Get("channel")
	if err := channel.Valid(name); err != nil {
		bad("invalid_channel", "channel must be org/namespace/service")
		return
	}
	if claims.Channel != "" && claims.Channel != name {
		s.logRequest(r, http.StatusForbidden)
		writeError(w, http.StatusForbidden, "forbidden", "token is scoped to another channel")
		return
	}
	if s.readsGated() && !s.checkMember(r.Context(), name, claims.Subject) {
		s.logRequest(r, http.StatusForbidden)
		writeError(w, http.StatusForbidden, "not_a_member", "this account is not a member of the channel")
		return
	}
	var since uint64
	if v := q.Get("since_seq"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			bad("invalid_since_seq", "since_seq must be a non-negative integer")
			return
		}
		since = n
	}
	limit := DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			bad("invalid_limit", "limit must be a positive integer")
			return
		}
		limit = int(min(n, MaxLimit))
	}
	// Whatever was pushed before this read began is in it (see
	// commitMark).
	if err := s.arch.WaitVisible(r.Context()); err != nil {
		s.logRequest(r, http.StatusServiceUnavailable)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the request ended before the archive caught up")
		return
	}
	// The page is streamed (chunked when it is large), never built whole.
	begin := func() {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
	}
	started, err := s.arch.WritePage(r.Context(), w, begin, name, since, limit, s.cfg.MaxPageBytes, appOnly)
	if err != nil {
		s.counters.readErrors.Add(1)
	}
	if errors.Is(err, backend.ErrUnavailable) && !started {
		// JetStream had no stream leader within the read's budget: the
		// client may try again soon (on this node or another).
		s.log.Warn("relay: archive unavailable for a read", "err", err)
		s.logRequest(r, http.StatusServiceUnavailable)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the archive is unavailable; try again")
		return
	}
	if err != nil && !started {
		s.log.Error("relay: archive read failed", "err", err)
		s.logRequest(r, http.StatusInternalServerError)
		writeError(w, http.StatusInternalServerError, "internal", "archive read failed")
		return
	}
	if err != nil {
		// The status and part of the body are out, so a 500 can no
		// longer be sent: abort the response, and the client sees a
		// broken body (no final chunk), never a page that looks whole.
		s.log.Error("relay: archive read failed mid-page", "err", err)
		panic(http.ErrAbortHandler)
	}
	s.logRequest(r, http.StatusOK)
}
