package seat

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skytale-oss/skytale/cover"
	"github.com/skytale-oss/skytale/internal/channel"
)

// Config configures a seat. The zero value of each optional field means its
// default.
type Config struct {
	// Home is the seat's folder: its SQLite file and its phrase. Required.
	Home string
	// APIURL and RelayURL are the directory and relay base URLs. Plain
	// http is accepted only for loopback hosts.
	APIURL   string
	RelayURL string
	// HTTPClient is used for every request; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// Cover configures the cover traffic a watch sends on each room while
	// it is connected; the zero value is on at the default rate. With a
	// MeanLifetime, a watch's connections last drawn lifetimes, and
	// [Room.Send] with no watch of the home running sends on a
	// connection of that shape, among cover, and returns when it closes
	// (oneshot.go).
	Cover cover.Config
	// TokenTTL is the lifetime of the relay tokens the seat mints, at most
	// 300 s; zero means the directory's default. Long-lived connections
	// send the relay a fresh token before each one expires.
	TokenTTL time.Duration
}

// Seat is a client bound to one home folder. Its methods are safe for
// concurrent use.
type Seat struct {
	cfg Config
	st  *store

	roomMu sync.Mutex  // serializes room operations (group state is not concurrent)
	closed atomic.Bool // set by Close: a room handle's calls return ErrClosed
	lockf  *os.File    // rooms.lock in the home: serializes them across processes

	mu         sync.Mutex // guards the following fields
	seed       *Seed
	linked     *linkedHome          // a linked device's home: no seed (link.go)
	local      *localSealer         // from the seed, on first use (localseal.go)
	revoked    map[string]time.Time // revoked signing keys seen (revocation.go), loaded on first use
	revFetched map[string]time.Time // when each person's revocations were last fetched
	tokens     map[string]cachedToken
	watching   map[string]*cover.Scheduler // cover schedulers of watched rooms
	swept      map[string]time.Time        // last lapse sweep of each owned room (settle.go)
	// watchConns are the connections of this process's watch, by the
	// channels they follow; handoff is set while it takes sends from
	// other processes of the home (handoff.go).
	watchConns map[string]*Conn
	// watchSubs are the live watch connections of this process, each
	// with the channels beyond its rooms it subscribed to, for pushes of
	// the log (watchpub.go).
	watchSubs map[*Conn]map[string]bool
	handoff   bool

	// addCheck, when set (under the room lock, only while this seat
	// builds a Commit), must accept the identity of every member the
	// Commit adds (devicerooms.go).
	addCheck func(identity string) error

	// testOnlyNoRoleRules makes this seat's engine skip the room roles,
	// as a hostile member's would (tests only).
	testOnlyNoRoleRules bool
	// testOnlyNoRevocations makes this seat's engine skip the revocation
	// rules, as a hostile or out-of-date member's would (tests only).
	testOnlyNoRevocations bool

	// processingAt, under the room lock, is when the relay archived the
	// entry being applied; zero while this seat builds its own Commit.
	processingAt time.Time
}

type cachedToken struct {
	token string
	exp   time.Time
	life  time.Duration
}

