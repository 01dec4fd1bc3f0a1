package directory

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/skytale-oss/skytale/internal/feed"
	"github.com/skytale-oss/skytale/internal/httpx"
	"github.com/skytale-oss/skytale/internal/redact"
	"github.com/skytale-oss/skytale/internal/sqlitedb"
)

// Defaults for the zero values of [Config].
const (
	DefaultSweepInterval  = 24 * time.Hour
	DefaultRetention      = 24 * time.Hour
	DefaultInboxRetention = 30 * 24 * time.Hour
)

// Limits fixed by the wire contract. Sizes are decoded bytes, inclusive.
const (
	MaxKeyPackage = 64 << 10  // 65,536
	MaxWelcome    = 256 << 10 // 262,144
	MaxPending    = 1000      // pending join requests per channel
	MaxIdentity   = 256       // characters
	GrantLifetime = 10 * time.Minute
)

// Request body caps. A body over its cap is refused before it is parsed.
const (
	smallBody   = 16 << 10
	approveBody = 32 << 10  // a MaxSealedSeat box is 21,932 base64 characters, with a certificate beside it
	joinBody    = 128 << 10 // a 64 KiB key package is 87,384 base64 characters
	welcomeBody = 512 << 10 // a 256 KiB Welcome is 349,528 base64 characters
)

