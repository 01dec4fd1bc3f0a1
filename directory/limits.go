package directory

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/skytale-oss/skytale/internal/clientaddr"
	"github.com/skytale-oss/skytale/internal/ratelimit"
)

// Limits configures the directory's abuse controls: token buckets per
// remote address and per account for the requests that create state or
// credentials, and a cap on the open device grants of one address. A zero
// field means its default (see [DefaultLimits]).
//
// The remote address is the IP of the TCP peer (http.Request.RemoteAddr),
// IPv6 clients counted by /64. Behind a reverse proxy every client has the
// proxy's address, so the per-address buckets become one bucket for
// everyone: set Config.TrustedProxies to the proxies' addresses, and the
// client is the one they forwarded for (X-Forwarded-For), and make sure
// clients cannot reach the directory from those addresses except through
// the proxies. Per-account buckets are not affected by proxies.
//
// A refused request is answered 429 {"error": "rate_limited"} with a
// Retry-After header (whole seconds). Requests with the internal secret
// (the operator) are never limited.
type Limits struct {
	// Off turns every rate limit and the per-address cap on open device
	// grants off: for benchmarks and test rigs that drive the directory
	// from one address, never for a directory that faces the network.
	Off bool

	// Signup limits POST /v1/accounts (per address only: there is no
	// account yet).
	Signup Rate
	// SignupPerNet limits POST /v1/accounts per network of the address
	// (an IPv4 /24, an IPv6 /64), so the addresses of one block do not
	// each get Signup's burst: the accounts of one network also share
	// one storage budget on the relay (their signup group).
	SignupPerNet Bucket
	// Token limits POST /v1/tokens, the sign-in of every client.
	Token Rate
	// Channel limits POST /v1/channels and POST /v1/seats (which may
	// register a channel).
	Channel Rate
	// Invite limits POST /v1/channels/invites, POST /v1/federation/invites
	// and POST /v1/orgs/invites together.
	Invite Rate
	// Grant limits POST /v1/device/grants (per address only: it takes no
	// credential) and POST /v1/device/grants/approve and /lookup (where a
	// guessed user code is tried).
	Grant Rate
	// Join limits POST /v1/channels/join.
	Join Rate
	// Member limits the changes owners make to the channel feed every
	// relay applies: POST and DELETE /v1/channels/members and
	// POST /v1/channels/fence, and POST /v1/inbox (which makes the
	// claimed account a member).
	Member Rate
	// Stock limits the uploads to an account's key-package stock
	// (POST /v1/keypackages) and the acknowledgements of its claims
	// (DELETE /v1/keypackages/claims).
	Stock Rate
	// Claim limits POST /v1/keypackages/claim: each claim drains another
	// account's stock, so the per-account bucket is small (30 a minute).
	Claim Rate
	// GroupInfo limits PUT /v1/channels/groupinfo, which a member sends
	// after each of its commits.
	GroupInfo Rate
	// Tree limits PUT /v1/channels/tree, one request per part of a
	// ratchet tree (up to 64 per tree) that a member puts beside a
	// Welcome or a GroupInfo.
	Tree Rate
	// Read limits the GETs that answer blobs or lists (the inbox, pending
	// requests, Welcomes, the stock, members, add-tokens, GroupInfo and
	// tree parts; reads.go): generous, for seats that poll, and a bound
	// on how often a crowd can make the directory build large answers.
	Read Rate

	// ReadsPerAccount bounds the reads of one account in flight at once
	// (default 4; negative for no bound), and ReadBytes the bytes of
	// answers in flight on the whole server, counted as 4 MiB (the page
	// bound) per read (default 128 MiB: 32 reads, 8 accounts' worth;
	// negative for no bound). A read past either waits up to a second
	// for a slot, then is 429 rate_limited. These bound memory, not
	// rates, and Off leaves them on.
	ReadsPerAccount int
	ReadBytes       int64

	// OpenGrantsPerAddr bounds the device grants one remote address may
	// have pending at once (default 20; negative for no cap); one more is
	// 429 too_many_grants with a Retry-After until the oldest expires.
	OpenGrantsPerAddr int

	// MaxKeys bounds the addresses (or accounts) each bucket set tracks
	// at once (default 10,000; a tracked key costs a few hundred bytes).
	// Buckets left alone until full are forgotten; past MaxKeys busy keys
	// the least recently seen is forgotten early, which hands it a full
	// bucket again: a flood of distinct addresses costs bounded memory
	// and can never make the directory refuse an address with tokens left.
	MaxKeys int
}

// Rate is the pair of token buckets of one kind of request.
type Rate struct {
	PerAddr    Bucket // per remote address
	PerAccount Bucket // per authenticated account (unused for Signup)
}

// Bucket holds Burst requests and gains one every Every. A zero field
// takes the default; a negative Burst means no limit.
type Bucket struct {
	Burst int
	Every time.Duration
}