// Open opens (creating if needed) the seat in cfg.Home.
func Open(ctx context.Context, cfg Config) (*Seat, error) {
	if cfg.Home == "" {
		return nil, errors.New("seat: no home folder")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for _, u := range []string{cfg.APIURL, cfg.RelayURL} {
		if u != "" {
			if err := CheckURL(u); err != nil {
				return nil, err
			}
		}
	}
	st, err := openStore(ctx, cfg.Home)
	if err != nil {
		return nil, err
	}
	s := &Seat{cfg: cfg, st: st, tokens: map[string]cachedToken{}}
	st.local = s.sealer
	if s.lockf, err = os.OpenFile(filepath.Join(cfg.Home, "rooms.lock"), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		st.close()
		return nil, fmt.Errorf("seat: home folder: %w", err)
	}
	if b, err := os.ReadFile(s.phrasePath()); err == nil {
		p, err := ParsePhrase(strings.TrimSpace(string(b)))
		if err != nil {
			s.Close(ctx)
			return nil, fmt.Errorf("seat: the phrase file in the home folder is damaged: %w", err)
		}
		s.seed = p.Seed()
		if err := s.sealLegacy(ctx); err != nil {
			s.Close(ctx)
			return nil, fmt.Errorf("seat: sealing the home's stored secrets: %w", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		s.Close(ctx)
		return nil, err
	} else if err := s.loadLinked(ctx); err != nil {
		s.Close(ctx)
		return nil, err
	}
	return s, nil
}

// CheckURL accepts https URLs, and http URLs whose host is loopback.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("seat: %q is not a URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
		return fmt.Errorf("seat: plain http is allowed only to loopback, not %s: use https", host)
	default:
		return fmt.Errorf("seat: %q: scheme must be https (or http to loopback)", raw)
	}
}

// Close closes the seat: new calls of its room handles return ErrClosed
// at once, room operations in flight finish (until ctx is done), then the
// lock file and the store close. A watch is not stopped by Close: cancel
// its context first. After ctx is done Close closes anyway, and what was
// still in flight fails on the closed store. Closing again does nothing.
func (s *Seat) Close(ctx context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	locked := make(chan struct{})
	go func() {
		s.roomMu.Lock()
		close(locked)
	}()
	select {
	case <-locked:
		defer s.roomMu.Unlock()
	case <-ctx.Done():
		// The operation holding the lock ends on its own (the store
		// closing under it makes it fail); the lock is released after it.
		go func() {
			<-locked
			s.roomMu.Unlock()
		}()
	}
	s.lockf.Close()
	return s.st.close()
}

// lockRooms serializes room operations within the process and, through a
// lock file in the home, across processes sharing the home (a watch in one
// terminal, an admit loop in another), so none applies a relay entry or
// publishes a commit on a state another is changing.
func (s *Seat) lockRooms() {
	s.roomMu.Lock()
	lockFile(s.lockf)
}

func (s *Seat) unlockRooms() {
	unlockFile(s.lockf)
	s.roomMu.Unlock()
}

func (s *Seat) phrasePath() string { return filepath.Join(s.cfg.Home, "phrase") }

// Init creates a new 24-word phrase in the home folder and returns the
// seat's identity (a did:key). The phrase is shown only by [Seat.Phrase].
func (s *Seat) Init(ctx context.Context) (string, error) {
	p, err := NewPhrase(nil)
	if err != nil {
		return "", err
	}
	did, err := s.install(p)
	if err != nil {
		return "", err
	}
	return did, s.sealLegacy(ctx)
}

// Restore installs an existing phrase (a second home, or a new device).
func (s *Seat) Restore(ctx context.Context, phrase string) (string, error) {
	p, err := ParsePhrase(phrase)
	if err != nil {
		return "", err
	}
	did, err := s.install(p)
	if err != nil {
		return "", err
	}
	// What the home held before it had a phrase is sealed under this one.
	if err := s.sealLegacy(ctx); err != nil {
		return "", err
	}
	// Another home may hold the same phrase: this one's room leaves are
	// signed by a device key of its own (devicerooms.go).
	return did, s.makeDeviceKey(ctx)
}

func (s *Seat) install(p *Phrase) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seed != nil {
		return "", ErrSeedExists
	}
	if s.linked != nil {
		return "", ErrLinkedHome
	}
	f, err := os.OpenFile(s.phrasePath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", ErrSeedExists
		}
		return "", err
	}
	_, err = f.WriteString(strings.Join(p.Words(), " ") + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(s.phrasePath())
		return "", err
	}
	s.seed = p.Seed()
	return s.seed.Identity().DID(), nil
}

// Phrase returns the 24 words: the deliberate backup ceremony.
func (s *Seat) Phrase() ([]string, error) {
	b, err := os.ReadFile(s.phrasePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNoSeed
	}
	if err != nil {
		return nil, err
	}
	p, err := ParsePhrase(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, err
	}
	return p.Words(), nil
}

