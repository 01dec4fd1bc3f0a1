package relay

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/semaphore"
)

// The JetStream archive. Every relay of a cluster connects to the same
// NATS and uses one stream (Config.NATSStream, default SKYTALE). A
// channel has two subjects in it, <stream>.a.<token> for application
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
// to (budget.go); no entry carries an account. The records are the keys
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

// Defaults of the JetStream Config fields.
const (
	DefaultNATSStream = "SKYTALE"
)

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
// again (on whichever server now leads the stream) until jsBudget has
// passed since its first try: a stream leader lost costs NATS's own
// election plus at most one try, not a fixed long timeout, and a retried
// publish is stored once (its Nats-Msg-Id, within the stream's duplicate
// window, see dupWindow). jsPing is the client's ping interval, so a
// server that stops answering (paused, or cut off) is left after about
// three pings rather than NATS's default two minutes.
const (
	jsTry    = 2 * time.Second
	jsBudget = 15 * time.Second
	jsPing   = time.Second
)

// dupWindow is the stream's duplicate window (Duplicates) for a TTL of
// age: JetStream stores a message whose Nats-Msg-Id it saw within the
// window once, and answers the retry with the first one's seq.
func dupWindow(age time.Duration) time.Duration { return min(age, 2*time.Minute) }

// jsSetupWait bounds how long a starting relay waits for JetStream to
// create or bind the stream: a NATS cluster that has just started needs a
// few seconds to elect its JetStream leaders, and nodes starting together
// race to create the stream. jsSetupTry bounds one attempt.
const (
	jsSetupWait = time.Minute
	jsSetupTry  = 2 * time.Second
)

// jsHeaderRoom is what a stored message may need beyond its payload: the
// relay's headers and NATS's own.
const jsHeaderRoom = 64 << 10

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

// jsEntry is an entry within the caps, in a relay's mirror.
type jsEntry struct {
	seq uint64
	ts  int64
	sub string
	n   int64
}

// jsChan is a relay's mirror of one channel.
type jsChan struct {
	payer   string    // whom the channel's entries are charged to (budget.go)
	paid    bool      // payer is the channel's payer record's
	app, hs []jsEntry // oldest first; hs includes fence markers (n 0)
	head    jsHead
	known   bool // head is the newest the relay has seen (not only a guess)
	// The drop floors: the newest application entry and the newest
	// handshake entry (not a fence marker) the mirror saw leave by the
	// cap or the TTL. A read from below one is truncated.
	dropApp, dropHS uint64
}

// dropped records that e left a channel's application (hs false) or
// handshake log.
func (c *jsChan) dropped(e jsEntry, hs bool) {
	switch {
	case !hs:
		c.dropApp = max(c.dropApp, e.seq)
	case e.n > 0:
		c.dropHS = max(c.dropHS, e.seq)
	}
}

type jsArchive struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	payers jetstream.KeyValue // the channels' payer records
	name   string
	hub    *hub
	log    *slog.Logger
	now    func() time.Time
	// granularity is Config.TimeGranularity (archive.go's coarseMillis).
	granularity time.Duration

	cap           int
	ttl           time.Duration
	budget        limits // the archive budgets (budget.go)
	maxFirstEpoch uint64
	node          string // this relay's id in origin headers
	// maxHandshake is the largest handshake payload the NATS servers'
	// max_payload admits (at most MaxHandshakePayload).
	maxHandshake int
	msgIDs       atomic.Uint64

	// origins maps the message id of each publish this relay has in
	// flight to the connection that made it, so the publisher does not
	// get its own entry back, without the stream recording per entry
	// which connection published it. An entry is taken when the message
	// comes back through the consumer; one whose message never does (a
	// refused or duplicate publish) is dropped by the sweep after
	// originTTL.
	omu     sync.Mutex
	origins map[string]origin

	reqs    chan *pubReq
	answers chan jsAnswer
	wg      sync.WaitGroup

	inflight *semaphore.Weighted

	mu      sync.Mutex // guards the following fields
	chans   map[string]*jsChan
	usage   *tally // bytes of the mirrored entries, per payer and budget
	pend    *tally // bytes charged for publishes not yet mirrored
	pendSeq map[uint64]subBytes
	hw      uint64 // the last stream sequence the mirror applied
	subs    map[string]string

	cons      jetstream.ConsumeContext
	stopSweep chan struct{}
	sweepDone chan struct{}

	readyMu  sync.Mutex // guards the following fields (ready)
	readyAt  time.Time
	readyErr error
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
	r    *pubReq
	paf  jetstream.PubAckFuture
	sent time.Time // when paf was sent
	seq  uint64
	err  error
	// uncharged: err came before the publish was charged (its payer
	// record could not be written), so there is nothing to give back.
	uncharged bool
}

var _ archiver = (*jsArchive)(nil)

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

