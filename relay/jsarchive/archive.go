package jsarchive

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/semaphore"

	"github.com/skytale-oss/skytale/relay/internal/backend"
)

// The JetStream archive. Every relay of a cluster connects to the same
// NATS and uses one stream (Config.Stream, default SKYTALE). A channel has
// two subjects in it, <stream>.a.<token> for application
// entries and <stream>.h.<token> for handshake entries (commits,
// proposals, Welcomes), where the token is the channel name in unpadded
// base64url, which has no character a subject treats specially. The
// stream's limits are the archive's: MaxMsgsPerSubject is ArchiveCap (so
// the two caps stay apart) and MaxAge is ArchiveTTL.
//
// A channel's seq is the stream sequence of its entry: strictly increasing
// on every channel and never reused, and, as with SQLite, not contiguous
// (other channels' entries take the numbers between).
//
// The commit fence lives on the handshake subject: every handshake message
// carries, in headers, the epoch the channel expects next after it (and
// the id of the last fence reset applied), and is published with
// Nats-Expected-Last-Subject-Sequence set to the handshake subject's last
// sequence the relay knows. JetStream stores it only if nobody published
// a handshake entry on the channel in between, so the check of the fence
// and the store of the commit are one compare-and-set: two relays can
// never both accept a commit for one epoch. A relay that loses the race
// reads the subject's last message and tries again against the new fence.
// Handshake messages never expire by age in JetStream (Nats-TTL: never),
// so the newest, which holds the fence, outlives the TTL; the relay hides
// expired ones from reads and deletes all but the newest.
//
// The payer record names, once per channel, whom its entries are charged
// to (relay/budget.go); no entry carries an account. The records are the keys
// of a KeyValue bucket beside the stream (<stream>_PAYERS, with the
// stream's replicas), the channel's token the key, so the stream's
// sequences stay the channels' seqs. A relay creates a channel's record
// before it publishes the channel's first entry, and only if there is
// none (KeyValue Create), so of two relays taking a new channel's first
// publishes at once one writes it and the other reads it: every relay
// charges the same payer. A relay reads the whole bucket at start, and
// a record it does not hold when an entry of its channel comes through
// the consumer (another relay's new channel) once. Entries stored
// before the records existed carry the payer in a Skytale-Sub header;
// they are read as before, and leave by the cap or the TTL.
//
// Each relay consumes the whole stream with an ordered consumer and pushes
// every entry to its own subscribers, whichever relay took the publish;
// a publish is acknowledged only once JetStream acknowledged it, and an
// entry is pushed only once it is in the stream, so a read that starts
// after a push always finds the entry. The consumer also keeps, per relay,
// a mirror of the entries within the caps (seq, size, time, and each
// channel's payer),
// from which the account quotas are counted; a relay replays the stream's
// headers into it at start.

// DefaultStream is the stream's name when Config.Stream is empty.
const DefaultStream = "SKYTALE"

// Config is where the archive is: the NATS and the stream.
type Config struct {
	// URL is the NATS server's (or servers', comma-separated). Required.
	URL string
	// Stream names the stream, and prefixes its subjects (default
	// SKYTALE): 1 to 64 of [A-Za-z0-9_-].
	Stream string
	// Replicas is the stream's replica count when this relay creates it
	// (default 1; 3 on a NATS cluster of three or more servers). Once
	// the stream exists its count is the cluster's: a relay given none
	// takes it, a relay given another refuses to start (see
	// UpdateStreamReplicas).
	Replicas int
	// Options are extra nats.go options (credentials, TLS, ...), applied
	// after the archive's own.
	Options []nats.Option
}

// Backend is a relay's archive on JetStream: relay.Config.Archive.
type Backend struct{ cfg Config }

// New returns the JetStream archive of cfg, for relay.Config.Archive. The
// relay opens it when it starts (and dials NATS then).
func New(cfg Config) *Backend { return &Backend{cfg: cfg} }

// Config returns the archive's Config as New was given it.
func (b *Backend) Config() Config { return b.cfg }