func (s *Seat) getSeed() (*Seed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seed == nil {
		return nil, ErrNoSeed
	}
	return s.seed, nil
}

// Identity returns the seat's did:key.
func (s *Seat) Identity() (string, error) {
	did, _, err := s.person()
	return did, err
}

func (s *Seat) directory(cred string) *DirectoryClient {
	return &DirectoryClient{BaseURL: s.cfg.APIURL, Credential: cred, HTTP: s.cfg.HTTPClient, TokenTTL: s.cfg.TokenTTL}
}

// SignIn creates an account on a directory with open signup and keeps its
// API key in the home folder. The org must be new (the account becomes its
// owner); an existing org fails with [ErrOrgTaken], see
// [Seat.SignInInvited].
func (s *Seat) SignIn(ctx context.Context, email, org string) (Account, error) {
	return s.SignInInvited(ctx, email, org, "")
}

// SignInInvited is SignIn into an existing org with an org invite minted by
// one of its accounts ([Seat.OrgInvite]).
func (s *Seat) SignInInvited(ctx context.Context, email, org, orgInvite string) (Account, error) {
	if s.cfg.APIURL == "" {
		return Account{}, ErrNoDirectoryURL
	}
	switch _, err := s.st.meta(ctx, "api_key"); {
	case err == nil:
		return Account{}, ErrSignedIn
	case !errors.Is(err, errNoValue):
		return Account{}, err // a key this home's seed does not open
	}
	a, err := s.directory("").CreateAccountInvited(ctx, email, org, orgInvite)
	if err != nil {
		return Account{}, err
	}
	if err := s.st.setMeta(ctx, "account_id", a.AccountID, "org", a.Org, "api_key", a.APIKey); err != nil {
		return Account{}, err
	}
	// Join offers, so that others can add this person while it is away
	// (stock.go). A directory without stocks refuses; nothing is lost.
	s.Restock(ctx)
	return a, nil
}

// AccountID returns this home's directory account id, or
// ErrNotSignedIn.
func (s *Seat) AccountID(ctx context.Context) (string, error) {
	v, err := s.st.meta(ctx, "account_id")
	if errors.Is(err, errNoValue) {
		return "", ErrNotSignedIn
	}
	return v, err
}