func openJetStream(ctx context.Context, h *hub, cfg *Config) (*jsArchive, error) {
	if err := archiveDefaults(cfg); err != nil {
		return nil, err
	}
	setDefault(&cfg.NATSStream, DefaultNATSStream)
	// Replicas are the stream's, once it exists: a node given none takes
	// them as they are; a node given others refuses to start.
	explicitReplicas := cfg.NATSReplicas != 0
	setDefault(&cfg.NATSReplicas, 1)
	if !validStreamName(cfg.NATSStream) {
		return nil, errors.New("relay: NATSStream must be 1 to 64 of [A-Za-z0-9_-]")
	}
	if cfg.NATSReplicas < 1 || cfg.NATSReplicas > 5 {
		return nil, errors.New("relay: NATSReplicas must be 1 to 5")
	}
	opts := append([]nats.Option{
		nats.Name("skytale-relay"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(jsPing),
		nats.MaxPingsOutstanding(3),
	}, cfg.NATSOptions...)
	nc, err := nats.Connect(cfg.NATSURL, opts...)
	if err != nil {
		return nil, &natsUnreachable{fmt.Errorf("relay: connect to NATS: %w", err)}
	}
	fail := func(err error) (*jsArchive, error) {
		nc.Close()
		return nil, err
	}
	// unreachable fails for a NATS that stopped answering (or a JetStream
	// not ready): a later try may succeed.
	unreachable := func(err error) (*jsArchive, error) {
		var refused *streamRefusal
		if errors.As(err, &refused) {
			return fail(err)
		}
		return fail(&natsUnreachable{err})
	}
	mp := nc.MaxPayload()
	if mp < MaxPayload+jsHeaderRoom {
		return fail(fmt.Errorf("relay: the NATS server's max_payload is %d bytes; the relay needs at least %d (set max_payload: 2MB, or 17MB for handshakes up to 16 MiB)", mp, MaxPayload+jsHeaderRoom))
	}
	// Handshakes may be as large as the server admits, up to
	// MaxHandshakePayload; a larger one is refused to its publisher.
	maxHS := int(min(int64(MaxHandshakePayload), mp-jsHeaderRoom))
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncTimeout(jsTry),
		jetstream.WithDefaultTimeout(jsTimeout))
	if err != nil {
		return fail(fmt.Errorf("relay: JetStream: %w", err))
	}
	name := cfg.NATSStream
	age := max(cfg.ArchiveTTL, time.Second)
	scfg := jetstream.StreamConfig{
		Name:              name,
		Description:       "Skytale relay archive",
		Subjects:          []string{name + ".a.*", name + ".h.*"},
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: int64(cfg.ArchiveCap),
		MaxAge:            age,
		MaxMsgSize:        int32(maxHS + jsHeaderRoom),
		Storage:           jetstream.FileStorage,
		Replicas:          cfg.NATSReplicas,
		Duplicates:        dupWindow(age),
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
	a := &jsArchive{
		nc: nc, js: js, stream: stream, payers: payers, name: name, hub: h, log: cfg.Logger, now: cfg.Now, granularity: cfg.TimeGranularity,
		cap: cfg.ArchiveCap, ttl: cfg.ArchiveTTL, maxFirstEpoch: cfg.MaxFirstEpoch,
		maxHandshake: maxHS,
		node:         hex.EncodeToString(id[:]),
		reqs:         make(chan *pubReq, 1024),
		answers:      make(chan jsAnswer, 4096),
		inflight:     semaphore.NewWeighted(256 << 20),
		chans:        make(map[string]*jsChan),
		usage:        newTally(),
		pend:         newTally(),
		pendSeq:      make(map[uint64]subBytes),
		subs:         make(map[string]string),
		origins:      make(map[string]origin),
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if err := a.loadPayers(ctx); err != nil {
		return unreachable(err)
	}
	if err := a.replay(ctx); err != nil {
		return unreachable(err)
	}
	a.budget = budgetLimits(cfg, a.usage.total)
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

// ErrNATSUnreachable is matched (errors.Is) by the error of New when
// NATS did not answer, or its JetStream was not ready, when the relay
// started: the configuration may be right, and New may succeed later.
// tally serve waits, reporting not ready, and tries again.
var ErrNATSUnreachable = errors.New("relay: NATS is unreachable")

type natsUnreachable struct{ err error }

func (e *natsUnreachable) Error() string   { return e.err.Error() }
func (e *natsUnreachable) Unwrap() []error { return []error{ErrNATSUnreachable, e.err} }

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
	ctx, cancel := context.WithTimeout(ctx, jsSetupWait)
	defer cancel()
	name := scfg.Name
	wait := 50 * time.Millisecond
	for {
		stream, err := bindOnce(ctx, js, scfg, explicitReplicas)
		var refused *streamRefusal
		switch {
		case err == nil:
			return stream, nil
		case errors.As(err, &refused):
			return nil, err
		case ctx.Err() != nil:
			return nil, fmt.Errorf("relay: JetStream stream %s: not created or bound within %v: %w", name, jsSetupWait, err)
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
	tctx, cancel := context.WithTimeout(ctx, jsSetupTry)
	defer cancel()
	stream, err := js.Stream(tctx, scfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		stream, err = js.CreateStream(tctx, scfg)
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
	return js.UpdateStream(tctx, want)
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

func (a *jsArchive) token(channel string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(channel))
}

func (a *jsArchive) appSubject(channel string) string { return a.name + ".a." + a.token(channel) }
func (a *jsArchive) hsSubject(channel string) string  { return a.name + ".h." + a.token(channel) }

// parseSubject returns the kind ('a' or 'h') and channel of a subject.
func (a *jsArchive) parseSubject(subj string) (byte, string, bool) {
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

// The mirror.

func (a *jsArchive) chanLocked(name string) *jsChan {
	c := a.chans[name]
	if c == nil {
		c = &jsChan{}
		a.chans[name] = c
	}
	return c
}

// channelPayer returns whom the entries of ch are charged to: the payer
// of its record. For a channel whose record the mirror has not seen, it
// writes one, naming the payer the mirror knows from older entries'
// headers, else sub, the first publisher; when another relay wrote the
// record first, it reads that one. The record is in the stream before
// the publish that follows, so the mirror applies it first.
func (a *jsArchive) channelPayer(ch, sub string) (string, error) {
	a.mu.Lock()
	c := a.chanLocked(ch)
	if c.paid {
		p := c.payer
		a.mu.Unlock()
		return p, nil
	}
	if c.payer != "" {
		sub = c.payer
	}
	a.mu.Unlock()
	p, err := a.writePayer(ch, sub)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c = a.chanLocked(ch)
	c.payer, c.paid = a.intern(p), true
	return c.payer, nil
}

// writePayer stores the payer record of ch naming sub unless the channel
// has one; it returns the payer the stored record names.
func (a *jsArchive) writePayer(ch, sub string) (string, error) {
	start, wait := time.Now(), 50*time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), jsTry)
		_, err := a.payers.Create(ctx, a.token(ch), []byte(sub))
		if errors.Is(err, jetstream.ErrKeyExists) {
			var e jetstream.KeyValueEntry
			if e, err = a.payers.Get(ctx, a.token(ch)); err == nil {
				sub = string(e.Value())
			}
		}
		cancel()
		if err == nil || !retryable(err) || time.Since(start)+wait > jsBudget {
			return sub, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// paid reports whether the mirror holds the payer record of ch.
func (a *jsArchive) paid(ch string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chans[ch]
	return c != nil && c.paid
}

// readPayer returns the payer record of ch, "" for none.
func (a *jsArchive) readPayer(ch string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	e, err := a.payers.Get(ctx, a.token(ch))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// bindPayers creates the payer bucket, with the stream's replicas, if it
// does not exist, or binds to it.
func bindPayers(ctx context.Context, js jetstream.JetStream, stream string, replicas int) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, jsSetupWait)
	defer cancel()
	bucket := stream + payersSuffix
	wait := 50 * time.Millisecond
	for {
		tctx, tcancel := context.WithTimeout(ctx, jsSetupTry)
		kv, err := js.KeyValue(tctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(tctx, jetstream.KeyValueConfig{
				Bucket:      bucket,
				Description: "Skytale relay archive: each channel's payer",
				History:     1,
				Storage:     jetstream.FileStorage,
				Replicas:    replicas,
			})
		}
		tcancel()
		if err == nil {
			return kv, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("relay: JetStream bucket %s: not created or bound within %v: %w", bucket, jsSetupWait, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// payersSuffix makes the payer bucket's name from the stream's.
const payersSuffix = "_PAYERS"

// loadPayers reads every payer record into the mirror.
func (a *jsArchive) loadPayers(ctx context.Context) error {
	w, err := a.payers.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("relay: JetStream payers: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("relay: JetStream payers: %w", ctx.Err())
		case e := <-w.Updates():
			if e == nil {
				return nil // the records there were at the start
			}
			b, err := base64.RawURLEncoding.DecodeString(e.Key())
			if err != nil {
				continue
			}
			a.mu.Lock()
			c := a.chanLocked(string(b))
			c.payer, c.paid = a.intern(string(e.Value())), true
			a.mu.Unlock()
		}
	}
}

func (a *jsArchive) intern(sub string) string {
	if s, ok := a.subs[sub]; ok {
		return s
	}
	a.subs[sub] = sub
	return sub
}

// apply adds one message of the stream to the mirror; it reports the
// channel, entry type and time when the message is an entry to deliver.
func (a *jsArchive) apply(seq uint64, subj string, h nats.Header, n int64) (channel string, et uint8, ts int64, entry bool) {
	kind, ch, ok := a.parseSubject(subj)
	if !ok {
		return "", 0, 0, false
	}
	ts, _ = strconv.ParseInt(h.Get(hdrTS), 10, 64)
	typ := h.Get(hdrType)
	marker := kind == 'h' && typ == fenceMarker
	// The payer record of a channel another relay started: read once.
	var payer string
	if !marker && h.Get(hdrSub) == "" && !a.paid(ch) {
		var err error
		if payer, err = a.readPayer(ch); err != nil {
			a.log.Error("relay: reading a channel's payer failed", "err", err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if seq <= a.hw {
		return "", 0, 0, false
	}
	a.hw = seq
	c := a.chanLocked(ch)
	// An entry from before the payer records names the payer itself.
	sub := c.payer
	if v := h.Get(hdrSub); v != "" {
		sub = a.intern(v)
	} else if payer != "" && !c.paid {
		c.payer, c.paid = a.intern(payer), true
		sub = c.payer
	}
	if c.payer == "" {
		c.payer = sub
	}
	if marker {
		n = 0
	}
	e := jsEntry{seq: seq, ts: ts, sub: sub, n: n}
	list := &c.app
	if kind == 'h' {
		list = &c.hs
		if seq > c.head.seq {
			c.head, c.known = headOf(seq, h), true
		}
	}
	*list = append(*list, e)
	if len(*list) > a.cap {
		a.creditLocked((*list)[0])
		c.dropped((*list)[0], kind == 'h')
		*list = (*list)[1:]
	}
	a.usage.add(parsePayer(sub), n)
	if p, ok := a.pendSeq[seq]; ok {
		delete(a.pendSeq, seq)
		a.unpendLocked(p.sub, p.n)
	}
	if marker {
		return "", 0, 0, false
	}
	et = EntryApp
	if kind == 'h' {
		v, _ := strconv.ParseUint(typ, 10, 8)
		et = uint8(v)
	}
	return ch, et, ts, true
}

func (a *jsArchive) creditLocked(e jsEntry) {
	if e.n == 0 {
		return
	}
	a.usage.add(parsePayer(e.sub), -e.n)
}

func (a *jsArchive) unpendLocked(sub string, n int64) {
	a.pend.add(parsePayer(sub), -n)
}

// charge reserves n bytes of a payer's budgets for a publish; it returns
// the scope of the budget they would pass, or "" once they are reserved.
func (a *jsArchive) charge(sub string, n int64) string {
	p := parsePayer(sub)
	a.mu.Lock()
	defer a.mu.Unlock()
	if scope := a.budget.refuse(p, n, a.usage, a.pend); scope != "" {
		return scope
	}
	a.pend.add(p, n)
	return ""
}

// settle ends the charge of a publish: refused or failed, the bytes go
// back; stored at seq, they move to the mirror's count when the consumer
// reaches seq (at once if it has).
func (a *jsArchive) settle(sub string, n int64, seq uint64, stored bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !stored || seq <= a.hw {
		a.unpendLocked(sub, n)
		return
	}
	a.pendSeq[seq] = subBytes{sub, n}
}

func (a *jsArchive) used(sub string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage.account[sub] + a.pend.account[sub]
}

func (a *jsArchive) storedBytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage.total
}

func (a *jsArchive) budgetUse() (budgetUse, limits) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.usage.use(a.pend), a.budget
}

// replay reads the headers of every message in the stream into the
// mirror, so quotas and fences are known before the relay serves.
func (a *jsArchive) replay(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	info, err := a.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("relay: JetStream stream info: %w", err)
	}
	if info.State.Msgs == 0 {
		a.hw = info.State.LastSeq
		return nil
	}
	cons, err := a.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{a.name + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		HeadersOnly:    true,
	})
	if err != nil {
		return fmt.Errorf("relay: JetStream replay: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("relay: JetStream replay: %w", err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return fmt.Errorf("relay: JetStream replay: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("relay: JetStream replay: %w", err)
		}
		n, _ := strconv.ParseInt(m.Headers().Get("Nats-Msg-Size"), 10, 64)
		a.apply(md.Sequence.Stream, m.Subject(), m.Headers(), n)
		if md.NumPending == 0 || md.Sequence.Stream >= info.State.LastSeq {
			a.replayedFloors()
			return nil
		}
	}
}

// replayedFloors sets the drop floors the replay could not see: the
// stream keeps no record of what the cap pushed out before this relay
// started, so a log the replay found full counts as cut just below its
// oldest entry. (What the TTL removed before then is not known; see the
// package documentation.)
func (a *jsArchive) replayedFloors() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.chans {
		if len(c.app) >= a.cap && c.app[0].seq > 1 {
			c.dropApp = max(c.dropApp, c.app[0].seq-1)
		}
		if len(c.hs) >= a.cap && c.hs[0].seq > 1 {
			c.dropHS = max(c.dropHS, c.hs[0].seq-1)
		}
	}
}

// floorsOf returns what a read of a channel's log from since reports
// besides its entries: whether an entry after since is gone, and the
// oldest seq of the log within the TTL. first is the page's first entry
// (0 for none) and hw the mirror's high-water mark when the read began.
// An entry is gone when the mirror saw it leave (see jsChan), or when the
// mirror holds an entry from before the read, after since and before
// first, which the stream did not return: the stream's cap pushed it out
// before the mirror learned of it.
func (a *jsArchive) floorsOf(name string, since, first, hw uint64, cutoff int64, appOnly bool) (bool, uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chans[name]
	if c == nil {
		return false, first // the mirror has not seen the channel yet
	}
	dropped := c.dropApp
	if !appOnly {
		dropped = max(dropped, c.dropHS)
	}
	trunc := since < dropped
	var oldest uint64
	scan := func(list []jsEntry, hs bool) {
		found := false
		for _, e := range list {
			if hs && e.n == 0 {
				continue // a fence marker, never in a page
			}
			if e.ts < cutoff {
				if e.seq > since {
					trunc = true
				}
				continue
			}
			if !found {
				found = true
				if oldest == 0 || e.seq < oldest {
					oldest = e.seq
				}
			}
			if e.seq > since && e.seq <= hw && (first == 0 || e.seq < first) {
				trunc = true
			}
			if e.seq > since {
				break
			}
		}
	}
	scan(c.app, false)
	if !appOnly {
		scan(c.hs, true)
	}
	if first != 0 && (oldest == 0 || since < oldest || first < oldest) {
		// The page began below every entry the mirror holds, so its
		// first entry is the oldest the stream holds, which the mirror
		// may not know yet (or may still think is gone later).
		oldest = first
	}
	return trunc, oldest
}

// start starts the publish pipeline and the sweep.
func (a *jsArchive) start() {
	a.stopSweep, a.sweepDone = make(chan struct{}), make(chan struct{})
	a.wg.Go(a.runSender)
	a.wg.Go(a.runAnswerer)
	go a.runSweep()
}

// deliver is the consumer's handler: it mirrors the message and pushes it
// to this relay's subscribers.
func (a *jsArchive) deliver(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	seq := md.Sequence.Stream
	data := m.Data()
	ch, et, ts, ok := a.apply(seq, m.Subject(), m.Headers(), int64(len(data)))
	if !ok {
		return
	}
	var from uint64
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
		a.omu.Lock()
		if o, ok := a.origins[id]; ok {
			from = o.conn
			delete(a.origins, id)
		}
		a.omu.Unlock()
	}
	if node, id, ok := strings.Cut(m.Headers().Get(hdrOrigin), "."); ok && node == a.node {
		from, _ = strconv.ParseUint(id, 10, 64) // a message from before origins
	}
	f := pushPrefix(ch, base64.StdEncoding.EncodedLen(len(data)))
	f = base64.StdEncoding.AppendEncode(f, data)
	f = pushSuffix(f, seq, et, ts)
	a.hub.fanoutExcept(ch, f, from)
}

func (a *jsArchive) submit(r *pubReq) { a.reqs <- r }

func (a *jsArchive) acquire(n int64) { a.inflight.Acquire(context.Background(), n) }

// waitVisible has nothing to wait for: an entry is pushed only once
// JetStream stored it, and reads ask JetStream's stream leader.
func (a *jsArchive) waitVisible(context.Context) error { return nil }

// runSender takes requests in arrival order: application entries are
// published asynchronously (JetStream keeps a connection's order), a
// handshake entry waits for its compare-and-set, and everything goes on to
// runAnswerer in the same order.
func (a *jsArchive) runSender() {
	defer close(a.answers)
	for r := range a.reqs {
		if r.reply == nil && !r.fence {
			p, err := a.channelPayer(r.channel, r.sub)
			if err != nil {
				a.answers <- jsAnswer{r: r, err: err, uncharged: true}
				continue
			}
			r.sub = p
		}
		switch {
		case r.reply != nil:
			a.answers <- jsAnswer{r: r}
		case r.fence:
			a.answers <- jsAnswer{r: r, err: a.fenceReset(r.channel, r.resetTo, r.resetID)}
		case r.hdr.entryType == EntryApp:
			if scope := a.charge(r.sub, int64(len(r.payload))); scope != "" {
				r.refused = quotaFrame(scope)
				a.answers <- jsAnswer{r: r}
				continue
			}
			m := a.message(a.appSubject(r.channel), r)
			paf, err := a.js.PublishMsgAsync(m)
			a.answers <- jsAnswer{r: r, paf: paf, sent: time.Now(), err: err}
		default:
			seq, err := a.publishHandshake(r)
			a.answers <- jsAnswer{r: r, seq: seq, err: err}
		}
	}
}

func (a *jsArchive) message(subj string, r *pubReq) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Data = r.payload
	m.Header.Set(hdrTS, strconv.FormatInt(coarseMillis(a.now(), a.granularity), 10))
	// Every publish has an id, so the relay may try it again after a
	// timeout (see jsTry) and JetStream stores it once: the client's, if
	// it gave one (scoped to its account and channel, see dedup.go), so
	// its own retry is stored once as well; else one of the relay's.
	id := r.id
	if id == "" {
		id = a.node + "." + strconv.FormatUint(a.msgIDs.Add(1), 10)
	}
	m.Header.Set(jetstream.MsgIDHeader, id)
	if r.c != nil {
		a.omu.Lock()
		a.origins[id] = origin{conn: r.c.id, at: time.Now()}
		a.omu.Unlock()
	}
	return m
}

// retryable reports whether a failed JetStream request may have met a
// leader change, a server lost or a reconnect, and is worth trying again.
func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// JetStream answered: only "not ready" answers are transient.
		return apiErr.Code == 503
	}
	return err != nil
}

// publishRetry publishes m until it is stored or jsBudget has passed
// since start, jsTry at a time; the message's Nats-Msg-Id keeps the tries
// one entry.
func (a *jsArchive) publishRetry(start time.Time, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), jsTry)
		ack, err := a.js.PublishMsg(ctx, m, opts...)
		cancel()
		if err == nil || !retryable(err) || time.Since(start)+wait > jsBudget {
			return ack, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// head returns what the relay knows of a channel's handshake subject,
// reading its last message from JetStream when it knows nothing or fresh
// is set.
func (a *jsArchive) head(channel string, fresh bool) (jsHead, error) {
	if !fresh {
		a.mu.Lock()
		c := a.chans[channel]
		if c != nil && c.known {
			hd := c.head
			a.mu.Unlock()
			return hd, nil
		}
		a.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
	defer cancel()
	m, err := a.stream.GetLastMsgForSubject(ctx, a.hsSubject(channel))
	var hd jsHead
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return jsHead{}, err
	default:
		hd = headOf(m.Sequence, m.Header)
	}
	a.learn(channel, hd)
	return hd, nil
}

// learn records a head read or written, unless the mirror has a newer one.
func (a *jsArchive) learn(channel string, hd jsHead) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.chanLocked(channel)
	if hd.seq >= c.head.seq {
		c.head = hd
	}
	c.known = true
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// casAttempts bounds the retries of one handshake publish that keeps
// losing the compare-and-set to other relays.
const casAttempts = 64

// publishHandshake stores a handshake entry with the fence checked and
// moved in the same compare-and-set; a refusal is left in r.refused.
func (a *jsArchive) publishHandshake(r *pubReq) (uint64, error) {
	n := int64(len(r.payload))
	fresh := false
	for range casAttempts {
		hd, err := a.head(r.channel, fresh)
		if err != nil {
			return 0, err
		}
		fresh = true
		next := hd
		if r.hdr.commit {
			if hd.hasEpoch && r.hdr.epoch != hd.epoch {
				if r.id != "" {
					// The retry of a commit that moved the fence itself.
					if seq, ok := a.storedAsLast(r.channel, r.id); ok {
						return seq, nil
					}
				}
				r.refused = staleEpochFrame(hd.epoch)
				return 0, nil
			}
			if r.hdr.epoch == math.MaxUint64 || !hd.hasEpoch && r.hdr.epoch > a.maxFirstEpoch {
				r.refused = epochOutOfRangeFrame(a.maxFirstEpoch)
				return 0, nil
			}
			next.hasEpoch, next.epoch = true, r.hdr.epoch+1
		}
		if scope := a.charge(r.sub, n); scope != "" {
			r.refused = quotaFrame(scope)
			return 0, nil
		}
		m := a.message(a.hsSubject(r.channel), r)
		m.Header.Set(hdrType, strconv.Itoa(int(r.hdr.entryType)))
		m.Header.Set(jetstream.MsgTTLHeader, "never")
		next.header(m.Header)
		ack, err := a.publishRetry(time.Now(), m, jetstream.WithExpectLastSequencePerSubject(hd.seq))
		if isWrongLastSeq(err) && r.id != "" {
			// The publish may be the retry of one stored a moment ago
			// (JetStream checks the id before the sequence in a
			// cluster, not always on one server): the newest message
			// tells.
			if seq, ok := a.storedAsLast(r.channel, r.id); ok {
				a.settle(r.sub, n, 0, false)
				return seq, nil
			}
		}
		if isWrongLastSeq(err) {
			a.settle(r.sub, n, 0, false)
			continue
		}
		if err != nil {
			a.settle(r.sub, n, 0, false)
			return 0, err
		}
		if ack.Duplicate {
			a.settle(r.sub, n, 0, false)
			return ack.Sequence, nil
		}
		next.seq = ack.Sequence
		a.learn(r.channel, next)
		a.settle(r.sub, n, ack.Sequence, true)
		return ack.Sequence, nil
	}
	return 0, errors.New("relay: the channel's handshake subject kept changing")
}

// storedAsLast reports the seq of the channel's newest handshake message
// if it carries the publish id key.
func (a *jsArchive) storedAsLast(channel, key string) (uint64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), jsTry)
	defer cancel()
	m, err := a.stream.GetLastMsgForSubject(ctx, a.hsSubject(channel))
	if err != nil || m.Header.Get(jetstream.MsgIDHeader) != key {
		return 0, false
	}
	return m.Sequence, true
}