// Config configures a [Server]. A zero field means the documented default.
// The Config must not be modified after it is passed to [New].
type Config struct {
	// DBPath is the SQLite database file; "" means a private in-memory
	// database that is gone when the Server closes.
	DBPath string

	// Database, if set, names the database instead of DBPath: with
	// Backend set, the URL Backend opens (a postgres:// or postgresql://
	// URL for pgstore.Backend); otherwise a SQLite file path, as DBPath.
	// Setting both is an error, and so is a PostgreSQL URL without a
	// Backend.
	Database string

	// Backend, if set, is the database that keeps the directory's state
	// instead of SQLite, at the URL in Database: pgstore.Backend{}
	// (package directory/pgstore) keeps it in PostgreSQL, which several
	// directory processes may share (see docs/POSTGRES.md). Package directory itself links no database driver
	// but SQLite's.
	Backend Backend

	// JWTSecret is the HS256 key shared with the relay. Required.
	JWTSecret []byte

	// InternalSecret authenticates operator calls: account creation in
	// any signup mode, signup tokens, the list and removal of idle
	// accounts, revoking any sub, and the internal feeds. Empty disables
	// all of them.
	InternalSecret []byte

	// Signup says who may create an account with POST /v1/accounts
	// (signup.go): SignupOpen anyone, within the signup limits;
	// SignupInvite only with an org invite or an operator's signup token;
	// SignupClosed only the operator. "" follows OpenSignup.
	Signup SignupMode

	// OpenSignup lets anyone create an account with POST /v1/accounts.
	//
	// Deprecated: set Signup. When Signup is "", true means SignupOpen
	// and false SignupClosed, as before.
	OpenSignup bool

	// Logger receives one line per request (method, route pattern,
	// status, duration); never a credential or a body, and no client
	// address, account id, channel name or request path unless
	// LogClients. nil discards.
	Logger *slog.Logger
	// LogClients puts client addresses, account ids, channel names and
	// raw request paths in the log lines, for debugging. Off by default:
	// a log that names people is a record of who talked when.
	LogClients bool

	// Now returns the current time; nil means time.Now.
	Now func() time.Time

	// Rand is the source for keys, tokens, user codes and ids; nil means
	// crypto/rand. (HPKE sealing always draws from crypto/rand.)
	Rand io.Reader

	// SweepInterval is how often completed and expired join requests are
	// garbage-collected; 0 means DefaultSweepInterval.
	SweepInterval time.Duration

	// CheckpointInterval is how often a SQLite database's WAL is
	// checkpointed and truncated; 0 means
	// sqlitedb.DefaultCheckpointInterval (one minute). Every connection
	// runs with secure_delete, so a deleted row (a consumed Welcome, an
	// acknowledged join request) leaves no bytes in directory.db, and
	// after the next checkpoint none in directory.db-wal either. On
	// PostgreSQL deleted rows stay in the table's files until VACUUM
	// (autovacuum) reuses their space: see docs/POSTGRES.md.
	CheckpointInterval time.Duration

	// Retention is how long completed and expired join requests, invites
	// and device grants are kept before the sweep deletes them; 0 means
	// DefaultRetention.
	Retention time.Duration

	// InboxRetention is how long a Welcome waits in an account's inbox,
	// and how long a claim on its key-package stock is kept (acknowledged
	// or not, and deliverable by its claimer), before the sweep deletes
	// them; 0 means DefaultInboxRetention (30 days).
	InboxRetention time.Duration

	// Limits are the rate limits and abuse caps; the zero value means
	// DefaultLimits, and Limits.Off turns them off.
	Limits Limits

	// TrustedProxies are the addresses of reverse proxies in front of the
	// directory. A request from one of them is counted, by the rate
	// limits and the per-address caps, as the client it forwards for: the
	// rightmost X-Forwarded-For entry that is not itself a trusted proxy
	// (a client cannot pick its address by writing the header itself).
	// Without it every client behind a proxy is the proxy's one address:
	// a few hundred bogus sign-ins from anyone make every sign-in 429.
	// Only the proxies may be able to reach the directory from these
	// addresses. The HTTP connections themselves are bounded by the
	// listener (see the package documentation).
	TrustedProxies []netip.Prefix
	// Fence is where the directory reads the relay's commit fence: a
	// GroupInfo is kept only for the epoch the fence has reached
	// (PUT /v1/channels/groupinfo). The relay in the same process
	// (skytale.NewStack wires it), or NewHTTPFence for a relay elsewhere.
	// nil refuses every GroupInfo (503 fence_unavailable): without the
	// fence a far epoch cannot be told from a real one.
	Fence FenceSource

	// ClaimsPerClaimer and ClaimsPerDevice are the hourly claim limits
	// (stock.go): how many one-time offers of one device one claimer, and
	// all claimers together, take an hour; past them a claim gets the
	// last-resort offer. Zero means the default (ClaimsPerClaimer 10,
	// ClaimsPerDevice 30); negative is an error.
	ClaimsPerClaimer, ClaimsPerDevice int

	// InboxPerSender and InboxSenderBytes bound one sender's share of one
	// inbox (429 quota_exceeded past it), InboxEntries and InboxBytes the
	// whole inbox (409 inbox_full). Zero means the default
	// (MaxInboxPerSender 10, MaxInboxSenderBytes 2 MiB, MaxInbox 200,
	// MaxInboxBytes 16 MiB); negative is an error.
	InboxPerSender, InboxEntries int
	InboxSenderBytes, InboxBytes int64

	// AccountBudget, GroupBudget, OrgBudget and ServerBudget bound the
	// bytes the directory keeps (key packages, Welcomes, join requests,
	// GroupInfos, trees; budget.go) for one account, for the accounts
	// signed up from one IPv4 /24 or IPv6 /64 together, for the accounts
	// of one org together, and in all. A put past any is 413
	// quota_exceeded naming the budget's scope. Zero means the default:
	// ServerBudget a quarter of the free space of DBPath's folder plus
	// what is stored at start, at most DefaultServerBudgetCap
	// (DefaultMemoryBudget in memory, DefaultPostgresBudget on
	// PostgreSQL); OrgBudget half of ServerBudget; GroupBudget
	// DefaultGroupBudget, at most a quarter of ServerBudget;
	// AccountBudget DefaultAccountBudget, at most GroupBudget. Negative
	// is an error.
	AccountBudget, GroupBudget, OrgBudget, ServerBudget int64

	// Metrics, if set, receives what the directory counts: requests by
	// route pattern and status, their durations, rate-limit and quota
	// refusals, revocations, sweeps, and (read when collected) whether
	// the database answers and what the storage budgets hold. No label
	// carries a channel name, an account id or an address.
	// dirmetrics.New (package directory/dirmetrics) exports them to
	// Prometheus as skytale_directory_*.
	Metrics Metrics
}