// DefaultLimits are the limits a zero [Limits] stands for. They are meant
// to stop floods, not to shape ordinary use: a client signing in every few
// minutes, an owner creating rooms and invites by hand, or an office of
// users behind one NAT address stay well inside them.
var DefaultLimits = Limits{
	Signup:            Rate{PerAddr: Bucket{Burst: 20, Every: 3 * time.Minute}},
	SignupPerNet:      Bucket{Burst: 50, Every: 10 * time.Minute},
	Token:             Rate{PerAddr: Bucket{Burst: 300, Every: 200 * time.Millisecond}, PerAccount: Bucket{Burst: 60, Every: time.Second}},
	Channel:           Rate{PerAddr: Bucket{Burst: 100, Every: time.Second}, PerAccount: Bucket{Burst: 50, Every: 2 * time.Second}},
	Invite:            Rate{PerAddr: Bucket{Burst: 100, Every: time.Second}, PerAccount: Bucket{Burst: 50, Every: 2 * time.Second}},
	Grant:             Rate{PerAddr: Bucket{Burst: 20, Every: 15 * time.Second}, PerAccount: Bucket{Burst: 20, Every: 15 * time.Second}},
	Join:              Rate{PerAddr: Bucket{Burst: 200, Every: 500 * time.Millisecond}, PerAccount: Bucket{Burst: 100, Every: time.Second}},
	Member:            Rate{PerAddr: Bucket{Burst: 400, Every: 100 * time.Millisecond}, PerAccount: Bucket{Burst: 200, Every: 200 * time.Millisecond}},
	Stock:             Rate{PerAddr: Bucket{Burst: 200, Every: 500 * time.Millisecond}, PerAccount: Bucket{Burst: 60, Every: time.Second}},
	Claim:             Rate{PerAddr: Bucket{Burst: 100, Every: 500 * time.Millisecond}, PerAccount: Bucket{Burst: 30, Every: 2 * time.Second}},
	GroupInfo:         Rate{PerAddr: Bucket{Burst: 400, Every: 100 * time.Millisecond}, PerAccount: Bucket{Burst: 200, Every: 200 * time.Millisecond}},
	Tree:              Rate{PerAddr: Bucket{Burst: 400, Every: 100 * time.Millisecond}, PerAccount: Bucket{Burst: 200, Every: 200 * time.Millisecond}},
	Read:              Rate{PerAddr: Bucket{Burst: 1000, Every: 20 * time.Millisecond}, PerAccount: Bucket{Burst: 300, Every: 50 * time.Millisecond}},
	OpenGrantsPerAddr: 20,
	ReadsPerAccount:   4,
	ReadBytes:         128 << 20,
	MaxKeys:           10000,
}

// limitKind names a Rate of Limits.
type limitKind int

const (
	limitSignup limitKind = iota
	limitToken
	limitChannel
	limitInvite
	limitGrant
	limitJoin
	limitMember
	limitStock
	limitClaim
	limitGroupInfo
	limitTree
	limitRead
	numLimits
)

var limitNames = [numLimits]string{"sign-up", "token", "channel", "invite", "device grant", "join", "membership",
	"key-package upload", "key-package claim", "GroupInfo", "ratchet tree", "read"}

// limiters holds the live buckets; nil buckets allow everything.
type limiters struct {
	addr    [numLimits]*ratelimit.Keyed
	account [numLimits]*ratelimit.Keyed
	// signupNet is Limits.SignupPerNet, keyed by the client's network.
	signupNet *ratelimit.Keyed
	// trusted are the reverse proxies whose X-Forwarded-For names the
	// client (Config.TrustedProxies).
	trusted []netip.Prefix
	// openGrants caps the open device grants of one address; 0 for no cap.
	openGrants int
}

// rates are l's Rates, indexed by limitKind.
func (l *Limits) rates() [numLimits]*Rate {
	return [numLimits]*Rate{&l.Signup, &l.Token, &l.Channel, &l.Invite, &l.Grant, &l.Join, &l.Member, &l.Stock, &l.Claim, &l.GroupInfo, &l.Tree, &l.Read}
}

// resolveLimits fills the zero fields of l with the defaults.
func resolveLimits(l Limits) Limits {
	d := DefaultLimits
	defs := d.rates()
	for i, r := range l.rates() {
		r.PerAddr = resolveBucket(r.PerAddr, defs[i].PerAddr)
		r.PerAccount = resolveBucket(r.PerAccount, defs[i].PerAccount)
	}
	l.SignupPerNet = resolveBucket(l.SignupPerNet, d.SignupPerNet)
	if l.OpenGrantsPerAddr == 0 {
		l.OpenGrantsPerAddr = d.OpenGrantsPerAddr
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = d.MaxKeys
	}
	if l.ReadsPerAccount == 0 {
		l.ReadsPerAccount = d.ReadsPerAccount
	}
	if l.ReadBytes == 0 {
		l.ReadBytes = d.ReadBytes
	}
	return l
}