// fenceReset stores a fence marker on the channel's handshake subject. A
// reset the directory feed carries (id > 0) is applied once, by whichever
// relay gets to it first: every relay follows the feed.
func (a *jsArchive) fenceReset(channel string, epoch uint64, id int64) error {
	for range casAttempts {
		hd, err := a.head(channel, true)
		if err != nil {
			return err
		}
		if id > 0 && hd.reset >= id {
			return nil
		}
		next := jsHead{hasEpoch: true, epoch: epoch, reset: max(hd.reset, id)}
		m := nats.NewMsg(a.hsSubject(channel))
		m.Header.Set(hdrType, fenceMarker)
		m.Header.Set(hdrTS, strconv.FormatInt(coarseMillis(a.now(), a.granularity), 10))
		m.Header.Set(jetstream.MsgTTLHeader, "never")
		m.Header.Set(jetstream.MsgIDHeader, a.node+".f"+strconv.FormatUint(a.msgIDs.Add(1), 10))
		next.header(m.Header)
		ack, err := a.publishRetry(time.Now(), m, jetstream.WithExpectLastSequencePerSubject(hd.seq))
		if isWrongLastSeq(err) {
			continue
		}
		if err != nil {
			return err
		}
		next.seq = ack.Sequence
		a.learn(channel, next)
		return nil
	}
	return errors.New("relay: the channel's handshake subject kept changing")
}