// Open implements relay.Config.Archive: it connects to NATS and binds (or
// creates) the stream.
func (b *Backend) Open(ctx context.Context, env backend.Env) (backend.Archiver, error) {
	a, err := open(ctx, env, b.cfg)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Header names of the stream's messages.
const (
	// hdrSub was set on each entry, naming the channel's payer, by relays
	// that kept no payer record; none is written now.
	hdrSub = "Skytale-Sub"
	hdrTS  = "Skytale-Ts" // the relay's time of the publish, Unix ms
	// hdrOrigin (<relay node id>.<conn id>) was set by relays that
	// marked each entry with the connection that published it; none is
	// written now (see origins).
	hdrOrigin = "Skytale-Origin"
	hdrType   = "Skytale-Type"  // handshake subject: entry type, or "fence" for a fence reset
	hdrFence  = "Skytale-Fence" // handshake subject: the epoch expected after this message
	hdrReset  = "Skytale-Reset" // handshake subject: the id of the last fence reset applied
)

const fenceMarker = "fence"

// jsTimeout bounds one JetStream request that is not retried.
const jsTimeout = 10 * time.Second

// A publish or a read is tried for at most jsTry at a time, and tried
// again (on whichever server now leads the stream), jsMaxWait apart at
// most, until jsBudget has passed since its first try: a stream leader
// lost costs NATS's own election plus at most one try and one wait (under
// a second), not a fixed long timeout, and a retried publish is stored
// once (its Nats-Msg-Id, within the stream's duplicate window, see
// backend.DupWindow), so a try that timed out on a slow but live leader costs a
// duplicate answer, not a duplicate entry. jsPing is the client's ping
// interval, so a server that stops answering (paused, or cut off) is left
// after about three pings rather than NATS's default two minutes.
const (
	jsTry     = 750 * time.Millisecond
	jsMaxWait = 200 * time.Millisecond
	jsBudget  = 15 * time.Second
	jsPing    = time.Second
)

// jsSetupWait bounds how long a starting relay waits for JetStream to
// create or bind the stream: a NATS cluster that has just started needs a
// few seconds to elect its JetStream leaders, and nodes starting together
// race to create the stream. jsSetupTry bounds one attempt.
const (
	jsSetupWait = time.Minute
	jsSetupTry  = 2 * time.Second
)

// HeaderRoom is what a stored message may need beyond its payload: the
// relay's headers and NATS's own. A handshake may be as large as the NATS
// servers' max_payload less this.
const HeaderRoom = 64 << 10

// fetchWait is how long a read waits for entries JetStream reported
// pending before it asks again what is pending.
const fetchWait = time.Second

// jsHead is a channel's handshake subject as far as the fence goes: the
// sequence of its last message and the fence after it.
type jsHead struct {
	seq      uint64
	hasEpoch bool
	epoch    uint64
	reset    int64
}

// archive is the JetStream archive of one relay.
type archive struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	payers jetstream.KeyValue // the channels' payer records
	name   string
	hub    backend.Hub
	log    *slog.Logger
	now    func() time.Time
	// granularity is relay.Config.TimeGranularity (backend.CoarseMillis).
	granularity time.Duration
	// readyEvery and sweepEvery are Env.ReadyCheckEvery and
	// Env.SweepInterval.
	readyEvery, sweepEvery time.Duration

	cap           int
	ttl           time.Duration
	budget        backend.Limits // the archive budgets
	maxFirstEpoch uint64
	node          string // this relay's id in origin headers
	// maxHandshake is the largest handshake payload the NATS servers'
	// max_payload admits (at most Env.MaxHandshakePayload); maxPayload
	// is Env.MaxPayload.
	maxHandshake, maxPayload int
	msgIDs                   atomic.Uint64

	// origins maps the message id of each publish this relay has in
	// flight to the connection that made it, so the publisher does not
	// get its own entry back, without the stream recording per entry
	// which connection published it. An entry is taken when the message
	// comes back through the consumer; one whose message never does (a
	// refused or duplicate publish) is dropped by the sweep after
	// originTTL.
	omu     sync.Mutex
	origins map[string]origin

	reqs    chan *backend.Request
	answers chan jsAnswer
	wg      sync.WaitGroup

	inflight *semaphore.Weighted

	mu      sync.Mutex // guards the following fields
	chans   map[string]*jsChan
	usage   *backend.Tally // bytes of the mirrored entries, per payer and budget
	pend    *backend.Tally // bytes charged for publishes not yet mirrored
	pendSeq map[uint64]pending
	hw      uint64 // the last stream sequence the mirror applied
	subs    map[string]string

	cons      jetstream.ConsumeContext
	stopSweep chan struct{}
	sweepDone chan struct{}

	readyMu  sync.Mutex // guards the following fields (ready)
	readyAt  time.Time
	readyErr error
}