// OrgInvite mints an invite into this account's org for a new account,
// which signs in with it through [Seat.SignInInvited]. Zero values take the
// directory's defaults (one use, one hour).
func (s *Seat) OrgInvite(ctx context.Context, uses int, ttl time.Duration) (string, time.Time, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	org, err := s.Org(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	return s.directory(key).OrgInvite(ctx, org, uses, int(ttl/time.Second))
}

// UseAccount stores an existing account's API key (as a device grant
// delivers it). The key is stored sealed under the home's seed, so the
// home needs its phrase first ([ErrNoSeed]).
func (s *Seat) UseAccount(ctx context.Context, accountID, org, apiKey string) error {
	return s.st.setMeta(ctx, "account_id", accountID, "org", org, "api_key", apiKey)
}

// Org returns the signed-in account's org.
func (s *Seat) Org(ctx context.Context) (string, error) {
	org, err := s.st.meta(ctx, "org")
	if errors.Is(err, errNoValue) {
		return "", ErrNotSignedIn
	}
	return org, err
}

func (s *Seat) apiKey(ctx context.Context) (string, error) {
	k, err := s.st.meta(ctx, "api_key")
	if errors.Is(err, errNoValue) {
		return "", ErrNotSignedIn
	}
	return k, err
}

// SyncChannel is the seat's own channel: <org>/tally/<hex of the identity
// public key>.
func (s *Seat) SyncChannel(ctx context.Context) (string, error) {
	_, pub, err := s.person()
	if err != nil {
		return "", err
	}
	org, err := s.Org(ctx)
	if err != nil {
		return "", err
	}
	ch := fmt.Sprintf("%s/tally/%x", org, []byte(pub))
	return ch, channel.Valid(ch)
}

// Connect registers the seat identity and its sync channel with the
// directory and keeps the channel-scoped transport credential. A home
// that holds one already (it connected, or [Seat.Restock] registered it
// so that its join offers are bound to its identity) is connected.
func (s *Seat) Connect(ctx context.Context) (string, error) {
	key, err := s.apiKey(ctx)
	if err != nil {
		return "", err
	}
	ch, err := s.SyncChannel(ctx)
	if err != nil {
		return "", err
	}
	if _, err := s.st.meta(ctx, "seat_credential"); err == nil || s.IsLinked() {
		// Connected, or a linked device, whose own API key is its sync
		// credential; the credential must still be good.
		if _, _, err := s.directory(key).Token(ctx); err != nil {
			return "", revokedOr(err)
		}
		return ch, nil
	}
	seed, err := s.getSeed()
	if err != nil {
		return "", err
	}
	account, err := s.st.meta(ctx, "account_id")
	if err != nil {
		return "", err
	}
	person := seed.Identity()
	seatID, cred, err := s.directory(key).RegisterSeat(ctx, person.DID(), ch, SeatProof(person, account, ch))
	if err != nil {
		return "", err
	}
	if err := s.st.setMeta(ctx, "seat_id", seatID, "seat_credential", cred); err != nil {
		return "", err
	}
	return ch, nil
}

// syncCredential is the credential for the sync channel: the seat's
// channel-scoped key once connected, else the account key.
func (s *Seat) syncCredential(ctx context.Context) (string, error) {
	c, err := s.st.meta(ctx, "seat_credential")
	if errors.Is(err, errNoValue) {
		return s.apiKey(ctx)
	}
	return c, err
}

// relay returns a relay client whose tokens are minted from cred and
// cached until shortly before they expire (30 s, or a third of a shorter
// lifetime); its connections refresh their tokens with newly minted ones.
func (s *Seat) relay(cred string) *RelayClient {
	mint := func(ctx context.Context) (string, error) {
		start := s.cfg.Now()
		tok, exp, err := s.directory(cred).Token(ctx)
		if err != nil {
			return "", err
		}
		s.mu.Lock()
		s.tokens[cred] = cachedToken{tok, exp, exp.Sub(start)}
		s.mu.Unlock()
		return tok, nil
	}
	return &RelayClient{BaseURL: s.cfg.RelayURL, HTTP: s.cfg.HTTPClient, Refresh: mint, Token: func(ctx context.Context) (string, error) {
		s.mu.Lock()
		t, ok := s.tokens[cred]
		s.mu.Unlock()
		if ok && s.cfg.Now().Add(min(30*time.Second, t.life/3)).Before(t.exp) {
			return t.token, nil
		}
		return mint(ctx)
	}}
}

// Add appends text to the local log.
func (s *Seat) Add(ctx context.Context, text string) (Entry, error) {
	if _, _, err := s.person(); err != nil {
		return Entry{}, err
	}
	if len(text) > MaxTextLen {
		return Entry{}, fmt.Errorf("seat: entry longer than %d bytes", MaxTextLen)
	}
	e := NewEntry(text, s.cfg.Now())
	return e, s.st.appendLog(ctx, e)
}

// Log returns the local log, oldest first.
func (s *Seat) Log(ctx context.Context) ([]Entry, error) { return s.st.listLog(ctx) }

// Push seals the entries added since the last push into padded batches and
// publishes them on the sync channel. It returns how many entries it pushed.
// An entry is marked pushed only after the relay acknowledged its batch.
func (s *Seat) Push(ctx context.Context) (int, error) { return s.PushWith(ctx, nil) }

// PushWith is Push, calling progress (if set) after each batch with the
// batches sent and their total.
//
// A watch of this home running in another process pushes them on its
// connection (handoff.go); progress then hears only the end.
func (s *Seat) PushWith(ctx context.Context, progress func(sent, total int)) (int, error) {
	if rep, ok := s.handOff(ctx, handoffRequest{Kind: handPush}); ok {
		if progress != nil && rep.Batches > 0 {
			progress(rep.Batches, rep.Batches)
		}
		return rep.Pushed, rep.err()
	}
	return s.push(ctx, progress)
}

// push is PushWith in this process.
func (s *Seat) push(ctx context.Context, progress func(sent, total int)) (int, error) {
	ch, err := s.SyncChannel(ctx)
	if err != nil {
		return 0, err
	}
	entries, last, err := s.st.unpushed(ctx)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	cred, err := s.syncCredential(ctx)
	if err != nil {
		return 0, err
	}
	// Seal under the newest epoch there is (synckeys.go).
	if err := s.learnKeys(ctx, ch, cred); err != nil {
		return 0, err
	}
	key, err := s.newestSyncKey(ctx)
	if err != nil {
		return 0, err
	}
	batches, err := key.SealAll(ch, entries)
	if err != nil {
		return 0, err
	}
	// On a watch's connection in this process, if one runs (watchpub.go):
	// only once the home is connected, when the channel is its
	// account's (a refused subscription would end the watch's
	// connection).
	onWatch := func(context.Context) *Conn { return nil }
	if _, err := s.st.meta(ctx, "seat_credential"); err == nil || s.IsLinked() {
		onWatch = s.syncOnWatch(ch)
	}
	conn, err := newWatchPub(ctx, ch, onWatch, func(ctx context.Context) (*Publisher, error) { return s.relay(cred).DialPublisher(ctx, ch) })
	if err != nil {
		return 0, revokedOr(err)
	}
	defer conn.Close()
	for i, b := range batches {
		if _, err := conn.Publish(ctx, ch, b); err != nil {
			return 0, revokedOr(err)
		}
		if progress != nil {
			progress(i+1, len(batches))
		}
	}
	return len(entries), s.st.markPushed(ctx, last)
}

// Pull fetches the sync channel since the last seen seq, opens every batch
// and merges its entries. It returns how many entries were new here.
// Progress, if set, is called after each page with the seq reached.
func (s *Seat) Pull(ctx context.Context, progress func(seq uint64)) (int, error) {
	ch, err := s.SyncChannel(ctx)
	if err != nil {
		return 0, err
	}
	cred, err := s.syncCredential(ctx)
	if err != nil {
		return 0, err
	}
	var since uint64
	if v, err := s.st.meta(ctx, "pull_seq"); err == nil {
		since, _ = strconv.ParseUint(v, 10, 64)
	}
	keys, err := s.keyMap(ctx)
	if err != nil {
		return 0, err
	}
	rc := s.relay(cred)
	added := 0
	for {
		page, more, err := rc.Sync(ctx, ch, since, 500)
		if err != nil {
			return added, revokedOr(err)
		}
		var entries []Entry
		for _, e := range page {
			// A key bundle (synckeys.go) comes before anything sealed
			// under its epoch.
			if bundle, err := s.installKeyBundle(ctx, ch, e.Payload, keys); bundle || err != nil {
				if err != nil {
					return added, err
				}
				continue
			}
			epoch, err := BatchEpoch(e.Payload)
			if err != nil || keys[epoch] == nil {
				continue // not ours, or of an epoch this device was not given
			}
			b, err := keys[epoch].Open(ch, e.Payload)
			if err != nil {
				// Something on our channel that we did not seal: skip it,
				// it cannot be ours.
				continue
			}
			entries = append(entries, b.Entries...)
		}
		if len(page) > 0 {
			since = page[len(page)-1].Seq
			n, err := s.st.merge(ctx, entries, "pull_seq", since)
			if err != nil {
				return added, err
			}
			added += n
			if progress != nil {
				progress(since)
			}
		}
		if !more || len(page) == 0 {
			return added, nil
		}
	}
}