// nextEpoch reads the fence from the channel's handshake subject itself,
// not the mirror, so it is the fence every relay of the cluster checks.
func (a *jsArchive) nextEpoch(_ context.Context, channel string) (uint64, bool, error) {
	hd, err := a.head(channel, true)
	if err != nil {
		return 0, false, fmt.Errorf("relay: reading the commit fence: %w", err)
	}
	return hd.epoch, hd.hasEpoch, nil
}

func (a *jsArchive) resetFence(channel string, epoch uint64, id int64) error {
	if epoch == math.MaxUint64 {
		return errors.New("relay: fence reset: the epoch after the last one cannot be expected")
	}
	done := make(chan error, 1)
	a.submit(&pubReq{channel: channel, fence: true, resetTo: epoch, resetID: id, done: done})
	return <-done
}

// runAnswerer answers requests in arrival order, each once JetStream has.
func (a *jsArchive) runAnswerer() {
	for p := range a.answers {
		r := p.r
		seq, err := p.seq, p.err
		if p.paf != nil {
			dup := false
			select {
			case ack := <-p.paf.Ok():
				seq, dup = ack.Sequence, ack.Duplicate
			case err = <-p.paf.Err():
				// A timeout or a lost server: the same message again,
				// on the stream's leader now (stored once by its id).
				if retryable(err) {
					var ack *jetstream.PubAck
					if ack, err = a.publishRetry(p.sent, p.paf.Msg()); err == nil {
						seq, dup = ack.Sequence, ack.Duplicate
					}
				}
			}
			// A duplicate's bytes are the first publish's, charged then.
			a.settle(r.sub, int64(len(r.payload)), seq, err == nil && !dup)
		} else if err != nil && !p.uncharged && r.reply == nil && !r.fence && r.refused == nil && r.hdr.entryType == EntryApp {
			a.settle(r.sub, int64(len(r.payload)), 0, false)
		}
		if err != nil && r.reply == nil {
			a.log.Error("relay: JetStream publish failed", "err", err)
		}
		a.answer(r, seq, err)
	}
}