func resolveBucket(b, def Bucket) Bucket {
	if b.Burst == 0 {
		b.Burst = def.Burst
	}
	if b.Every <= 0 {
		b.Every = def.Every
	}
	return b
}

func newLimiters(l Limits, trusted []netip.Prefix) *limiters {
	lim := &limiters{trusted: trusted}
	if l.Off {
		return lim
	}
	lim.openGrants = max(l.OpenGrantsPerAddr, 0)
	lim.signupNet = newKeyed(l.SignupPerNet, l.MaxKeys)
	for i, r := range l.rates() {
		lim.addr[i] = newKeyed(r.PerAddr, l.MaxKeys)
		if limitKind(i) != limitSignup {
			lim.account[i] = newKeyed(r.PerAccount, l.MaxKeys)
		}
	}
	return lim
}

func newKeyed(b Bucket, maxKeys int) *ratelimit.Keyed {
	if b.Burst < 0 || b.Every <= 0 {
		return nil
	}
	return ratelimit.NewKeyed(b.Every, b.Burst, maxKeys)
}

// clientAddr is the rate-limit key of the request's client: its address
// (internal/clientaddr: the TCP peer, or behind a trusted proxy the client
// it forwarded for), IPv6 counted by /64.
func (l *limiters) clientAddr(r *http.Request) string {
	a, ok := clientaddr.Of(r, l.trusted)
	if !ok {
		return ratelimit.AddrKey(r.RemoteAddr)
	}
	return ratelimit.AddrKey(a.String())
}

// allowAddr takes a token of kind for the request's address. On refusal
// it writes the 429 and returns false.
func (s *Server) allowAddr(w http.ResponseWriter, r *http.Request, kind limitKind) bool {
	ok, retry := s.limits.addr[kind].Allow(s.limits.clientAddr(r), s.cfg.Now())
	if !ok {
		s.metrics.refusal(kind, "address")
		rateLimited(w, retry, "too many "+limitNames[kind]+" requests from this address")
	}
	return ok
}

// clientNet is the request client's network (IPv4 /24, IPv6 /64), and
// false when the peer address does not parse.
func (l *limiters) clientNet(r *http.Request) (netip.Prefix, bool) {
	a, ok := clientaddr.Of(r, l.trusted)
	if !ok {
		return netip.Prefix{}, false
	}
	return clientaddr.Net(a), true
}

// allowSignup takes a signup token of the request's address, then one of
// its network. On refusal it writes the 429 and returns false.
func (s *Server) allowSignup(w http.ResponseWriter, r *http.Request) bool {
	if !s.allowAddr(w, r, limitSignup) {
		return false
	}
	n, ok := s.limits.clientNet(r)
	if !ok {
		return true
	}
	allowed, retry := s.limits.signupNet.Allow(n.String(), s.cfg.Now())
	if !allowed {
		s.metrics.refusal(limitSignup, "network")
		rateLimited(w, retry, "too many sign-up requests from this network")
	}
	return allowed
}

// allowAccount takes a token of kind for account. On refusal it writes the
// 429 and returns false.
func (s *Server) allowAccount(w http.ResponseWriter, kind limitKind, account string) bool {
	ok, retry := s.limits.account[kind].Allow(account, s.cfg.Now())
	if !ok {
		s.metrics.refusal(kind, "account")
		rateLimited(w, retry, "too many "+limitNames[kind]+" requests from this account")
	}
	return ok
}

// limited is authed with the buckets of kind (see authLimited).
func (s *Server) limited(kind limitKind, h func(http.ResponseWriter, *http.Request, principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p, ok := s.authLimited(w, r, kind); ok {
			h(w, r, p)
		}
	}
}

// authLimited authenticates the request between the buckets of kind: the
// address's before the credential is looked up, the account's after. On
// false the answer has been written.
func (s *Server) authLimited(w http.ResponseWriter, r *http.Request, kind limitKind) (principal, bool) {
	if !s.allowAddr(w, r, kind) {
		return principal{}, false
	}
	p, ok := s.authenticate(w, r)
	if !ok || !s.allowAccount(w, kind, p.account) {
		return principal{}, false
	}
	return p, true
}

// retrySeconds is a Retry-After value: whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int64 {
	if d >= time.Duration(math.MaxInt64)-time.Second {
		return math.MaxInt32
	}
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

func rateLimited(w http.ResponseWriter, retry time.Duration, msg string) {
	secs := retrySeconds(retry)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	writeError(w, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("%s; retry in %d s", msg, secs))
}

// grantCapError is errTooManyGrants with the time until the address's
// oldest open grant expires.
type grantCapError struct{ retry time.Duration }

func (e *grantCapError) Error() string { return errTooManyGrants.Error() }
func (e *grantCapError) Unwrap() error { return errTooManyGrants }

func retryAfterFor(w http.ResponseWriter, err error) {
	var ce *grantCapError
	if errors.As(err, &ce) {
		w.Header().Set("Retry-After", strconv.FormatInt(retrySeconds(ce.retry), 10))
	}
}