// pending are the bytes charged to sub for a publish stored and not yet
// mirrored.
type pending struct {
	sub string
	n   int64
}

// origin is the connection of a publish in flight, and when it was sent.
type origin struct {
	conn uint64
	at   time.Time
}

// originTTL is how long an origin waits for its message: longer than any
// publish may be tried (jsBudget).
const originTTL = 4 * jsBudget

// jsAnswer is a request on its way to its answer, in arrival order.
type jsAnswer struct {
	r    *backend.Request
	paf  jetstream.PubAckFuture
	sent time.Time // when paf was sent
	seq  uint64
	err  error
	// uncharged: err came before the publish was charged (its payer
	// record could not be written), so there is nothing to give back.
	uncharged bool
}

var _ backend.Archiver = (*archive)(nil)

// validStreamName reports whether name can name a stream and prefix its
// subjects.
func validStreamName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func open(ctx context.Context, env backend.Env, cfg Config) (*archive, error) {
	if cfg.URL == "" {
		return nil, errors.New("relay: jsarchive.Config.URL is required")
	}
	cfg.Stream = cmp.Or(cfg.Stream, DefaultStream)
	// Replicas are the stream's, once it exists: a node given none takes
	// them as they are; a node given others refuses to start.
	explicitReplicas := cfg.Replicas != 0
	cfg.Replicas = cmp.Or(cfg.Replicas, 1)
	if !validStreamName(cfg.Stream) {
		return nil, errors.New("relay: the JetStream stream's name must be 1 to 64 of [A-Za-z0-9_-]")
	}
	if cfg.Replicas < 1 || cfg.Replicas > 5 {
		return nil, errors.New("relay: the JetStream stream's replicas must be 1 to 5")
	}
	opts := append([]nats.Option{
		nats.Name("skytale-relay"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(jsPing),
		nats.MaxPingsOutstanding(3),
	}, cfg.Options...)
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, &natsUnreachable{fmt.Errorf("relay: connect to NATS: %w", err)}
	}
	fail := func(err error) (*archive, error) {
		nc.Close()
		return nil, err
	}
	// unreachable fails for a NATS that stopped answering (or a JetStream
	// not ready): a later try may succeed.
	unreachable := func(err error) (*archive, error) {
		var refused *streamRefusal
		if errors.As(err, &refused) {
			return fail(err)
		}
		return fail(&natsUnreachable{err})
	}
	mp := nc.MaxPayload()
	if need := int64(env.MaxPayload + HeaderRoom); mp < need {
		return fail(fmt.Errorf("relay: the NATS server's max_payload is %d bytes; the relay needs at least %d (set max_payload: 2MB, or 17MB for handshakes up to 16 MiB)", mp, need))
	}
	// Handshakes may be as large as the server admits, up to
	// MaxHandshakePayload; a larger one is refused to its publisher.
	maxHS := int(min(int64(env.MaxHandshakePayload), mp-HeaderRoom))
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncTimeout(jsTry),
		jetstream.WithDefaultTimeout(jsTimeout))
	if err != nil {
		return fail(fmt.Errorf("relay: JetStream: %w", err))
	}
	name := cfg.Stream
	age := max(env.TTL, time.Second)
	scfg := jetstream.StreamConfig{
		Name:              name,
		Description:       "Skytale relay archive",
		Subjects:          []string{name + ".a.*", name + ".h.*"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: int64(env.Cap),
		MaxAge:            age,
		MaxMsgSize:        int32(maxHS + HeaderRoom),
		Storage:           jetstream.FileStorage,
		Replicas:          cfg.Replicas,
		Duplicates:        backend.DupWindow(age),
		AllowMsgTTL:       true,
	}
	stream, err := bindStream(ctx, js, scfg, explicitReplicas)
	if err != nil {
		return unreachable(err)
	}
	payers, err := bindPayers(ctx, js, name, stream.CachedInfo().Config.Replicas)
	if err != nil {
		return unreachable(err)
	}
	var id [8]byte
	rand.Read(id[:])
	a := &archive{
		nc: nc, js: js, stream: stream, payers: payers, name: name, hub: env.Hub, log: env.Logger, now: env.Now, granularity: env.Granularity,
		readyEvery: env.ReadyCheckEvery, sweepEvery: env.SweepInterval,
		cap: env.Cap, ttl: env.TTL, maxFirstEpoch: env.MaxFirstEpoch,
		maxHandshake: maxHS, maxPayload: env.MaxPayload,
		node:     hex.EncodeToString(id[:]),
		reqs:     make(chan *backend.Request, 1024),
		answers:  make(chan jsAnswer, 4096),
		inflight: semaphore.NewWeighted(256 << 20),
		chans:    make(map[string]*jsChan),
		usage:    backend.NewTally(),
		pend:     backend.NewTally(),
		pendSeq:  make(map[uint64]pending),
		subs:     make(map[string]string),
		origins:  make(map[string]origin),
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if err := setupRetry(ctx, "payers", jsSetupWait, a.loadPayers); err != nil {
		return unreachable(err)
	}
	if err := a.replay(ctx); err != nil {
		return unreachable(err)
	}
	a.budget = env.Budgets(a.usage.Total)
	// Live delivery starts where the replay ended; until the relay
	// serves, there is nobody to deliver to.
	cctx, cancel := context.WithTimeout(ctx, jsTimeout) // the replay may have taken long
	defer cancel()
	cons, err := stream.OrderedConsumer(cctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{name + ".>"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    a.hw + 1,
	})
	if err == nil {
		a.cons, err = cons.Consume(a.deliver)
	}
	if err != nil {
		return unreachable(fmt.Errorf("relay: JetStream consumer: %w", err))
	}
	return a, nil
}

// ErrUnreachable is matched (errors.Is) by the error of relay.New when
// NATS did not answer, or its JetStream was not ready, when the relay
// started: the configuration may be right, and a later start may succeed.
// tally serve waits, reporting not ready, and tries again. It is
// relay.ErrArchiveUnreachable.
var ErrUnreachable = backend.ErrUnreachable

type natsUnreachable struct{ err error }

func (e *natsUnreachable) Error() string   { return e.err.Error() }
func (e *natsUnreachable) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// bindStream creates the stream with scfg if it does not exist, or binds
// to it if it does: the replica count is cluster state, set by the node
// that created the stream, and changed only by UpdateStreamReplicas. A
// node whose configured replicas (explicit, when it was given any)
// disagree with the stream's refuses to start. Other settings (the caps,
// the TTL, derived limits) follow the node's configuration, as on
// SQLite, with the stream's replicas kept. Nodes starting together
// converge: whichever loses the create binds, and an attempt that meets a
// JetStream not ready yet (no leader, no responders, a timeout) is tried
// again until jsSetupWait.
func bindStream(ctx context.Context, js jetstream.JetStream, scfg jetstream.StreamConfig, explicitReplicas bool) (jetstream.Stream, error) {
	var stream jetstream.Stream
	err := setupRetry(ctx, "stream "+scfg.Name, jsSetupTry, func(ctx context.Context) (err error) {
		stream, err = bindOnce(ctx, js, scfg, explicitReplicas)
		return err
	})
	return stream, err
}

// setupRetry calls try until it returns nil, for the setup steps a
// cluster answers only once it has a meta leader and the asset's leader
// ("JetStream system temporarily unavailable" while it elects them, a
// timeout while a server is stopped). Each try gets each; after
// jsSetupWait in all it gives up with try's last error. A streamRefusal
// returns at once: no retry mends it.
func setupRetry(ctx context.Context, what string, each time.Duration, try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, jsSetupWait)
	defer cancel()
	wait := 50 * time.Millisecond
	for {
		tctx, tcancel := context.WithTimeout(ctx, each)
		err := try(tctx)
		tcancel()
		var refused *streamRefusal
		switch {
		case err == nil:
			return nil
		case errors.As(err, &refused):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("relay: JetStream %s: not ready within %v: %w", what, jsSetupWait, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// streamRefusal is a disagreement between the node and the stream: no
// retry mends it.
type streamRefusal struct{ msg string }

func (e *streamRefusal) Error() string { return e.msg }

func bindOnce(ctx context.Context, js jetstream.JetStream, scfg jetstream.StreamConfig, explicitReplicas bool) (jetstream.Stream, error) {
	stream, err := js.Stream(ctx, scfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		stream, err = js.CreateStream(ctx, scfg)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, err // another node created it: bind next time
		}
		return stream, err
	}
	if err != nil {
		return nil, err
	}
	cur := stream.CachedInfo().Config
	if explicitReplicas && cur.Replicas != scfg.Replicas {
		return nil, &streamRefusal{fmt.Sprintf("relay: JetStream stream %s has %d replicas and this node is configured with %d; the replica count is the cluster's (set it with: tally serve cluster update-stream --replicas %d), so start the node with the stream's or without one",
			scfg.Name, cur.Replicas, scfg.Replicas, scfg.Replicas)}
	}
	want := scfg
	want.Replicas = cur.Replicas
	if cur.MaxMsgsPerSubject == want.MaxMsgsPerSubject && cur.MaxAge == want.MaxAge && cur.MaxMsgSize == want.MaxMsgSize &&
		cur.Duplicates == want.Duplicates && cur.AllowMsgTTL == want.AllowMsgTTL && slices.Equal(cur.Subjects, want.Subjects) {
		return stream, nil
	}
	return js.UpdateStream(ctx, want)
}

// UpdateStreamReplicas sets the replica count of a relay cluster's
// stream on the NATS at url: the one way to change it once the stream
// exists (see bindStream). Nodes started afterwards must be given the new
// count or none.
func UpdateStreamReplicas(ctx context.Context, url, stream string, replicas int, opts ...nats.Option) error {
	if !validStreamName(stream) {
		return errors.New("relay: the stream name must be 1 to 64 of [A-Za-z0-9_-]")
	}
	if replicas < 1 || replicas > 5 {
		return errors.New("relay: replicas must be 1 to 5")
	}
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name("skytale-relay-admin")}, opts...)...)
	if err != nil {
		return fmt.Errorf("relay: connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("relay: JetStream: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, jsSetupWait)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("relay: JetStream stream %s: %w", stream, err)
	}
	cfg := s.CachedInfo().Config
	cfg.Replicas = replicas
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("relay: JetStream stream %s: update to %d replicas: %w", stream, replicas, err)
	}
	// The payer bucket follows the stream's replicas.
	kv, err := js.Stream(ctx, "KV_"+stream+payersSuffix)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // no relay has started on the stream since the records came
	}
	if err != nil {
		return fmt.Errorf("relay: JetStream bucket %s: %w", stream+payersSuffix, err)
	}
	kcfg := kv.CachedInfo().Config
	kcfg.Replicas = replicas
	if _, err := js.UpdateStream(ctx, kcfg); err != nil {
		return fmt.Errorf("relay: JetStream bucket %s: update to %d replicas: %w", stream+payersSuffix, replicas, err)
	}
	return nil
}