// Server is the directory HTTP API. It is an [http.Handler].
type Server struct {
	cfg     Config
	store   *store
	mux     *http.ServeMux
	log     *slog.Logger
	started time.Time

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	metrics metrics    // Config.Metrics; records nothing without it
	gate    httpx.Gate // requests in flight
	limits  *limiters
	// groupKey keys the signup groups' ids (signup.go).
	groupKey []byte
	reads    *readGate // blob and list reads in flight (reads.go)
	dbCheck  dbCheck   // ready.go
}

// New opens (and migrates) the database and starts the background sweep.
// ctx bounds the start: opening the database (connecting to it, for a
// Backend), migrating it and reading its ledger; the Server outlives it,
// and runs until Close.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if len(cfg.JWTSecret) == 0 {
		return nil, errors.New("directory: JWTSecret is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = slog.New(redact.Handler(cfg.Logger.Handler(), cfg.LogClients))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.InboxRetention <= 0 {
		cfg.InboxRetention = DefaultInboxRetention
	}
	switch {
	case cfg.Database != "" && cfg.DBPath != "":
		return nil, errors.New("directory: set DBPath or Database, not both")
	case cfg.Backend != nil && cfg.Database == "":
		return nil, errors.New("directory: Backend needs the URL of its database in Database")
	case cfg.Backend == nil && isPostgresURL(cfg.Database):
		return nil, errors.New("directory: Database is a PostgreSQL URL: set Backend to pgstore.Backend{} (package github.com/skytale-oss/skytale/directory/pgstore)")
	}
	cfg.Limits = resolveLimits(cfg.Limits)
	switch cfg.Signup {
	case "":
		cfg.Signup = SignupClosed
		if cfg.OpenSignup {
			cfg.Signup = SignupOpen
		}
	case SignupOpen, SignupInvite, SignupClosed:
	default:
		return nil, fmt.Errorf("directory: Signup %q is not open, invite or closed", cfg.Signup)
	}
	cfg.OpenSignup = cfg.Signup == SignupOpen
	dsn := cfg.DBPath
	if cfg.Database != "" {
		dsn = cfg.Database
	}
	if cfg.AccountBudget < 0 || cfg.GroupBudget < 0 || cfg.OrgBudget < 0 || cfg.ServerBudget < 0 {
		return nil, errors.New("directory: a storage budget (AccountBudget, GroupBudget, OrgBudget, ServerBudget) is negative")
	}
	consent, err := resolveConsent(&cfg)
	if err != nil {
		return nil, err
	}
	st, err := openStore(ctx, dsn, cfg.Backend)
	if err != nil {
		return nil, err
	}
	stored, err := st.storedBytes(ctx)
	if err != nil {
		st.close()
		return nil, fmt.Errorf("directory: read the storage ledger: %w", err)
	}
	st.budgets = resolveBudgets(&cfg, dsn, cfg.Backend != nil, stored)
	st.consent = consent
	// The background work runs until Close, whatever becomes of ctx.
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{
		cfg:      cfg,
		store:    st,
		log:      cfg.Logger,
		started:  cfg.Now(),
		cancel:   cancel,
		limits:   newLimiters(cfg.Limits, slices.Clone(cfg.TrustedProxies)),
		reads:    newReadGate(cfg.Limits.ReadsPerAccount, cfg.Limits.ReadBytes),
		metrics:  metrics{cfg.Metrics},
		groupKey: groupKey(cfg.JWTSecret),
	}
	s.routes()
	if cfg.Metrics != nil {
		if err := cfg.Metrics.Watch(s); err != nil {
			cancel()
			st.close()
			return nil, fmt.Errorf("directory: metrics: %w", err)
		}
	}
	s.wg.Add(1)
	go s.sweepLoop(run)
	if _, ok := st.b.(*sqliteBackend); ok && dsn != "" {
		every := cfg.CheckpointInterval
		if every <= 0 {
			every = sqlitedb.DefaultCheckpointInterval
		}
		s.wg.Go(func() {
			sqlitedb.RunCheckpoints(run, st.db, every, func(err error) { s.log.Error("directory: checkpoint failed", "err", err) })
		})
	}
	return s, nil
}