// ready checks that NATS is connected and the stream answers; the
// stream's answer stands for readyCheckEvery, and callers meanwhile wait
// for the one check in flight.
func (a *jsArchive) ready(ctx context.Context) error {
	if !a.nc.IsConnected() {
		return errors.New("the relay is not connected to NATS")
	}
	a.readyMu.Lock()
	defer a.readyMu.Unlock()
	if !a.readyAt.IsZero() && time.Since(a.readyAt) < readyCheckEvery {
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

func (a *jsArchive) up() bool { return a.nc.IsConnected() }

func (a *jsArchive) answer(r *pubReq, seq uint64, err error) {
	if r.weight > 0 {
		a.inflight.Release(r.weight)
	}
	if r.done != nil {
		r.done <- err
		return
	}
	if r.c == nil {
		return
	}
	f := r.reply
	switch {
	case f != nil:
	case r.refused != nil:
		f = r.refused
	case err != nil:
		f = errorFrame("internal", "the archive could not store the message")
	default:
		f = ackFrame(seq)
	}
	r.c.pushAnswer(f)
	r.c.pending.Add(-1)
}

// runSweep gives expired entries' bytes back and deletes expired
// handshake messages but the newest of each channel (which JetStream keeps
// past MaxAge, as it holds the fence).
func (a *jsArchive) runSweep() {
	defer close(a.sweepDone)
	t := time.NewTicker(sweepInterval(a.ttl))
	defer t.Stop()
	for {
		select {
		case <-a.stopSweep:
			return
		case <-t.C:
			a.sweep()
		}
	}
}

func (a *jsArchive) sweep() {
	a.omu.Lock()
	for id, o := range a.origins {
		if time.Since(o.at) > originTTL {
			delete(a.origins, id)
		}
	}
	a.omu.Unlock()
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	var del []uint64
	a.mu.Lock()
	for name, c := range a.chans {
		k := 0
		for k < len(c.app) && c.app[k].ts < cutoff {
			a.creditLocked(c.app[k])
			c.dropped(c.app[k], false)
			k++
		}
		c.app = c.app[k:]
		k = 0
		for k < len(c.hs) && c.hs[k].ts < cutoff {
			a.creditLocked(c.hs[k])
			c.dropped(c.hs[k], true)
			if c.hs[k].seq != c.head.seq {
				del = append(del, c.hs[k].seq)
			}
			k++
		}
		c.hs = c.hs[k:]
		if len(c.app) == 0 && len(c.hs) == 0 && !c.known && c.dropApp == 0 && c.dropHS == 0 {
			delete(a.chans, name)
		}
	}
	a.mu.Unlock()
	for _, seq := range del {
		ctx, cancel := context.WithTimeout(context.Background(), jsTimeout)
		err := a.stream.DeleteMsg(ctx, seq)
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) && !errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
			a.log.Error("relay: JetStream sweep failed", "err", err)
			return
		}
	}
}