// Subjects.

func token(channel string) string { return base64.RawURLEncoding.EncodeToString([]byte(channel)) }

func (a *archive) appSubject(channel string) string { return AppSubject(a.name, channel) }
func (a *archive) hsSubject(channel string) string  { return HandshakeSubject(a.name, channel) }

// AppSubject is the subject of a channel's application entries in the
// stream: <stream>.a.<the channel's name in unpadded base64url>.
func AppSubject(stream, channel string) string { return stream + ".a." + token(channel) }

// HandshakeSubject is the subject of a channel's handshake entries
// (commits, proposals, Welcomes, fence resets): <stream>.h.<token>.
func HandshakeSubject(stream, channel string) string { return stream + ".h." + token(channel) }

// PayerBucket is the KeyValue bucket beside the stream that holds each
// channel's payer record, under PayerKey.
func PayerBucket(stream string) string { return stream + payersSuffix }

// PayerKey is a channel's key in PayerBucket.
func PayerKey(channel string) string { return token(channel) }

// parseSubject returns the kind ('a' or 'h') and channel of a subject.
func (a *archive) parseSubject(subj string) (byte, string, bool) {
	rest, ok := strings.CutPrefix(subj, a.name+".")
	if !ok || len(rest) < 3 || rest[1] != '.' || (rest[0] != 'a' && rest[0] != 'h') {
		return 0, "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest[2:])
	if err != nil {
		return 0, "", false
	}
	return rest[0], string(b), true
}

// headOf reads the fence state a handshake message carries.
func headOf(seq uint64, h nats.Header) jsHead {
	hd := jsHead{seq: seq}
	if v := h.Get(hdrFence); v != "" {
		if e, err := strconv.ParseUint(v, 10, 64); err == nil {
			hd.hasEpoch, hd.epoch = true, e
		}
	}
	if v := h.Get(hdrReset); v != "" {
		hd.reset, _ = strconv.ParseInt(v, 10, 64)
	}
	return hd
}

func (hd jsHead) header(h nats.Header) {
	if hd.hasEpoch {
		h.Set(hdrFence, strconv.FormatUint(hd.epoch, 10))
	}
	if hd.reset != 0 {
		h.Set(hdrReset, strconv.FormatInt(hd.reset, 10))
	}
}

// Ready checks that NATS is connected and the stream answers; the
// stream's answer stands for readyCheckEvery, and callers meanwhile wait
// for the one check in flight.
func (a *archive) Ready(ctx context.Context) error {
	if !a.nc.IsConnected() {
		return errors.New("the relay is not connected to NATS")
	}
	a.readyMu.Lock()
	defer a.readyMu.Unlock()
	if !a.readyAt.IsZero() && time.Since(a.readyAt) < a.readyEvery {
		return a.readyErr
	}
	tctx, cancel := context.WithTimeout(ctx, jsTry)
	defer cancel()
	_, err := a.stream.Info(tctx)
	if err != nil && ctx.Err() != nil {
		return errors.New("the request ended") // the caller's, not the stream's
	}
	a.readyErr = nil
	if err != nil {
		a.readyErr = fmt.Errorf("the JetStream stream %s does not answer", a.name)
	}
	a.readyAt = time.Now()
	return a.readyErr
}

// Up reports whether the NATS connection is up.
func (a *archive) Up() bool { return a.nc.IsConnected() }

// Stop answers everything accepted, then stops the consumer.
func (a *archive) Stop() {
	close(a.reqs)
	a.wg.Wait()
	a.stopConsumer()
	close(a.stopSweep)
	<-a.sweepDone
}

func (a *archive) stopConsumer() {
	if a.cons != nil {
		a.cons.Stop()
		<-a.cons.Closed()
		a.cons = nil
	}
}

// Close stops the consumer and closes the NATS connection.
func (a *archive) Close() {
	a.stopConsumer() // when New failed after opening the archive
	a.nc.Close()
}