// Close stops accepting requests (later ones get 503), waits for the
// requests in flight and the background sweep, and closes the database.
// If ctx ends first, Close returns its error without closing the database.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.gate.Close()
		s.cancel()
		done := make(chan struct{})
		go func() { <-s.gate.Drained(); s.wg.Wait(); close(done) }()
		select {
		case <-done:
			s.closeErr = s.store.close()
		case <-ctx.Done():
			s.closeErr = ctx.Err()
		}
	})
	return s.closeErr
}

// RevokedSince returns the subs revoked after the cursor and the cursor to
// pass next time (unchanged when nothing new was revoked). A relay embedded
// in the same process can poll it directly.
func (s *Server) RevokedSince(ctx context.Context, after int64) (subs []string, next int64, err error) {
	return s.store.revokedSince(ctx, after, feed.PageSize)
}

func (s *Server) sweepLoop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := s.store.sweep(ctx, s.cfg.Now(), s.cfg.Retention)
			if err == nil {
				var m int64
				m, err = s.store.sweepInbox(ctx, s.cfg.Now(), s.cfg.InboxRetention)
				n += m
			}
			if err == nil {
				var m int64
				m, err = s.store.sweepTrees(ctx, s.cfg.Now())
				n += m
			}
			s.metrics.sweep(n)
			if err != nil && ctx.Err() == nil {
				s.log.Error("directory sweep failed", "err", err)
			} else if n > 0 {
				s.log.Info("directory sweep", "deleted", n)
			}
		}
	}
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /health", s.handleHealth)
	m.HandleFunc("GET /ready", s.handleReady)
	m.HandleFunc("POST /v1/accounts", s.handleCreateAccount)
	m.HandleFunc("POST /v1/tokens", s.handleToken)
	m.HandleFunc("POST /v1/channels", s.limited(limitChannel, s.handleRegisterChannel))
	m.HandleFunc("POST /v1/channels/invites", s.limited(limitInvite, s.handleCreateInvite))
	m.HandleFunc("POST /v1/channels/join", s.limited(limitJoin, s.handleJoin))
	m.HandleFunc("GET /v1/channels/pending", s.reading(s.handlePending))
	m.HandleFunc("POST /v1/channels/welcome", s.authed(s.handlePublishWelcome))
	m.HandleFunc("GET /v1/channels/welcome/{request_id}", s.reading(s.handlePollWelcome))
	m.HandleFunc("POST /v1/channels/welcome/{request_id}/ack", s.authed(s.handleAck))
	m.HandleFunc("POST /v1/federation/invites", s.limited(limitInvite, s.handleCreateFederationInvite))
	m.HandleFunc("POST /v1/orgs/invites", s.limited(limitInvite, s.handleCreateOrgInvite))
	m.HandleFunc("POST /v1/device/grants", s.handleCreateGrant)
	m.HandleFunc("POST /v1/device/grants/approve", s.limited(limitGrant, s.handleApproveGrant))
	m.HandleFunc("POST /v1/device/grants/lookup", s.limited(limitGrant, s.handleLookupGrant))
	m.HandleFunc("GET /v1/device/grants/{grant_id}", s.handlePollGrant)
	m.HandleFunc("GET /v1/devices", s.reading(s.handleListDevices))
	m.HandleFunc("POST /v1/devices/revocations", s.limited(limitGrant, s.handleRevokeDevice))
	m.HandleFunc("GET /v1/devices/revocations", s.reading(s.handleListRevocations))
	m.HandleFunc("POST /v1/seats", s.limited(limitChannel, s.handleRegisterSeat))
	m.HandleFunc("POST /v1/revocations", s.handleRevoke)
	m.HandleFunc("GET /v1/internal/revocations", s.handleInternalRevocations)
	m.HandleFunc("POST /v1/internal/signup-tokens", s.handleSignupToken)
	m.HandleFunc("GET /v1/internal/accounts", s.handleListAccounts)
	m.HandleFunc("DELETE /v1/internal/accounts/{account_id}", s.handleRemoveAccount)
	m.HandleFunc("POST /v1/channels/members", s.limited(limitMember, s.handleAddMember))
	m.HandleFunc("DELETE /v1/channels/members", s.limited(limitMember, s.handleRemoveMember))
	m.HandleFunc("GET /v1/channels/members", s.reading(s.handleListMembers))
	m.HandleFunc("GET /v1/channels/identities", s.authed(s.handleIdentityRecorded))
	m.HandleFunc("GET /v1/channels/invite-joins", s.reading(s.handleInviteJoins))
	m.HandleFunc("POST /v1/channels/invite-joins/lapse", s.limited(limitMember, s.handleLapseInviteJoins))
	m.HandleFunc("POST /v1/channels/fence", s.limited(limitMember, s.handleResetFence))
	m.HandleFunc("GET /v1/internal/channels/events", s.handleInternalChannelEvents)
	m.HandleFunc("POST /v1/keypackages", s.limited(limitStock, s.handlePutStock))
	m.HandleFunc("GET /v1/keypackages", s.reading(s.handleGetStock))
	m.HandleFunc("DELETE /v1/keypackages/claims", s.limited(limitStock, s.handleAckClaims))
	m.HandleFunc("POST /v1/keypackages/claim", s.limited(limitClaim, s.handleClaim))
	m.HandleFunc("POST /v1/inbox", s.limited(limitMember, s.handleDeliver))
	m.HandleFunc("GET /v1/inbox", s.reading(s.handleInbox))
	m.HandleFunc("DELETE /v1/inbox/{id}", s.authed(s.handleDropInbox))
	m.HandleFunc("POST /v1/inbox/{id}/accept", s.limited(limitMember, s.handleAcceptInbox))
	m.HandleFunc("POST /v1/contacts/tokens", s.limited(limitInvite, s.handleCreateAddToken))
	m.HandleFunc("GET /v1/contacts/tokens", s.reading(s.handleListAddTokens))
	m.HandleFunc("DELETE /v1/contacts/tokens/{id}", s.authed(s.handleRevokeAddToken))
	m.HandleFunc("PUT /v1/channels/groupinfo", s.limited(limitGroupInfo, s.handlePutGroupInfo))
	m.HandleFunc("GET /v1/channels/groupinfo", s.reading(s.handleGetGroupInfo))
	m.HandleFunc("PUT /v1/channels/tree", s.limited(limitTree, s.handlePutTree))
	m.HandleFunc("GET /v1/channels/tree", s.reading(s.handleGetTree))
	s.mux = m
}