// errArchiveUnavailable wraps a read the archive could not serve within
// its budget (JetStream had no leader for the stream, or no server
// answered): the relay answers 503 with Retry-After, not 500.
var errArchiveUnavailable = errors.New("relay: the archive is unavailable")

// pageReader is a page read's consumer: a short-lived one on the stream,
// filtered to the channel's subjects, from a start sequence. When a try
// meets a leader change or a lost server, the read opens a new consumer
// from the entry after the last one it got and goes on, until its budget
// (jsBudget, or the request's deadline if sooner) is spent.
type pageReader struct {
	a        *jsArchive
	ctx      context.Context
	filter   string
	start    time.Time
	cons     jetstream.Consumer
	cname    string
	next     uint64 // the stream seq the page goes on from
	pending  uint64
	attempts int
}

// open (re)creates the consumer from r.next, trying again until the
// budget is spent.
func (r *pageReader) open() error {
	r.drop()
	wait := 50 * time.Millisecond
	for {
		var id [8]byte
		rand.Read(id[:])
		cname := "read-" + hex.EncodeToString(id[:])
		cctx, cancel := context.WithTimeout(r.ctx, jsTry)
		cons, err := r.a.stream.CreateConsumer(cctx, jetstream.ConsumerConfig{
			Name:              cname,
			FilterSubject:     r.filter,
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       r.next,
			AckPolicy:         jetstream.AckNonePolicy,
			MemoryStorage:     true,
			Replicas:          1,
			InactiveThreshold: time.Minute,
		})
		cancel()
		if err == nil {
			r.cons, r.cname, r.pending = cons, cname, cons.CachedInfo().NumPending
			return nil
		}
		if err := r.retry(err, &wait); err != nil {
			return err
		}
	}
}