// ServeHTTP implements [http.Handler].
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.gate.Enter() {
		writeError(w, http.StatusServiceUnavailable, "closed", "the directory is shutting down")
		return
	}
	defer s.gate.Leave()
	start := time.Now()
	rec := &statusWriter{ResponseWriter: w}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		// No route: let the mux decide between 404 and 405 (and set
		// Allow), then answer in the JSON error shape.
		probe := &probeWriter{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if allow := probe.header.Get("Allow"); allow != "" {
			rec.Header().Set("Allow", allow)
		}
		if probe.status == http.StatusMethodNotAllowed {
			writeError(rec, http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed")
		} else {
			writeError(rec, http.StatusNotFound, "not_found", "no such endpoint")
		}
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	s.metrics.request(pattern, rec.code(), time.Since(start))
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("path", s.logPath(r.URL.Path, pattern)),
		slog.Int("status", rec.code()),
		slog.Duration("duration", time.Since(start)),
	}
	if s.cfg.LogClients {
		attrs = append(attrs, slog.String("remote", r.RemoteAddr))
		if ch := r.URL.Query().Get("channel"); ch != "" {
			attrs = append(attrs, slog.String("channel", ch))
		}
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// logPath is the request path as logged: its route pattern, or with
// LogClients the path without its query string and with any segment that
// looks like a credential (a client putting a key in the path) replaced.
func (s *Server) logPath(p, pattern string) string {
	return redact.Path(s.cfg.LogClients, httpx.LogPath(p), pattern)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "ok",
		"uptime": int64(s.cfg.Now().Sub(s.started) / time.Second),
	})
}

// statusWriter remembers the status code for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// probeWriter captures what the mux's fallback handler would answer.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}
func (p *probeWriter) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