// retry waits before the next try of a failed one, or returns the error
// to end the read with when no try is left.
func (r *pageReader) retry(err error, wait *time.Duration) error {
	r.attempts++
	if !retryable(err) || r.ctx.Err() != nil || time.Since(r.start)+*wait > jsBudget {
		return fmt.Errorf("%w: archive read: %w", errArchiveUnavailable, err)
	}
	if dl, ok := r.ctx.Deadline(); ok && time.Until(dl) < *wait+jsTry {
		return fmt.Errorf("%w: archive read: %w", errArchiveUnavailable, err)
	}
	time.Sleep(*wait)
	*wait = min(2**wait, 500*time.Millisecond)
	return nil
}

// drop deletes the consumer, if any (a consumer on a lost server goes by
// its InactiveThreshold).
func (r *pageReader) drop() {
	if r.cons == nil {
		return
	}
	dctx, cancel := context.WithTimeout(context.Background(), jsTry)
	r.a.stream.DeleteConsumer(dctx, r.cname)
	cancel()
	r.cons = nil
}

// writePage serves a page from JetStream through a short-lived consumer
// on the stream, filtered to the channel's subjects from since+1; it
// fetches in rounds of at most the page's bytes, so a read holds about
// one page, never the whole channel. A leader change or a lost server
// during the read costs a new consumer from where the page got to (see
// pageReader); a read that cannot start within its budget is
// errArchiveUnavailable, and one that cannot finish is aborted (the
// client sees a broken body, never a page that looks whole).
func (a *jsArchive) writePage(ctx context.Context, w io.Writer, begin func(), name string, since uint64, limit, maxBytes int, appOnly bool) (started bool, err error) {
	filter := a.name + ".*." + a.token(name)
	if appOnly {
		filter = a.appSubject(name)
	}
	cutoff := a.now().Add(-a.ttl).UnixMilli()
	a.mu.Lock()
	hw := a.hw
	a.mu.Unlock()
	r := &pageReader{a: a, ctx: ctx, filter: filter, start: time.Now(), next: since + 1}
	defer r.drop()
	if since+1 != 0 { // past the last possible seq nothing follows
		if err := r.open(); err != nil {
			return false, err
		}
	}
	begin()
	pe := newPageEncoder(w, maxBytes, appOnly)
	defer pe.release()
	n, empty := 0, 0
	wait := 50 * time.Millisecond
	// failed ends a try: the read goes on from r.next on a new consumer,
	// or ends with the error.
	failed := func(err error) error {
		if err := r.retry(err, &wait); err != nil {
			return err
		}
		return r.open()
	}
	for r.pending > 0 && !pe.more {
		batch := min(r.pending, uint64(limit+1-n))
		msgs, err := r.cons.Fetch(int(batch), jetstream.FetchMaxBytes(max(maxBytes, 2*MaxPayload, a.maxHandshake+jsHeaderRoom)), jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			if err := failed(err); err != nil {
				return true, err
			}
			continue
		}
		got := uint64(0)
		for m := range msgs.Messages() {
			got++
			if pe.more {
				continue // drain the batch
			}
			md, err := m.Metadata()
			if err != nil {
				return true, fmt.Errorf("relay: archive read: %w", err)
			}
			if md.Sequence.Stream < r.next {
				continue // a retry's consumer starts no earlier than this
			}
			r.next = md.Sequence.Stream + 1
			h := m.Headers()
			ts, _ := strconv.ParseInt(h.Get(hdrTS), 10, 64)
			typ := h.Get(hdrType)
			if typ == fenceMarker {
				continue
			}
			if ts < cutoff {
				pe.truncated = true // past the TTL, not yet removed
				continue
			}
			if n == limit {
				pe.more = true
				continue
			}
			var et uint8
			if typ != "" {
				x, _ := strconv.ParseUint(typ, 10, 8)
				et = uint8(x)
			}
			fits, err := pe.add(md.Sequence.Stream, et, ts, m.Data())
			if err != nil {
				return true, err
			}
			if fits {
				n++
			} else {
				r.next = md.Sequence.Stream // not in this page
			}
		}
		if err := msgs.Error(); err != nil && !pe.more {
			if err := failed(err); err != nil {
				return true, err
			}
			continue
		}
		if got == 0 {
			// What was pending went meanwhile (the cap, MaxAge or the
			// sweep deleted it), or JetStream is slow: ask what is left.
			if empty++; empty > 3 {
				return true, errors.New("relay: archive read: JetStream sends nothing of a pending page")
			}
			ictx, cancel := context.WithTimeout(ctx, jsTry)
			info, err := r.cons.Info(ictx)
			cancel()
			if err != nil {
				if err := failed(err); err != nil {
					return true, err
				}
				continue
			}
			r.pending = info.NumPending
			continue
		}
		empty = 0
		r.pending -= min(got, r.pending)
	}
	// After the page: the mirror has then seen at least what the stream
	// pushed out before the page was read, so a loss under it is told.
	trunc, oldest := a.floorsOf(name, since, pe.first, hw, cutoff, appOnly)
	pe.truncated = pe.truncated || trunc
	pe.oldest = oldest
	return true, pe.finish()
}

// stop answers everything accepted, then stops the consumer.
func (a *jsArchive) stop() {
	close(a.reqs)
	a.wg.Wait()
	a.stopConsumer()
	close(a.stopSweep)
	<-a.sweepDone
}

func (a *jsArchive) stopConsumer() {
	if a.cons != nil {
		a.cons.Stop()
		<-a.cons.Closed()
		a.cons = nil
	}
}

func (a *jsArchive) close() {
	a.stopConsumer() // when New failed after opening the archive
	a.nc.Close()
}
